/**
 * `wasmkeep actor move`: parses its flags and prints what
 * `src/handover/move_command.ts` writes in the bucket.
 *
 * @module
 */

import { type FlagSpec, formatHelp, parseArgs, UsageError } from "./args.ts";
import {
  BUCKET_FLAG,
  bucketUrl,
  cannotOpen,
  type ClusterIo,
  consoleIo,
  HELP_FLAG,
  nodeIdArgument,
  withBucket,
} from "./bucket_command.ts";
import { actorKeyString } from "../src/actors/key.ts";
import { ClusterToolRefusal } from "../src/cluster/fence_forget.ts";
import { formatDuration } from "../src/cluster/status.ts";
import { MOVE_REQUEST_TTL_MS } from "../src/handover/move_request.ts";
import { moveActor, parseActorPath } from "../src/handover/move_command.ts";

const MOVE_FLAGS: FlagSpec[] = [
  { name: "to", kind: "string", value: "NODE", description: "the node to move the actor to" },
  BUCKET_FLAG,
  {
    name: "force",
    kind: "boolean",
    description: "write the request even when no live node has the id (for a node about to start)",
  },
  HELP_FLAG,
];

const expiresIn = formatDuration(MOVE_REQUEST_TTL_MS);

/** The help text of `wasmkeep actor move`. */
export const ACTOR_MOVE_HELP: string = formatHelp(
  "wasmkeep actor move TENANT/CLASS/NAME --to NODE --bucket URL [--force]",
  "Asks the actor's owner to hand it to NODE (writes moves/TENANT/CLASS/NAME, which expires in\n" +
    `${expiresIn}): within a few seconds its WebSockets close with 1012 and their close events run,\n` +
    "its queued events finish and are uploaded, its lease is released and its events go to NODE,\n" +
    "which takes it, restores it and arms its alarm. If no node holds it, NODE takes it itself; a\n" +
    "name that was never an actor is not created. Not a pin: once idle it hibernates, and its next\n" +
    "event claims it wherever it lands. Actors served with --actor have the tenant default.\n" +
    "NODE must be a live node, as cluster status counts it; one that is draining, too old to take\n" +
    "moved actors or serving another tenant gets a warning and the request is written (the owner\n" +
    "keeps the actor until NODE may take it or the request expires). Exits 0 when the request is\n" +
    "written, 1 when refused or the bucket cannot be written.",
  MOVE_FLAGS,
);

/** The help text of `wasmkeep actor`. */
export const ACTOR_HELP: string = `Usage: wasmkeep actor <command> --bucket URL

Acts on one actor through the cluster's bucket alone; no node needs to answer.

Commands:
  move TENANT/CLASS/NAME --to NODE [--force]   hand an actor to another node (the request expires in ${expiresIn})

See wasmkeep actor <command> --help.`;

const HELP: Record<string, string> = { move: ACTOR_MOVE_HELP };

/**
 * Runs `wasmkeep actor ARGS` and returns the exit status: 0 when the request
 * is written (warnings or not), 1 when refused or the bucket cannot be
 * written. Throws {@linkcode UsageError} (exit 2).
 *
 * @example
 * ```ts
 * import { actorCommand } from "./actor.ts";
 * Deno.exit(
 *   await actorCommand(["move", "acme/room/lobby", "--to", "node-c", "--bucket", "file://b"]),
 * );
 * ```
 */
export async function actorCommand(args: string[], io: ClusterIo = consoleIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === undefined) {
    throw new UsageError("actor needs a command: move (see wasmkeep actor --help)");
  }
  if (sub === "--help" || sub === "-h" || sub === "help") {
    io.stdout(rest[0] && Object.hasOwn(HELP, rest[0]) ? HELP[rest[0]] : ACTOR_HELP);
    return 0;
  }
  if (!Object.hasOwn(HELP, sub)) {
    throw new UsageError(`unknown command 'actor ${sub}' (see wasmkeep actor --help)`);
  }
  const command = `actor ${sub}`;
  const { flags, positionals } = parseArgs(rest, MOVE_FLAGS, command);
  if (flags.help) {
    io.stdout(HELP[sub]);
    return 0;
  }
  if (positionals.length !== 1) {
    throw new UsageError(
      positionals.length === 0
        ? `${command} needs an actor: wasmkeep ${command} TENANT/CLASS/NAME --to NODE --bucket URL`
        : `${command} takes one actor, got ${positionals.length}`,
    );
  }
  let actor;
  try {
    actor = parseActorPath(positionals[0]);
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    throw new UsageError(`${command}: ${error.message}`);
  }
  if (flags.to === undefined) throw new UsageError(`${command} needs --to NODE`);
  const to = nodeIdArgument(flags.to as string, command);
  const url = bucketUrl(flags, command);
  const now = io.now ?? Date.now;
  const name = actorKeyString(actor);
  try {
    const outcome = await withBucket(
      url,
      io,
      (bucket) => moveActor(bucket, actor, to, { now, force: flags.force === true }),
    );
    for (const warning of outcome.warnings) io.stderr(`wasmkeep: warning: ${warning}`);
    const { expires, at } = outcome.request;
    io.stdout(
      `move requested: ${name} to ${to} (${outcome.key}); the request expires at ${
        new Date(expires).toISOString()
      } (in ${formatDuration(expires - at)}) if the actor has not moved by then`,
    );
    return 0;
  } catch (error) {
    if (error instanceof ClusterToolRefusal) {
      io.stderr(`wasmkeep: ${command} ${name}: ${error.message}`);
    } else {
      io.stderr(
        cannotOpen(url, error) ??
          `wasmkeep: ${command} ${name}: bucket ${url}: ${(error as Error).message}`,
      );
    }
    return 1;
  }
}
