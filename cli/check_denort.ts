/**
 * Run by `deno task compile` before `deno compile`: makes sure `denort`, the
 * runtime `deno compile` puts the program in, can be had. `deno compile`
 * takes the file `DENORT_BIN` names, else the copy kept in `DENO_DIR`, else
 * downloads it from dl.deno.land; offline, that download failed with a DNS
 * error and an empty backtrace, after making `dist/`. This says instead, in
 * one line, what to do, and exits 1 before anything is made.
 *
 * @module
 */

/** Where `denort` comes from, or why it cannot. */
export type DenortSource =
  | { ok: true; from: "DENORT_BIN" | "DENO_DIR" | "dl.deno.land"; where: string }
  | { ok: false; message: string };

/** What {@linkcode findDenort} looks at; each has the process's own as default. */
export interface DenortProbe {
  /** `DENORT_BIN`, when set. */
  denortBin?: string;
  /** Deno's cache directory (`deno info --json`'s `denoDir`). */
  denoDir: string;
  /** Deno's version, e.g. `2.9.6`. */
  version: string;
  /** The target triple, e.g. `x86_64-unknown-linux-gnu`. */
  target: string;
  /** Whether the download URL answers. */
  reachable: (url: string) => Promise<boolean>;
}

/**
 * The one line printed when no `denort` can be had: the fix, with this
 * Deno's version.
 *
 * @example
 * ```ts
 * import { offlineMessage } from "./check_denort.ts";
 * console.log(offlineMessage("2.9.6"));
 * ```
 */
export function offlineMessage(version: string): string {
  return `deno task compile: no denort ${version} in DENO_DIR and dl.deno.land cannot be reached: ` +
    `set DENORT_BIN to a denort binary of Deno ${version} ` +
    `(DENORT_BIN=/path/to/denort deno task compile), or run the task once with network access`;
}

/**
 * The path under `DENO_DIR` where `deno compile` keeps the `denort` it
 * downloaded (`dl/release/v<version>/denort-<target>.zip`).
 *
 * @example
 * ```ts
 * import { cachedDenortPath } from "./check_denort.ts";
 * cachedDenortPath("/root/.cache/deno", "2.9.6", "x86_64-unknown-linux-gnu");
 * ```
 */
export function cachedDenortPath(denoDir: string, version: string, target: string): string {
  return `${denoDir}/dl/release/v${version}/denort-${target}.zip`;
}

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/**
 * Where `deno compile` will find `denort`, in its own order, or the message
 * saying what to do.
 *
 * @example
 * ```ts
 * import { findDenort } from "./check_denort.ts";
 * const source = await findDenort({
 *   denoDir: "/nonexistent",
 *   version: "2.9.6",
 *   target: "x86_64-unknown-linux-gnu",
 *   reachable: () => Promise.resolve(false),
 * });
 * console.log(source.ok ? source.where : source.message);
 * ```
 */
export async function findDenort(probe: DenortProbe): Promise<DenortSource> {
  if (probe.denortBin !== undefined && probe.denortBin !== "") {
    if (isFile(probe.denortBin)) return { ok: true, from: "DENORT_BIN", where: probe.denortBin };
    return {
      ok: false,
      message: `deno task compile: DENORT_BIN names ${probe.denortBin}, which is not a file: ` +
        `set it to a denort binary of Deno ${probe.version}, or unset it`,
    };
  }
  const cached = cachedDenortPath(probe.denoDir, probe.version, probe.target);
  if (isFile(cached)) return { ok: true, from: "DENO_DIR", where: cached };
  const url = `https://dl.deno.land/release/v${probe.version}/denort-${probe.target}.zip`;
  if (await probe.reachable(url)) return { ok: true, from: "dl.deno.land", where: url };
  return { ok: false, message: offlineMessage(probe.version) };
}

/** Whether `url` answers a HEAD within 10 s (through HTTPS_PROXY, as `deno compile` goes). */
async function answers(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { method: "HEAD", signal: AbortSignal.timeout(10_000) });
    await response.body?.cancel();
    return response.ok;
  } catch {
    return false;
  }
}

/** Deno's cache directory, as `deno info --json` reports it (DENO_DIR, else the platform's). */
async function denoDir(): Promise<string> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json"],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  if (!output.success) throw new Error("deno info --json failed");
  return JSON.parse(new TextDecoder().decode(output.stdout)).denoDir;
}

if (import.meta.main) {
  const source = await findDenort({
    denortBin: Deno.env.get("DENORT_BIN"),
    denoDir: await denoDir(),
    version: Deno.version.deno,
    target: Deno.build.target,
    reachable: answers,
  });
  if (!source.ok) {
    console.error(source.message);
    Deno.exit(1);
  }
}
