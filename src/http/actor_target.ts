/**
 * The actor a path `/actor/<class>/<name>[/<rest>]` names.
 *
 * @module
 */

import { actorNameProblem } from "../actors/key.ts";

/** An actor path's class, name and what follows the name. */
export interface ActorTarget {
  className: string;
  name: string;
  /** What follows the name, `/` when nothing does. */
  rest: string;
}

/**
 * The actor a path `/actor/<class>/<name>[/<rest>]` names, with what
 * follows its name (`/` when nothing does); or the status and line of the
 * answer refusing it (400 for a name that is not valid, 404 for a class
 * this node does not have).
 *
 * @example
 * ```ts
 * import { actorTarget } from "./actor_target.ts";
 * actorTarget("/actor/room/lobby/chat", () => true); // { className: "room", name: "lobby", rest: "/chat" }
 * ```
 */
export function actorTarget(
  pathname: string,
  hasClass: (name: string) => boolean,
): ActorTarget | { status: number; line: string } {
  const [, , rawClass, rawName, ...rest] = pathname.split("/");
  let className: string;
  let name: string;
  try {
    className = decodeURIComponent(rawClass);
    name = decodeURIComponent(rawName ?? "");
  } catch {
    return { status: 400, line: "bad request: the path is not valid percent-encoding" };
  }
  if (!hasClass(className)) {
    return { status: 404, line: `no actor class '${className}' on this node` };
  }
  const problem = actorNameProblem(name);
  if (problem) return { status: 400, line: `bad actor name: ${problem}` };
  return { className, name, rest: rest.length > 0 ? "/" + rest.join("/") : "/" };
}
