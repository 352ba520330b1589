/**
 * The worker that transpiles one component off the node's main thread
 * (component.ts): it takes the component's bytes, answers one
 * {@linkcode Transpiled}, and is ended.
 *
 * @module
 */

import { transpileComponent, type Transpiled } from "./component_transpile.ts";

/** The worker's own scope, as Deno gives it to a module worker. */
const scope = self as unknown as {
  onmessage: ((event: MessageEvent<Uint8Array>) => void) | null;
  postMessage(message: Transpiled): void;
};

scope.onmessage = async (event) => {
  let made: Transpiled;
  try {
    made = await transpileComponent(event.data);
  } catch (error) {
    made = {
      ok: false,
      problem: `cannot be transpiled: ${String((error as Error)?.message ?? error)}`,
    };
  }
  scope.postMessage(made);
};
