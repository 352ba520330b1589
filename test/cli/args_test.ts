import assert from "node:assert/strict";
import { type FlagSpec, formatHelp, parseArgs, UsageError } from "../../cli/args.ts";

const SPECS: FlagSpec[] = [
  { name: "actor", kind: "string", multiple: true, value: "CLASS=PATH", description: "a class" },
  { name: "port", kind: "integer", min: 1, description: "a port", defaultText: "8080" },
  { name: "verbose", kind: "boolean", description: "talk" },
  { name: "help", short: "h", kind: "boolean", description: "show this help" },
];

Deno.test("flags take values after a space or an equals sign; repeatable ones collect", () => {
  const parsed = parseArgs(
    ["--actor", "a=1", "--actor=b=2", "--port=9", "--verbose", "x.wasm"],
    SPECS,
    "t",
  );
  assert.deepEqual(parsed.flags, { actor: ["a=1", "b=2"], port: 9, verbose: true });
  assert.deepEqual(parsed.positionals, ["x.wasm"]);
  assert.deepEqual(parseArgs(["--", "--actor"], SPECS, "t").positionals, ["--actor"]);
});

Deno.test("errors name the flag and the fix", () => {
  const cases: [string[], RegExp][] = [
    [["--nope"], /unknown flag --nope for 't'/],
    [["-v"], /unknown flag -v .*two dashes/],
    [["--port"], /--port needs a value/],
    [["--port", "x"], /--port must be a whole number, not 'x'/],
    [["--port", "0"], /--port must be at least 1, not 0/],
    [["--port", "1", "--port", "2"], /--port was given twice/],
    [["--verbose=yes"], /--verbose takes no value/],
  ];
  for (const [args, message] of cases) {
    assert.throws(
      () => parseArgs(args, SPECS, "t"),
      (e: unknown) => e instanceof UsageError && message.test(e.message),
    );
  }
});

Deno.test("a short flag after one dash is its long flag: -h is --help", () => {
  assert.deepEqual(parseArgs(["-h"], SPECS, "t").flags, { help: true });
  assert.deepEqual(parseArgs(["x.wasm", "-h", "--port", "2"], SPECS, "t"), {
    flags: { help: true, port: 2 },
    positionals: ["x.wasm"],
  });
  assert.deepEqual(parseArgs(["--", "-h"], SPECS, "t").positionals, ["-h"]);
  // Only the letters declared: -v and -hv stay unknown.
  for (const arg of ["-v", "-hv", "-H"]) {
    assert.throws(() => parseArgs([arg], SPECS, "t"), /two dashes/);
  }
  assert.match(formatHelp("t", "Does t.", SPECS), /\n {2}-h, --help\s+show this help$/);
});

Deno.test("help lists every flag with its default", () => {
  const help = formatHelp("t [flags]", "Does t.", SPECS);
  assert.match(help, /--actor CLASS=PATH\s+a class \(repeatable\)/);
  assert.match(help, /--port VALUE\s+a port \(default 8080\)/);
  assert.match(help, /--verbose\s+talk/);
});
