/**
 * Runs the cluster simulator over a range of seeds.
 *
 *     deno task sim --seeds 1000 --from 1        # seeds 1 to 1000
 *     deno task sim --seed 42 --trace            # one seed, every event printed
 *     deno task sim --variant fence-early --seeds 20
 *
 * A failure prints the seed, the invariant, a command that replays it and
 * the last events of its trace; the exit status is 1 when a seed failed.
 * Reads no clock: time how long a run takes with `time`. Needs
 * `--allow-read --allow-write`: each run's databases are real files.
 *
 * @module
 */

import { DEFAULT_DURATION_MS, runSeed, type SimResult, type Stats } from "./world.ts";
import { VARIANTS } from "./variants.ts";

const USAGE = `usage: deno task sim [options]
  --seeds N         how many seeds to run (default 100)
  --from S          first seed (default 1)
  --seed S          run the one seed S (same as --seeds 1 --from S)
  --variant NAME    run a deliberately broken variant (--variants lists them)
  --duration SECS   virtual length of each run (default ${DEFAULT_DURATION_MS / 1000})
  --ttl SECS        node lease ttl (default 10)
  --nodes N         nodes in every run (default: drawn from the seed, 2 to 5)
  --trace           print every event of every run
  --trace-lines N   events shown after a failure (default 200)
  --stop            stop at the first failure
  --strict          known violations of the real code (sim/known.ts) fail too
  --late-markers    in storms, bases and delete markers may reach the bucket late too
                    (not only LTX files): shows a bug of the real code (docs/testing.md)
  --quiet           print failures and the summary only
  --variants        list the broken variants
`;

interface Args {
  seeds: number;
  from: number;
  variant?: string;
  durationMs?: number;
  ttlMs?: number;
  nodes?: number;
  trace: boolean;
  traceLines: number;
  stop: boolean;
  quiet: boolean;
  strict: boolean;
  lateMarkers: boolean;
}

function parse(argv: string[]): Args | undefined {
  const args: Args = {
    seeds: 100,
    from: 1,
    trace: false,
    traceLines: 200,
    stop: false,
    quiet: false,
    strict: false,
    lateMarkers: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    const int = () => {
      const v = Number(value());
      if (!Number.isSafeInteger(v) || v < 0) throw new Error(`${flag} needs a whole number`);
      return v;
    };
    switch (flag) {
      case "--seeds":
        args.seeds = int();
        break;
      case "--from":
        args.from = int();
        break;
      case "--seed":
        args.from = int();
        args.seeds = 1;
        break;
      case "--variant":
        args.variant = value();
        if (!VARIANTS[args.variant]) throw new Error(`no variant ${args.variant} (--variants)`);
        break;
      case "--duration":
        args.durationMs = int() * 1000;
        break;
      case "--ttl":
        args.ttlMs = int() * 1000;
        break;
      case "--nodes":
        args.nodes = int();
        break;
      case "--trace":
        args.trace = true;
        break;
      case "--trace-lines":
        args.traceLines = int();
        break;
      case "--stop":
        args.stop = true;
        break;
      case "--quiet":
        args.quiet = true;
        break;
      case "--strict":
        args.strict = true;
        break;
      case "--late-markers":
        args.lateMarkers = true;
        break;
      case "--variants":
        for (const v of Object.values(VARIANTS)) {
          console.log(`${v.name} (caught within ${v.bound} seeds): ${v.description}`);
        }
        return undefined;
      case "--help":
      case "-h":
        console.log(USAGE);
        return undefined;
      default:
        throw new Error(`unknown option ${flag}\n${USAGE}`);
    }
  }
  return args;
}

/** The command that replays one seed with the same options. */
export function replayCommand(seed: number, args: Partial<Args>): string {
  const parts = ["deno task sim --seed", String(seed)];
  if (args.variant) parts.push("--variant", args.variant);
  if (args.durationMs !== undefined) parts.push("--duration", String(args.durationMs / 1000));
  if (args.ttlMs !== undefined) parts.push("--ttl", String(args.ttlMs / 1000));
  if (args.nodes !== undefined) parts.push("--nodes", String(args.nodes));
  if (args.strict) parts.push("--strict");
  if (args.lateMarkers) parts.push("--late-markers");
  return parts.join(" ");
}

/** A failure as printed. */
export function formatFailure(result: SimResult, args: Partial<Args>): string {
  const v = result.violation!;
  return [
    `FAIL seed ${result.seed}${result.variant ? ` (variant ${result.variant})` : ""}: ${v.kind} ` +
    `at ${(v.at / 1000).toFixed(3)} s`,
    `  ${v.message}`,
    `  replay: ${replayCommand(result.seed, args)} --trace`,
    `  last ${result.trace.length} events:`,
    ...result.trace.map((line) => `    ${line}`),
  ].join("\n");
}

async function main(): Promise<number> {
  let args: Args | undefined;
  try {
    args = parse(Deno.args);
  } catch (e) {
    console.error((e as Error).message);
    return 2;
  }
  if (!args) return 0;
  for (const name of ["read", "write"] as const) {
    if (Deno.permissions.querySync({ name }).state !== "granted") {
      console.error(
        `the simulator keeps each actor's SQLite database in a temporary directory: run it ` +
          `with --allow-read --allow-write (deno run --allow-read --allow-write sim/main.ts)`,
      );
      return 2;
    }
  }
  const variant = args.variant ? VARIANTS[args.variant] : undefined;
  const totals: Record<string, number> = {};
  const delays: number[] = [];
  const calmDelays: number[] = [];
  let failed = 0;
  const known = new Map<string, { seeds: number; events: number; first: string }>();
  let virtualMs = 0;
  let run = 0;
  for (let seed = args.from; seed < args.from + args.seeds; seed++) {
    const result = await runSeed({
      seed,
      variant,
      durationMs: args.durationMs,
      ttlMs: args.ttlMs,
      nodes: args.nodes,
      strict: args.strict,
      lateMarkers: args.lateMarkers,
      traceLines: args.traceLines,
      echo: args.trace ? (line) => console.log(line) : undefined,
    });
    run++;
    virtualMs += result.virtualMs;
    add(totals, result.stats);
    delays.push(...result.stats.takeoverDelays);
    calmDelays.push(...result.stats.calmTakeoverDelays);
    for (const [kind, seen] of Object.entries(result.known)) {
      const k = known.get(kind);
      if (k) {
        k.seeds++;
        k.events += seen.count;
      } else {
        known.set(kind, {
          seeds: 1,
          events: seen.count,
          first: `${replayCommand(seed, args)} (${
            (seen.first.at / 1000).toFixed(3)
          } s: ${seen.first.message})`,
        });
      }
    }
    if (!result.ok) {
      failed++;
      console.log(formatFailure(result, args));
      if (args.stop) break;
    } else if (!args.quiet) {
      console.log(
        `ok seed ${seed}: ${result.swarm.nodes} nodes, ${result.stats.events} events, ` +
          `${result.stats.served} served, ${result.stats.fences} fences, digest ${result.digest}`,
      );
    }
  }
  const pct = (list: number[], p: number) => {
    const sorted = [...list].sort((a, b) => a - b);
    return sorted.length
      ? (sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] / 1000).toFixed(1)
      : "-";
  };
  console.log(
    `\n${run} seeds from ${args.from}${
      variant ? ` (variant ${variant.name})` : ""
    }: ${failed} failed; ` +
      `${(virtualMs / 1000).toFixed(0)} virtual s, ${totals.events ?? 0} events`,
  );
  console.log(
    `totals: ${
      Object.entries(totals).filter(([k]) => k !== "events").map(([k, v]) => `${k} ${v}`).join(", ")
    }`,
  );
  for (
    const [what, list] of [["all", delays], ["bucket reachable throughout", calmDelays]] as const
  ) {
    console.log(
      `last write to fence of a dead or paused node (${what}): ${list.length} fences, ` +
        `min ${pct(list, 0)} s, median ${pct(list, 0.5)} s, p99 ${pct(list, 0.99)} s, ` +
        `max ${pct(list, 1)} s`,
    );
  }
  for (const [kind, k] of known) {
    console.log(
      `known violation ${kind} (sim/known.ts): in ${k.seeds} of ${run} seeds, ${k.events} times; ` +
        `first: ${k.first}`,
    );
  }
  return failed > 0 ? 1 : 0;
}

function add(totals: Record<string, number>, stats: Stats): void {
  for (const [k, v] of Object.entries(stats)) {
    // The longest of something is the longest over every seed, not a sum.
    if (typeof v === "number" && k.startsWith("longest")) {
      totals[k] = Math.round(Math.max(totals[k] ?? 0, v));
    } else if (typeof v === "number") totals[k] = (totals[k] ?? 0) + v;
  }
  for (const [outcome, n] of Object.entries(stats.kept)) {
    totals[`kept ${outcome}`] = (totals[`kept ${outcome}`] ?? 0) + n;
  }
  for (const [node, n] of Object.entries(stats.appliedByNode)) {
    totals[`versionsApplied ${node}`] = (totals[`versionsApplied ${node}`] ?? 0) + n;
  }
}

if (import.meta.main) Deno.exit(await main());
