import assert from "node:assert/strict";
import {
  fromExecutorMessage,
  ProtocolError,
  type ToExecutor,
  toExecutorMessage,
} from "../../src/actors/protocol.ts";
import { decodePlain, encodePlain, type Plain } from "../../src/actors/codec.ts";

const actor = { tenant: "default", class: "counter", name: "a" };
const request = {
  method: "GET",
  path: "/",
  query: "",
  headers: [["a", "b"]],
  body: new Uint8Array(1),
};

/** A message as the other process reads it. */
function across(message: unknown): Plain {
  const buffer = new Uint8Array(4096);
  return decodePlain(buffer.subarray(0, encodePlain(message as Plain, buffer)));
}

Deno.test("protocol: every message to an executor survives the boundary as it was sent", () => {
  const messages: ToExecutor[] = [
    {
      type: "event",
      seq: 1,
      actor,
      generation: 2,
      until: 1_700_000_000_000.25,
      request,
    } as ToExecutor,
    { type: "drop", actor, generation: 2 },
    { type: "abandon", seq: 3, actor },
    { type: "discard-all" },
    { type: "lease", until: 1_700_000_000_123.5 },
    { type: "hold", id: 4, ok: true },
    { type: "call-answer", id: 5, answer: { ok: false, error: "no" } },
    {
      type: "call-answer",
      id: 6,
      answer: { ok: true, response: { status: 200, headers: [], body: new Uint8Array(2) } },
    },
    { type: "shutdown" },
  ];
  for (const message of messages) assert.deepEqual(toExecutorMessage(across(message)), message);
});

Deno.test("protocol: a frame of another shape is refused, naming what is wrong", () => {
  const cases: [unknown, RegExp][] = [
    [[1, 2], /a message is not a record/],
    [{ type: "nonsense" }, /unknown message type 'nonsense' to an executor/],
    [{ type: "event", seq: "1", actor, generation: 1, until: 0, request }, /seq is not an integer/],
    [
      { type: "event", seq: 1, actor: { tenant: "t" }, generation: 1, until: 0, request },
      /class is not a string/,
    ],
    [{
      type: "event",
      seq: 1,
      actor,
      generation: 1,
      until: 0,
      request: { ...request, headers: [["a"]] },
    }, /headers is not a list of header pairs/],
    [{ type: "lease", until: Infinity }, /until is not a number/],
    [{ type: "hold", id: 1, ok: "yes" }, /ok is not a boolean/],
  ];
  for (const [frame, message] of cases) {
    assert.throws(
      () => toExecutorMessage(across(frame)),
      (error: unknown) => error instanceof ProtocolError && message.test(error.message),
    );
  }
  assert.throws(
    () => fromExecutorMessage(across({ type: "done", seq: 1, response: { status: 200 } })),
    /headers is not a list of header pairs/,
  );
  assert.throws(
    () => fromExecutorMessage(across({ type: "event" })),
    /unknown message type 'event' from an executor/,
  );
});

Deno.test("protocol: every message from an executor survives the boundary as it was sent", () => {
  const messages = [
    { type: "ready" },
    {
      type: "done",
      seq: 1,
      response: { status: 201, headers: [["x", "y"]], body: new Uint8Array(3) },
    },
    { type: "failed", seq: 2, status: 503, message: "retry" },
    { type: "abandoned", seq: 3 },
    { type: "suspended", seq: 4 },
    { type: "resumed", seq: 4 },
    { type: "call", id: 1, seq: 5, caller: actor, chain: ["default/a/b"], target: actor, request },
    { type: "check-hold", id: 2, actor, generation: 7 },
    { type: "give-up", actor, generation: 7 },
    { type: "dropped", actor, generation: 7, landed: false },
    { type: "count", name: "wasmkeep_x_total", by: 1 },
    { type: "closed" },
  ];
  for (const message of messages) assert.deepEqual(fromExecutorMessage(across(message)), message);
});
