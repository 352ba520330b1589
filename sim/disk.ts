/**
 * The disks of a simulated cluster: one temporary directory per run (removed
 * at its end), a data directory per simulated machine under it, and what a
 * crash leaves there. All of it synchronous, so a run stays a function of its
 * seed.
 *
 * A process crash leaves every file as the process last wrote it: SQLite's
 * writes reach the operating system as they are made (`synchronous = OFF`
 * skips only the fsyncs), so the database and its `-wal` survive, committed
 * frames not yet checkpointed included. Closing a connection would
 * checkpoint; {@linkcode crashClose} puts the bytes back as they were.
 *
 * A power loss may lose anything not fsynced, and a replicated database is
 * never fsynced (the bucket is its copy): {@linkcode losePower} leaves each
 * database as it was, drops its `-wal`, puts back the copy its last clean
 * close left (with the `.pos` of that close: consistent, and old), or cuts
 * the file short.
 *
 * @module
 */

import type { Random } from "../src/time/clock.ts";
import { removeIfPresent } from "../src/replication/local_files.ts";

/** A file system in memory, where runs' files go when the machine has it (no disk waits). */
const MEMORY_DIR = "/dev/shm";

/** Suffix of the copy a clean close leaves, for {@linkcode losePower}. */
const CLOSED_COPY = ".sim-closed";

/** Bytes of a file, or `undefined` when it does not exist. */
export function readIfPresent(path: string): Uint8Array | undefined {
  try {
    return Deno.readFileSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

/**
 * The run's directory: data directories of machines and scratch files of
 * the checks beneath it.
 *
 * @example
 * ```ts ignore
 * const disk = new RunDisk(42);
 * const dir = disk.dataDir("a-1");
 * disk.remove();
 * ```
 */
export class RunDisk {
  /** The run's directory (its name is the temporary directory's, not the seed's: never traced). */
  readonly root: string;
  #scratch = 0;

  /** Makes the run's directory, in memory (`/dev/shm`) where the machine has it. */
  constructor(seed: number) {
    const prefix = `wasmkeep-sim-${seed}-`;
    let root: string;
    try {
      root = Deno.makeTempDirSync({ dir: MEMORY_DIR, prefix });
    } catch {
      root = Deno.makeTempDirSync({ prefix });
    }
    this.root = root;
  }

  /** A data directory, made if needed. */
  dataDir(name: string): string {
    const path = `${this.root}/${name}`;
    Deno.mkdirSync(path, { recursive: true });
    return path;
  }

  /** Empties a data directory: the machine restarts with nothing on its disk. */
  wipe(path: string): void {
    Deno.removeSync(path, { recursive: true });
    Deno.mkdirSync(path, { recursive: true });
  }

  /** A fresh path for a check's scratch database (its directory exists). */
  scratchPath(): string {
    const dir = this.dataDir("checks");
    return `${dir}/${++this.#scratch}.db`;
  }

  /** Replaces the run's directory in `text`, so that traces do not depend on its name. */
  redact(text: string): string {
    return text.includes(this.root) ? text.replaceAll(this.root, "<run>") : text;
  }

  /** Removes the run's directory and everything in it. */
  remove(): void {
    try {
      Deno.removeSync(this.root, { recursive: true });
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
  }
}

/**
 * Closes a database connection as a crash would leave it: the database and
 * its `-wal` keep the bytes they had (SQLite's close would checkpoint).
 *
 * @example
 * ```ts ignore
 * crashClose(path, () => pool.close(path)); // path-wal still holds the commits
 * ```
 */
export function crashClose(path: string, close: () => void): void {
  const files = [path, `${path}-wal`];
  const saved = files.map(readIfPresent);
  close();
  files.forEach((file, i) => {
    const bytes = saved[i];
    if (bytes === undefined) removeIfPresent(file);
    else Deno.writeFileSync(file, bytes);
  });
}

/** Keeps what a clean close left (the database and its `.pos`), for a later power loss. */
export function keepClosedCopy(path: string): void {
  for (const file of [path, `${path}.pos`]) {
    const bytes = readIfPresent(file);
    if (bytes === undefined) removeIfPresent(file + CLOSED_COPY);
    else Deno.writeFileSync(file + CLOSED_COPY, bytes);
  }
}

/** What a power loss did to one database, for the trace. */
export type PowerLossEffect = "kept" | "wal-lost" | "reverted" | "torn";

/**
 * A power loss on the machine whose data directory is `dir`: every actor
 * database under it is kept, loses its `-wal`, goes back to its last clean
 * close (database and `.pos` together), or is cut short, as `random` draws.
 * Returns what happened to each, by path relative to `dir`.
 *
 * @example
 * ```ts ignore
 * losePower(dataDir, seededRandom(1)); // Map { "actors/default/counter/x0.db" => "torn" }
 * ```
 */
export function losePower(dir: string, random: Random): Map<string, PowerLossEffect> {
  const effects = new Map<string, PowerLossEffect>();
  for (const path of databases(dir)) {
    const u = random.next();
    let effect: PowerLossEffect = "kept";
    if (u < 0.25) {
      removeIfPresent(`${path}-wal`);
      effect = "wal-lost";
    } else if (u < 0.6) {
      const db = readIfPresent(path + CLOSED_COPY);
      if (db !== undefined) {
        Deno.writeFileSync(path, db);
        const pos = readIfPresent(`${path}.pos${CLOSED_COPY}`);
        if (pos === undefined) removeIfPresent(`${path}.pos`);
        else Deno.writeFileSync(`${path}.pos`, pos);
        removeIfPresent(`${path}-wal`);
        effect = "reverted";
      }
    } else if (u < 0.8) {
      const size = readIfPresent(path)?.length ?? 0;
      if (size > 0) {
        Deno.truncateSync(path, Math.floor(random.next() * size));
        effect = "torn";
      }
    }
    effects.set(path.slice(dir.length + 1), effect);
  }
  return effects;
}

/** The actor databases under `dir`, in a fixed order. */
function databases(dir: string): string[] {
  const found: string[] = [];
  const walk = (path: string) => {
    let entries: Deno.DirEntry[];
    try {
      entries = [...Deno.readDirSync(path)];
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return;
      throw e;
    }
    entries.sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
    for (const entry of entries) {
      const child = `${path}/${entry.name}`;
      if (entry.isDirectory) walk(child);
      else if (entry.name.endsWith(".db")) found.push(child);
    }
  };
  walk(dir);
  return found;
}
