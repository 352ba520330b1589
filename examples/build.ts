/**
 * Rebuilds the C actor components from source:
 *
 *   deno run -A examples/build.ts           # rebuild everything
 *   deno run -A examples/build.ts --check   # fail if a committed .wasm is stale
 *
 * Each actor is compiled by clang (--target=wasm32, freestanding, no libc)
 * into a core module, which jco turns into a component: `componentEmbed`
 * attaches the world's type information (wit/wasmkeep.wit, world `actor`) and
 * `componentNew` wraps the module, checking its imports and exports against
 * the world. Needs clang and wasm-ld (Debian: `apt-get install clang lld`);
 * CLANG and WASM_LD override where they are found.
 *
 * Memory: one 64 KiB page of linear memory to start with, of which 16 KiB is
 * stack; the rest is data and the per-event heap (examples/sdk/wasmkeep.c).
 * Memory grows only while an event needs more (e.g. a large body).
 */
import { componentEmbed, componentNew } from "@bytecodealliance/jco";

const root = new URL("../", import.meta.url);
const path = (p: string) => new URL(p, root).pathname;

interface Target {
  /** Output, relative to the repository root. */
  out: string;
  /** C sources, relative to the repository root. */
  sources: string[];
  defines?: string[];
  /** WIT source and world; the actor world unless said otherwise. */
  wit?: string;
  world?: string;
}

const SDK = "examples/sdk/wasmkeep.c";
const FIXTURES = "test/fixtures/components";

/** A different world, for the host's "wrong world" test. */
const WRONG_WORLD_WIT = `package wasmkeep-test:wrong@0.1.0;

world wrong {
  export run: func() -> u32;
}
`;

const targets: Target[] = [
  { out: "examples/counter/counter.wasm", sources: ["examples/counter/counter.c", SDK] },
  { out: "examples/kv/kv.wasm", sources: ["examples/kv/kv.c", SDK] },
  { out: "examples/chat/chat.wasm", sources: ["examples/chat/chat.c", SDK] },
  { out: "examples/reminder/reminder.wasm", sources: ["examples/reminder/reminder.c", SDK] },
  { out: "examples/greeter/greeter.wasm", sources: ["examples/greeter/greeter.c", SDK] },
  { out: `${FIXTURES}/testbed.wasm`, sources: [`${FIXTURES}/testbed.c`, SDK] },
  {
    out: `${FIXTURES}/testbed_init_fails.wasm`,
    sources: [`${FIXTURES}/testbed.c`, SDK],
    defines: ["TESTBED_INIT_FAILS"],
  },
  {
    out: `${FIXTURES}/testbed_v2.wasm`,
    sources: [`${FIXTURES}/testbed.c`, SDK],
    defines: ['TESTBED_VERSION="2"'],
  },
  {
    out: `${FIXTURES}/wrong_world.wasm`,
    sources: [`${FIXTURES}/wrong_world.c`],
    wit: WRONG_WORLD_WIT,
    world: "wrong",
  },
];

/**
 * A plain core module, not a component: exports `run: () -> i32` returning 42.
 * Written out by hand so it needs no toolchain at all.
 */
// deno-fmt-ignore
const NOT_A_COMPONENT = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, core version 1
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f, // type section: () -> i32
  0x03, 0x02, 0x01, 0x00, // function section: one function of type 0
  0x07, 0x07, 0x01, 0x03, 0x72, 0x75, 0x6e, 0x00, 0x00, // export "run" = func 0
  0x0a, 0x06, 0x01, 0x04, 0x00, 0x41, 0x2a, 0x0b, // code: i32.const 42; end
]);

const CFLAGS = [
  "--target=wasm32",
  "-Oz",
  "-ffreestanding",
  "-nostdlib",
  "-fno-builtin",
  "-Wall",
  "-Wextra",
  "-Werror",
  "-Wl,--no-entry",
  // One page in all; the stack is 16 KiB of it.
  "-Wl,--initial-memory=65536",
  "-Wl,-z,stack-size=16384",
  // Drop DWARF, keep the name section so traps show function names.
  "-Wl,--strip-debug",
];

async function run(cmd: string, args: string[]): Promise<{ ok: boolean; out: string }> {
  try {
    const r = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
    const dec = new TextDecoder();
    return { ok: r.success, out: dec.decode(r.stdout) + dec.decode(r.stderr) };
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return { ok: false, out: `${cmd}: not found` };
    throw e;
  }
}

/** The first of the candidates that runs. */
async function findTool(env: string, candidates: string[]): Promise<string> {
  const override = Deno.env.get(env);
  for (const c of override ? [override] : candidates) {
    if ((await run(c, ["--version"])).ok) return c;
  }
  throw new Error(`none of ${candidates.join(", ")} found (set ${env}); apt-get install clang lld`);
}

async function compile(t: Target, clang: string, ldFlags: string[]): Promise<Uint8Array> {
  const tmp = await Deno.makeTempFile({ suffix: ".wasm" });
  try {
    const args = [
      ...CFLAGS,
      ...ldFlags,
      ...(t.defines ?? []).map((d) => `-D${d}`),
      "-o",
      tmp,
      ...t.sources.map(path),
    ];
    const r = await run(clang, args);
    if (!r.ok) throw new Error(`clang failed for ${t.out}:\n${r.out}`);
    return await Deno.readFile(tmp);
  } finally {
    await Deno.remove(tmp);
  }
}

async function main() {
  const check = Deno.args.includes("--check");
  const clang = await findTool("CLANG", ["clang", "clang-14", "clang-15", "clang-16"]);
  // clang looks for `wasm-ld` on PATH; Debian may only have wasm-ld-NN.
  const wasmLd = await findTool("WASM_LD", ["wasm-ld", "wasm-ld-14", "wasm-ld-15", "wasm-ld-16"]);
  let ldFlags: string[] = [];
  if (wasmLd !== "wasm-ld") {
    const where = wasmLd.includes("/") ? wasmLd : (await run("which", [wasmLd])).out.trim();
    ldFlags = [`--ld-path=${where}`];
  }
  const actorWit = await Deno.readTextFile(path("wit/wasmkeep.wit"));

  const built: [string, Uint8Array][] = [];
  for (const t of targets) {
    const core = await compile(t, clang, ldFlags);
    const embedded = await componentEmbed({
      binary: core,
      witSource: t.wit ?? actorWit,
      world: t.world ?? "actor",
      stringEncoding: "utf8",
    });
    built.push([t.out, await componentNew(embedded, [])]);
  }
  built.push([`${FIXTURES}/not_a_component.wasm`, NOT_A_COMPONENT]);

  let stale = 0;
  for (const [out, bytes] of built) {
    if (check) {
      let old: Uint8Array | undefined;
      try {
        old = await Deno.readFile(path(out));
      } catch {
        old = undefined;
      }
      const same = old !== undefined && old.length === bytes.length &&
        old.every((b, i) => b === bytes[i]);
      if (!same) stale++;
      console.log(`${same ? "up to date" : "STALE"}  ${out}`);
    } else {
      await Deno.writeFile(path(out), bytes);
      console.log(`${String(bytes.length).padStart(7)}  ${out}`);
    }
  }
  if (stale) Deno.exit(1);
}

await main();
