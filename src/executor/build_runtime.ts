/**
 * How an executor's runtime is made from its node's `init` message and the
 * seams of the process it runs in: the same function for a real executor
 * process (main.ts: components, the system's clock, its own bucket client
 * on the node's socket) and for the simulator's executors
 * (sim/executor_host.ts: its program, the simulated clock and bucket, its
 * queue), so the simulator runs the executor that ships.
 *
 * @module
 */

import type { Logger } from "../log.ts";
import type { ExecutorClass, ExecutorInit, FromExecutor } from "../actors/protocol.ts";
import type { Bucket } from "../bucket/bucket.ts";
import { countedBucket, RequestTally } from "../bucket/counted.ts";
import type { Clock, Random, Timer } from "../time/clock.ts";
import type { ActorProgram } from "./program.ts";
import { ExecutorRuntime } from "./runtime.ts";
import type { RuntimeOptions } from "./runtime_options.ts";

/** How long after a bucket request an executor tells its node the requests it made, at most. */
export const BUCKET_TALLY_MS = 1_000;

/** What an executor's runtime is made with besides its `init` message: its process's seams. */
export interface ExecutorSeams {
  clock: Clock;
  /** Error ids. */
  random: Random;
  log: Logger;
  /** Opens the executor's own client of the node's bucket (`init.bucketUrl`). */
  openBucket(init: ExecutorInit): Bucket;
  /** Makes the program of a class (its component). */
  program(spec: ExecutorClass): Promise<ActorProgram>;
  /** Sends a message to the node. */
  post(message: FromExecutor): void;
  /** Resolves once every message posted so far left. */
  drain(): Promise<void>;
  /** Makes the pool of open databases; by default the runtime's. */
  databases?: RuntimeOptions["databases"];
  observer?: RuntimeOptions["observer"];
  /** Deliberately broken variants for the simulator; absent in a real executor. */
  planted?: RuntimeOptions["planted"];
}

/**
 * Makes an executor's runtime: the programs of `init`'s classes, and its
 * bucket, also on a standalone node (for the alarm index), its requests
 * counted and told to the node within {@linkcode BUCKET_TALLY_MS} (the
 * node's `wasmkeep_bucket_requests_total`).
 *
 * @example
 * ```ts
 * import { buildExecutorRuntime } from "./build_runtime.ts";
 * import { componentProgram } from "./program.ts";
 * import type { ExecutorInit } from "../actors/protocol.ts";
 * import type { FrameSender } from "../actors/frames.ts";
 * import type { Plain } from "../actors/codec.ts";
 * import { openBucket } from "../bucket/open.ts";
 * import { systemClock, systemRandom } from "../time/clock.ts";
 * import { createLogger } from "../log.ts";
 * declare const init: ExecutorInit;
 * declare const sender: FrameSender;
 * const runtime = await buildExecutorRuntime(init, {
 *   clock: systemClock,
 *   random: systemRandom,
 *   log: createLogger(),
 *   openBucket: (init) => openBucket(init.bucketUrl),
 *   program: componentProgram,
 *   post: (message) => sender.send(message as unknown as Plain),
 *   drain: () => sender.drain(),
 * });
 * ```
 */
export async function buildExecutorRuntime(
  init: ExecutorInit,
  seams: ExecutorSeams,
): Promise<ExecutorRuntime> {
  const programs = await Promise.all(init.classes.map((spec) => seams.program(spec)));
  const tally = new RequestTally();
  // Armed by the first request after a tell: an idle executor wakes for nothing.
  let telling: Timer | undefined;
  const tell = () => {
    telling = undefined;
    const counts = tally.take();
    if (counts) seams.post({ type: "bucket-requests", counts });
  };
  return new ExecutorRuntime({
    init,
    programs: new Map(programs.map((program) => [program.spec.className, program])),
    programsOf: (classes) => Promise.all(classes.map((spec) => seams.program(spec))),
    post: seams.post,
    drain: seams.drain,
    clock: seams.clock,
    random: seams.random,
    log: seams.log,
    bucket: countedBucket(seams.openBucket(init), (op, area) => {
      tally.add(op, area);
      telling ??= seams.clock.setTimer(BUCKET_TALLY_MS, tell);
    }),
    databases: seams.databases,
    observer: seams.observer,
    planted: seams.planted,
  });
}
