/**
 * The classes an executor runs, as programs, and the seq of the app's
 * version they are (ADR 0008). A new version replaces the set; a class
 * whose code and configuration did not change keeps its program, so its
 * actors keep their instances (rules alone drop nothing).
 *
 * @module
 */

import { assert } from "../assert.ts";
import type { ActorKey } from "../actors/key.ts";
import type { ExecutorClass } from "../actors/protocol.ts";
import { EventFailure } from "../actors/event_failure.ts";
import type { ActorProgram } from "./program.ts";

/** Whether two versions of a class run the same: its code, bindings and configuration. */
function sameClass(a: ExecutorClass, b: ExecutorClass): boolean {
  if (a.hash !== b.hash || a.directModule !== b.directModule) return false;
  const names = Object.keys(a.config);
  return names.length === Object.keys(b.config).length &&
    names.every((name) => Object.hasOwn(b.config, name) && b.config[name] === a.config[name]);
}

/**
 * The programs of the version an executor has.
 *
 * @example
 * ```ts
 * import { ProgramSet } from "./program_set.ts";
 * import { type ActorProgram, componentProgram } from "./program.ts";
 * import type { ExecutorClass, ExecutorInit } from "../actors/protocol.ts";
 * declare const init: ExecutorInit;
 * declare const initialPrograms: Map<string, ActorProgram>;
 * declare const classes: ExecutorClass[];
 * const programs = new ProgramSet(initialPrograms, init.deploySeq, init.deployLine);
 * await programs.replace(2, init.deployLine, classes, (changed) =>
 *   Promise.all(changed.map(componentProgram)));
 * const program = programs.of({ tenant: "default", class: "counter", name: "a" });
 * ```
 */
export class ProgramSet {
  #programs: Map<string, ActorProgram>;
  #seq: number;
  #line: string;

  constructor(programs: Map<string, ActorProgram>, seq: number, line: string) {
    this.#programs = programs;
    this.#seq = seq;
    this.#line = line;
  }

  /** The seq of the app's version these are (0: no app). */
  get seq(): number {
    return this.#seq;
  }

  /** The line the seq counts in ("" without one). */
  get line(): string {
    return this.#line;
  }

  /** The program of `key`'s class; a 404 when the version has no such class. */
  of(key: ActorKey): ActorProgram {
    const program = this.#programs.get(key.class);
    if (!program) {
      throw new EventFailure(404, `the app's version this node runs has no class '${key.class}'`);
    }
    return program;
  }

  /** Becomes the version `seq` of `line`, `classes`; `make` compiles the classes that changed. */
  async replace(
    seq: number,
    line: string,
    classes: ExecutorClass[],
    make: (changed: ExecutorClass[]) => Promise<ActorProgram[]>,
  ): Promise<void> {
    assert(
      seq >= this.#seq || line !== this.#line,
      `a version's seq goes back within its line: ${this.#seq} to ${seq}`,
    );
    const kept = new Map<string, ActorProgram>();
    const changed: ExecutorClass[] = [];
    for (const spec of classes) {
      const old = this.#programs.get(spec.className);
      if (old && sameClass(old.spec, spec)) kept.set(spec.className, old);
      else changed.push(spec);
    }
    for (const program of await make(changed)) kept.set(program.spec.className, program);
    this.#programs = kept;
    this.#seq = seq;
    this.#line = line;
  }
}
