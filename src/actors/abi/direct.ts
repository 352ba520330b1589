/**
 * Direct bindings of the `wasmkeep:actor` world: the canonical ABI lifting
 * and lowering of this one world written once, shared by every instance.
 *
 * jco's generated glue defines its helpers, classes and closures inside each
 * instantiation: about 52 KiB of JS heap per instance, and, with many
 * instances, property accesses that go megamorphic (docs/performance.md). An
 * actor whose component is one core module with the world's exact core
 * signatures (what `wit-bindgen` and `componentNew` produce) is instantiated
 * here instead: its main core module with these imports, nothing else per
 * instance but the instance itself. Other components keep jco's glue.
 *
 * @module
 */

import type { CoreInterface, CoreSignature } from "./core_signatures.ts";
import type { ActorRequest, ActorResponse } from "../protocol.ts";
import type { ExecResult, SqlError, SqlValue } from "../../sqlite/actor_database.ts";
import { asciiText } from "../codec.ts";

/** The package version of the world these bindings implement. */
const VERSION = "@0.1.0";

/** Core signatures of the functions an actor's main module may import, by `module#name`. */
export const DIRECT_IMPORTS: ReadonlyMap<string, CoreSignature> = new Map([
  [`wasmkeep:actor/storage${VERSION}#exec`, "(i32 i32 i32 i32 i32) -> ()"],
  [`wasmkeep:actor/storage${VERSION}#exec-durable`, "(i32 i32 i32 i32 i32) -> ()"],
  [`wasmkeep:actor/storage${VERSION}#in-transaction`, "() -> (i32)"],
  [`wasmkeep:actor/storage${VERSION}#delete-self`, "(i32) -> ()"],
  [`wasmkeep:actor/actors${VERSION}#self`, "(i32) -> ()"],
  [`wasmkeep:actor/actors${VERSION}#call`, `(${Array(15).fill("i32").join(" ")}) -> ()`],
  [`wasmkeep:actor/alarms${VERSION}#set`, "(i64 i32) -> ()"],
  [`wasmkeep:actor/alarms${VERSION}#get`, "(i32) -> ()"],
  [`wasmkeep:actor/alarms${VERSION}#delete`, "(i32) -> ()"],
  [`wasmkeep:actor/websockets${VERSION}#send`, "(i64 i32 i32 i32 i32) -> ()"],
  [`wasmkeep:actor/websockets${VERSION}#close`, "(i64 i32 i32 i32 i32) -> ()"],
  [`wasmkeep:actor/websockets${VERSION}#connections`, "(i32) -> ()"],
  [`wasmkeep:actor/config${VERSION}#get`, "(i32 i32 i32) -> ()"],
  [`wasmkeep:actor/log${VERSION}#log`, "(i32 i32 i32) -> ()"],
]);

/** Core signatures the main module must export. */
export const DIRECT_EXPORTS: ReadonlyMap<string, CoreSignature> = new Map([
  ["cabi_realloc", "(i32 i32 i32 i32) -> (i32)"],
  ["on-init", "() -> (i32)"],
  ["on-request", `(${Array(10).fill("i32").join(" ")}) -> (i32)`],
  ["on-alarm", "() -> (i32)"],
  ["on-websocket-open", `(i64 ${Array(10).fill("i32").join(" ")}) -> ()`],
  ["on-websocket-message", "(i64 i32 i32 i32) -> ()"],
  ["on-websocket-close", "(i64 i32 i32 i32) -> ()"],
]);

/** Post-return functions the main module may export. */
const POST_RETURNS: ReadonlyMap<string, CoreSignature> = new Map([
  ["cabi_post_on-init", "(i32) -> ()"],
  ["cabi_post_on-request", "(i32) -> ()"],
  ["cabi_post_on-alarm", "(i32) -> ()"],
]);

/**
 * Why a module cannot take the direct bindings, or `undefined` when it can.
 *
 * @example
 * ```ts
 * import { directBindingsProblem } from "./direct.ts";
 * import { readCoreInterface } from "./core_signatures.ts";
 * declare const bytes: Uint8Array;
 * directBindingsProblem(readCoreInterface(bytes)); // undefined for the examples
 * ```
 */
export function directBindingsProblem(core: CoreInterface): string | undefined {
  if (core.otherImports.size > 0) return `it imports ${[...core.otherImports.keys()].join(", ")}`;
  for (const [name, signature] of core.importedFunctions) {
    const expected = DIRECT_IMPORTS.get(name);
    if (!expected) return `it imports ${name}`;
    if (expected !== signature) return `${name} has the core type ${signature}, not ${expected}`;
  }
  if (core.otherExports.get("memory") !== "memory") return "it exports no memory";
  for (const [name, expected] of [...DIRECT_EXPORTS, ...POST_RETURNS]) {
    const signature = core.exportedFunctions.get(name);
    if (signature === undefined && POST_RETURNS.has(name)) continue;
    if (signature !== expected) {
      return `its export ${name} has the core type ${signature}, not ${expected}`;
    }
  }
  return undefined;
}

/**
 * The host side of the imports, in the shapes jco's glue also uses: values
 * returned for `ok`, a thrown {@linkcode GuestError} for `err`.
 */
export interface ActorImports {
  exec(sql: string, params: SqlValue[]): ExecResult;
  /** May wait: the guest is suspended meanwhile (JSPI). */
  execDurable(sql: string, params: SqlValue[]): ExecResult | Promise<ExecResult>;
  inTransaction(): boolean;
  /** May wait: the guest is suspended meanwhile (JSPI). */
  deleteSelf(): void | Promise<void>;
  self(): { tenant: string; class: string; name: string };
  /** May wait: the guest is suspended meanwhile (JSPI). */
  call(
    className: string,
    name: string,
    request: ActorRequest,
  ): ActorResponse | Promise<ActorResponse>;
  alarmSet(atMs: bigint): void;
  alarmGet(): bigint | undefined;
  alarmDelete(): void;
  wsSend(
    connection: bigint,
    message: { tag: "text"; val: string } | { tag: "binary"; val: Uint8Array },
  ): void;
  wsClose(connection: bigint, code: number, reason: string): void;
  wsConnections(): bigint[];
  configGet(name: string): string | undefined;
  log(level: "debug" | "info" | "warn" | "error", message: string): void;
}

/** Thrown by a host import to return `err(payload)` to the guest. */
export class GuestError {
  constructor(readonly payload: unknown) {}
}

/** A WebSocket message as the bindings carry it (`types.ws-message`). */
export type WsMessage = { tag: "text"; val: string } | { tag: "binary"; val: Uint8Array };

/** An actor's exports, called by the executor. */
export interface ActorExportCalls {
  onInit(): Promise<void>;
  onRequest(request: ActorRequest): Promise<ActorResponse>;
  /** The alarm is due; its err rejects with the message as `payload`, as on-init's. */
  onAlarm(): Promise<void>;
  /** A socket opened; `request` is its upgrade request. */
  onWebsocketOpen(connection: bigint, request: ActorRequest): Promise<void>;
  onWebsocketMessage(connection: bigint, message: WsMessage): Promise<void>;
  /** The client closed the socket. */
  onWebsocketClose(connection: bigint, code: number, reason: string): Promise<void>;
}

const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;
const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder("utf-8", { fatal: true });

type Realloc = (old: number, oldSize: number, align: number, size: number) => number;

/** Byte arrays up to this length are copied out of the guest in JavaScript. */
const SMALL_COPY = 64;

/** Most elements of one list an actor hands the host (headers, a statement's parameters). */
export const MAX_GUEST_LIST_ELEMENTS = 65_536;

/**
 * Most bytes of strings and byte lists in one list an actor hands the host,
 * all its elements together. Elements may all point at the same memory, so
 * the guest's memory does not bound what lifting them makes: 8,192 headers
 * sharing one 1 MiB value are 8 GiB once copied. (A request or an answer
 * travels in a frame of 64 MiB at most anyway.)
 */
export const MAX_GUEST_LIST_BYTES = 64 * 1024 * 1024;

/**
 * The guest's memory. The views are made again only once the memory grew:
 * growing a (non-shared) memory detaches its old buffer, which then reads
 * as 0 bytes long. (Reading `memory.buffer` is a call into V8's C++ side,
 * and it was read a few dozen times per event.)
 */
class Guest {
  #buffer: ArrayBufferLike | undefined;
  #view: DataView = new DataView(new ArrayBuffer(0));
  #bytes: Uint8Array = new Uint8Array(0);
  /** A shared memory grows without detaching: its buffer is checked each time. */
  #shared = false;
  memory!: WebAssembly.Memory;
  realloc!: Realloc;
  /** The length in bytes of the string {@linkcode lowerString} wrote last. */
  lowered = 0;

  attach(memory: WebAssembly.Memory, realloc: Realloc) {
    this.memory = memory;
    this.realloc = realloc;
    this.#shared = !(memory.buffer instanceof ArrayBuffer);
  }

  get view(): DataView {
    if (this.#bytes.byteLength === 0 || this.#shared) this.#refresh();
    return this.#view;
  }

  get bytes(): Uint8Array {
    if (this.#bytes.byteLength === 0 || this.#shared) this.#refresh();
    return this.#bytes;
  }

  #refresh() {
    const buffer = this.memory.buffer;
    if (this.#buffer !== buffer) {
      this.#buffer = buffer;
      this.#view = new DataView(buffer);
      this.#bytes = new Uint8Array(buffer);
    }
  }

  string(ptr: number, len: number): string {
    const start = ptr >>> 0;
    const length = len >>> 0;
    const bytes = this.bytes;
    const end = checkedEnd(bytes, start, length);
    // Valid UTF-8 whenever it is ASCII, so the strict decoder would agree.
    return asciiText(bytes, start, length) ?? utf8Strict.decode(bytes.subarray(start, end));
  }

  copy(ptr: number, len: number): Uint8Array {
    const start = ptr >>> 0;
    const length = len >>> 0;
    const bytes = this.bytes;
    const end = checkedEnd(bytes, start, length);
    if (length > SMALL_COPY) return bytes.slice(start, end);
    // V8 keeps a small array in its heap; slice() would allocate outside it.
    const copy = new Uint8Array(length);
    for (let i = 0; i < length; i++) copy[i] = bytes[start + i];
    return copy;
  }

  alloc(align: number, size: number): number {
    if (size === 0) return align;
    const ptr = this.realloc(0, 0, align, size) >>> 0;
    if (ptr % align !== 0 || ptr + size > this.bytes.byteLength) {
      throw new Error(`cabi_realloc returned a bad pointer ${ptr} for ${size} bytes`);
    }
    return ptr;
  }

  /** Copies `bytes` into fresh guest memory; returns the pointer. */
  put(bytes: Uint8Array, align = 1): number {
    const ptr = this.alloc(align, bytes.length);
    this.bytes.set(bytes, ptr);
    return ptr;
  }

  /**
   * Copies `text` into fresh guest memory as UTF-8; returns the pointer and
   * leaves the length in {@linkcode lowered}. An ASCII string is written as
   * it is, without encoding it first (the same bytes, and the same one
   * realloc call).
   */
  lowerString(text: string): number {
    const length = text.length;
    let ascii = true;
    for (let i = 0; i < length; i++) {
      if (text.charCodeAt(i) >= 0x80) {
        ascii = false;
        break;
      }
    }
    if (!ascii) {
      const encoded = utf8.encode(text);
      this.lowered = encoded.length;
      return this.put(encoded);
    }
    const ptr = this.alloc(1, length);
    const bytes = this.bytes;
    for (let i = 0; i < length; i++) bytes[ptr + i] = text.charCodeAt(i);
    this.lowered = length;
    return ptr;
  }

  /** Writes a string as (ptr, len) at `at`. */
  putString(at: number, text: string) {
    const ptr = this.lowerString(text);
    const view = this.view;
    view.setUint32(at, ptr, true);
    view.setUint32(at + 4, this.lowered, true);
  }

  /** Writes a byte list as (ptr, len) at `at`. */
  putList(at: number, bytes: Uint8Array) {
    const ptr = this.put(bytes);
    const view = this.view;
    view.setUint32(at, ptr, true);
    view.setUint32(at + 4, bytes.length, true);
  }

  /** Lowers a list of (name, value) pairs; returns the pointer (the length is the pairs'). */
  putHeaders(headers: [string, string][]): number {
    const ptr = this.alloc(4, headers.length * 16);
    for (let i = 0; i < headers.length; i++) {
      this.putString(ptr + i * 16, headers[i][0]);
      this.putString(ptr + i * 16 + 8, headers[i][1]);
    }
    return ptr;
  }

  headers(ptr: number, len: number): [string, string][] {
    const [start, count] = checkedList(this.bytes, ptr, len, 16);
    const headers: [string, string][] = [];
    let lifted = 0;
    for (let i = 0; i < count; i++) {
      const at = start + i * 16;
      const view = this.view;
      const nameLength = view.getUint32(at + 4, true);
      const valueLength = view.getUint32(at + 12, true);
      lifted = chargeList(lifted, nameLength + valueLength);
      const name = this.string(view.getUint32(at, true), nameLength);
      const value = this.string(view.getUint32(at + 8, true), valueLength);
      headers.push([name, value]);
    }
    return headers;
  }
}

/** The end of `len` bytes at `ptr` (both unsigned), or a trap when past the memory. */
function checkedEnd(bytes: Uint8Array, ptr: number, len: number): number {
  const end = ptr + len;
  if (end > bytes.length) throw new RangeError(`guest pointer ${ptr}+${len} is out of bounds`);
  return end;
}

/**
 * A guest list's pointer and length as unsigned numbers, after checking the
 * whole list lies in memory (guest i32 values arrive signed in JavaScript)
 * and holds at most {@linkcode MAX_GUEST_LIST_ELEMENTS}.
 */
function checkedList(bytes: Uint8Array, ptr: number, len: number, size: number): [number, number] {
  const start = ptr >>> 0;
  const count = len >>> 0;
  if (count > MAX_GUEST_LIST_ELEMENTS) {
    throw new RangeError(
      `a list of ${count} elements, over the ${MAX_GUEST_LIST_ELEMENTS} allowed`,
    );
  }
  checkedEnd(bytes, start, count * size);
  return [start, count];
}

/**
 * What a list's elements lift to so far, `bytes` (read unsigned from the
 * guest) more; a trap past {@linkcode MAX_GUEST_LIST_BYTES}, before
 * anything of it is copied.
 */
function chargeList(lifted: number, bytes: number): number {
  const total = lifted + bytes;
  if (total > MAX_GUEST_LIST_BYTES) {
    throw new RangeError(
      `a list whose strings and bytes come to over ${MAX_GUEST_LIST_BYTES} bytes in all`,
    );
  }
  return total;
}

/** Runs a host import; an `err` is written with `writeErr`, anything else is thrown (a trap). */
function withErr<T>(
  run: () => T,
  writeOk: (value: T) => void,
  writeErr: (payload: unknown) => void,
) {
  let value: T;
  try {
    value = run();
  } catch (error) {
    if (error instanceof GuestError) return writeErr(error.payload);
    throw error;
  }
  writeOk(value);
}

/** {@linkcode withErr} for an import that may wait. */
async function withErrWaiting<T>(
  run: () => T | Promise<T>,
  writeOk: (value: T) => void,
  writeErr: (payload: unknown) => void,
) {
  let value: T;
  try {
    value = await run();
  } catch (error) {
    if (error instanceof GuestError) return writeErr(error.payload);
    throw error;
  }
  writeOk(value);
}

/**
 * JSPI, which V8 (and so Deno 2.9) has on by default; typed here because
 * Deno's WebAssembly declarations do not list it yet.
 */
const JSPI = WebAssembly as unknown as {
  Suspending: new (fn: (...args: never[]) => Promise<unknown>) => WebAssembly.ImportValue;
  promising<A extends unknown[], R>(fn: (...args: A) => R): (...args: A) => Promise<R>;
};

function readValues(guest: Guest, ptr: number, len: number): SqlValue[] {
  const [start, count] = checkedList(guest.bytes, ptr, len, 16);
  const values: SqlValue[] = [];
  let lifted = 0;
  for (let i = 0; i < count; i++) {
    const at = start + i * 16;
    const view = guest.view;
    const tag = view.getUint8(at);
    if (tag === 3 || tag === 4) lifted = chargeList(lifted, view.getUint32(at + 12, true));
    switch (tag) {
      case 0:
        values.push({ tag: "null" });
        break;
      case 1:
        values.push({ tag: "integer", val: view.getBigInt64(at + 8, true) });
        break;
      case 2:
        values.push({ tag: "real", val: view.getFloat64(at + 8, true) });
        break;
      case 3:
        values.push({
          tag: "text",
          val: guest.string(view.getUint32(at + 8, true), view.getUint32(at + 12, true)),
        });
        break;
      case 4:
        values.push({
          tag: "blob",
          val: guest.copy(view.getUint32(at + 8, true), view.getUint32(at + 12, true)),
        });
        break;
      default:
        throw new Error(`a storage value with the unknown case ${tag}`);
    }
  }
  return values;
}

function writeValue(guest: Guest, at: number, value: SqlValue) {
  // Payload first: allocating may grow memory, which renews the view.
  if (value.tag === "text") guest.putString(at + 8, value.val);
  else if (value.tag === "blob") guest.putList(at + 8, value.val);
  const view = guest.view;
  switch (value.tag) {
    case "null":
      view.setUint8(at, 0);
      break;
    case "integer":
      view.setUint8(at, 1);
      view.setBigInt64(at + 8, value.val, true);
      break;
    case "real":
      view.setUint8(at, 2);
      view.setFloat64(at + 8, value.val, true);
      break;
    case "text":
      view.setUint8(at, 3);
      break;
    case "blob":
      view.setUint8(at, 4);
      break;
  }
}

/** result<exec-result, sql-error> at `ret`: tag at 0, payload at 8. */
function writeExecResult(guest: Guest, ret: number, result: ExecResult) {
  const columns = guest.alloc(4, result.columns.length * 8);
  for (let i = 0; i < result.columns.length; i++) {
    guest.putString(columns + i * 8, result.columns[i]);
  }
  const rows = guest.alloc(4, result.rows.length * 8);
  for (let i = 0; i < result.rows.length; i++) {
    const row = result.rows[i];
    const values = guest.alloc(8, row.length * 16);
    for (let j = 0; j < row.length; j++) writeValue(guest, values + j * 16, row[j]);
    const view = guest.view;
    view.setUint32(rows + i * 8, values, true);
    view.setUint32(rows + i * 8 + 4, row.length, true);
  }
  const view = guest.view;
  view.setUint8(ret, 0);
  view.setUint32(ret + 8, columns, true);
  view.setUint32(ret + 12, result.columns.length, true);
  view.setUint32(ret + 16, rows, true);
  view.setUint32(ret + 20, result.rows.length, true);
  view.setBigUint64(ret + 24, result.changes, true);
  view.setBigInt64(ret + 32, result.lastInsertRowid, true);
}

/** A sql-error record at `at`. */
function writeSqlError(guest: Guest, at: number, payload: unknown) {
  const error = payload as SqlError;
  guest.putString(at, String(error.code));
  guest.putString(at + 8, String(error.message));
}

/** result<_, string> at `ret`: tag at 0, string at 4. */
function writeUnitResult(guest: Guest, ret: number, err?: string) {
  if (err === undefined) {
    guest.view.setUint8(ret, 0);
    return;
  }
  guest.putString(ret + 4, err);
  guest.view.setUint8(ret, 1);
}

function readRequest(guest: Guest, a: number[]): ActorRequest {
  return {
    method: guest.string(a[0], a[1]),
    path: guest.string(a[2], a[3]),
    query: guest.string(a[4], a[5]),
    headers: guest.headers(a[6], a[7]),
    body: guest.copy(a[8], a[9]),
  };
}

function coreImports(guest: Guest, host: ActorImports): WebAssembly.Imports {
  // withErr spelled out: three closures per statement cost more than the rest of the lowering.
  const exec = (sqlPtr: number, sqlLen: number, ptr: number, len: number, ret: number) => {
    const sql = guest.string(sqlPtr, sqlLen);
    const params = readValues(guest, ptr, len);
    let result: ExecResult;
    try {
      result = host.exec(sql, params);
    } catch (error) {
      if (!(error instanceof GuestError)) throw error;
      writeSqlError(guest, ret + 8, error.payload);
      guest.view.setUint8(ret, 1);
      return;
    }
    writeExecResult(guest, ret, result);
  };
  const execDurable = (sqlPtr: number, sqlLen: number, ptr: number, len: number, ret: number) => {
    const sql = guest.string(sqlPtr, sqlLen);
    const params = readValues(guest, ptr, len);
    return withErrWaiting(
      () => host.execDurable(sql, params),
      (result) => writeExecResult(guest, ret, result),
      (payload) => {
        writeSqlError(guest, ret + 8, payload);
        guest.view.setUint8(ret, 1);
      },
    );
  };
  const unitResult = (run: () => void) => (ret: number) =>
    withErr(
      run,
      () => writeUnitResult(guest, ret),
      (payload) => writeUnitResult(guest, ret, String(payload)),
    );
  return {
    [`wasmkeep:actor/storage${VERSION}`]: {
      exec,
      "exec-durable": new JSPI.Suspending(execDurable),
      "in-transaction": () => host.inTransaction() ? 1 : 0,
      "delete-self": new JSPI.Suspending((ret: number) =>
        withErrWaiting(() => host.deleteSelf(), () => guest.view.setUint8(ret, 0), (payload) => {
          writeSqlError(guest, ret + 4, payload);
          guest.view.setUint8(ret, 1);
        })
      ),
    },
    [`wasmkeep:actor/actors${VERSION}`]: {
      self: (ret: number) => {
        const id = host.self();
        guest.putString(ret, id.tenant);
        guest.putString(ret + 8, id.class);
        guest.putString(ret + 16, id.name);
      },
      call: new JSPI.Suspending((...args: number[]) => {
        const ret = args[14];
        const className = guest.string(args[0], args[1]);
        const name = guest.string(args[2], args[3]);
        const request = readRequest(guest, args.slice(4, 14));
        return withErrWaiting(() => host.call(className, name, request), (response) => {
          const headers = guest.putHeaders(response.headers);
          const count = response.headers.length;
          guest.putList(ret + 16, response.body);
          const view = guest.view;
          view.setUint8(ret, 0);
          view.setUint16(ret + 4, response.status, true);
          view.setUint32(ret + 8, headers, true);
          view.setUint32(ret + 12, count, true);
        }, (payload) => writeUnitResult(guest, ret, String(payload)));
      }),
    },
    [`wasmkeep:actor/alarms${VERSION}`]: {
      set: (atMs: bigint, ret: number) =>
        unitResult(() => host.alarmSet(BigInt.asUintN(64, atMs)))(ret),
      get: (ret: number) => {
        const at = host.alarmGet();
        const view = guest.view;
        view.setUint8(ret, at === undefined ? 0 : 1);
        if (at !== undefined) view.setBigUint64(ret + 8, at, true);
      },
      delete: unitResult(() => host.alarmDelete()),
    },
    [`wasmkeep:actor/websockets${VERSION}`]: {
      send: (connection: bigint, tag: number, ptr: number, len: number, ret: number) => {
        if (tag !== 0 && tag !== 1) {
          throw new Error(`a WebSocket message with the unknown case ${tag}`);
        }
        const message = tag === 0
          ? { tag: "text" as const, val: guest.string(ptr, len) }
          : { tag: "binary" as const, val: guest.copy(ptr, len) };
        unitResult(() => host.wsSend(BigInt.asUintN(64, connection), message))(ret);
      },
      close: (connection: bigint, code: number, ptr: number, len: number, ret: number) => {
        const reason = guest.string(ptr, len);
        unitResult(() => host.wsClose(BigInt.asUintN(64, connection), code & 0xffff, reason))(ret);
      },
      connections: (ret: number) => {
        const connections = host.wsConnections();
        const ptr = guest.alloc(8, connections.length * 8);
        const view = guest.view;
        connections.forEach((id, i) => view.setBigUint64(ptr + i * 8, id, true));
        view.setUint32(ret, ptr, true);
        view.setUint32(ret + 4, connections.length, true);
      },
    },
    [`wasmkeep:actor/config${VERSION}`]: {
      get: (ptr: number, len: number, ret: number) => {
        const value = host.configGet(guest.string(ptr, len));
        if (value === undefined) {
          guest.view.setUint8(ret, 0);
          return;
        }
        guest.putString(ret + 4, value);
        guest.view.setUint8(ret, 1);
      },
    },
    [`wasmkeep:actor/log${VERSION}`]: {
      log: (level: number, ptr: number, len: number) => {
        const name = LOG_LEVELS[level];
        if (!name) throw new Error(`a log level with the unknown case ${level}`);
        host.log(name, guest.string(ptr, len));
      },
    },
  };
}

interface MainExports {
  memory: WebAssembly.Memory;
  cabi_realloc: Realloc;
  "on-init": () => number;
  "on-request": (...args: number[]) => number;
  "on-alarm": () => number;
  "on-websocket-open": (connection: bigint, ...args: number[]) => void;
  "on-websocket-message": (connection: bigint, tag: number, ptr: number, len: number) => void;
  "on-websocket-close": (connection: bigint, code: number, ptr: number, len: number) => void;
  "cabi_post_on-init"?: (ptr: number) => void;
  "cabi_post_on-request"?: (ptr: number) => void;
  "cabi_post_on-alarm"?: (ptr: number) => void;
}

/**
 * Reads a `result<_, string>` an export returned at `ret`, then runs its
 * post-return; an err throws with the message as `payload`, as jco's glue does.
 */
function unitResultOf(
  guest: Guest,
  name: string,
  ret: number,
  postReturn: ((ptr: number) => void) | undefined,
): void {
  const view = guest.view;
  const tag = view.getUint8(ret);
  if (tag > 1) throw new Error(`${name} returned a result with the unknown case ${tag}`);
  const failed = tag === 1;
  const message = failed
    ? guest.string(view.getUint32(ret + 4, true), view.getUint32(ret + 8, true))
    : "";
  postReturn?.(ret);
  if (failed) throw Object.assign(new Error(message), { payload: message });
}

/**
 * Instantiates an actor's main core module with the direct bindings.
 *
 * @example
 * ```ts
 * import { type ActorImports, instantiateDirect } from "./direct.ts";
 * import type { ActorRequest } from "../protocol.ts";
 * declare const module: WebAssembly.Module;
 * declare const imports: ActorImports;
 * declare const request: ActorRequest;
 * const actor = instantiateDirect(module, imports);
 * await actor.onInit();
 * const response = await actor.onRequest(request);
 * ```
 */
export function instantiateDirect(
  module: WebAssembly.Module,
  host: ActorImports,
): ActorExportCalls {
  const guest = new Guest();
  const instance = new WebAssembly.Instance(module, coreImports(guest, host));
  const exports = instance.exports as unknown as MainExports;
  guest.attach(exports.memory, exports.cabi_realloc);
  const postOnInit = exports["cabi_post_on-init"];
  const postOnRequest = exports["cabi_post_on-request"];
  const postOnAlarm = exports["cabi_post_on-alarm"];
  // Promising exports run on a stack of their own, which an import that
  // waits (exec-durable, delete-self, call) can suspend.
  const onInit = JSPI.promising(exports["on-init"]);
  const onRequest = JSPI.promising(exports["on-request"]);
  const onAlarm = JSPI.promising(exports["on-alarm"]);
  const onWebsocketOpen = JSPI.promising(exports["on-websocket-open"]);
  const onWebsocketMessage = JSPI.promising(exports["on-websocket-message"]);
  const onWebsocketClose = JSPI.promising(exports["on-websocket-close"]);
  /** The request's fields lowered in the order jco's glue uses: method, path, query, headers, body. */
  const lowerRequest = (request: ActorRequest): number[] => {
    const methodPtr = guest.lowerString(request.method);
    const methodLength = guest.lowered;
    const pathPtr = guest.lowerString(request.path);
    const pathLength = guest.lowered;
    const queryPtr = guest.lowerString(request.query);
    const queryLength = guest.lowered;
    const headersPtr = guest.putHeaders(request.headers);
    const bodyPtr = guest.put(request.body);
    return [
      methodPtr,
      methodLength,
      pathPtr,
      pathLength,
      queryPtr,
      queryLength,
      headersPtr,
      request.headers.length,
      bodyPtr,
      request.body.length,
    ];
  };

  return {
    async onInit(): Promise<void> {
      unitResultOf(guest, "on-init", (await onInit()) >>> 0, postOnInit);
    },
    async onAlarm(): Promise<void> {
      unitResultOf(guest, "on-alarm", (await onAlarm()) >>> 0, postOnAlarm);
    },
    async onRequest(request: ActorRequest): Promise<ActorResponse> {
      const ret = (await onRequest(...lowerRequest(request))) >>> 0;
      const view = guest.view;
      const response: ActorResponse = {
        status: view.getUint16(ret, true),
        headers: guest.headers(view.getUint32(ret + 4, true), view.getUint32(ret + 8, true)),
        body: guest.copy(view.getUint32(ret + 12, true), view.getUint32(ret + 16, true)),
      };
      postOnRequest?.(ret);
      return response;
    },
    async onWebsocketOpen(connection: bigint, request: ActorRequest): Promise<void> {
      await onWebsocketOpen(BigInt.asIntN(64, connection), ...lowerRequest(request));
    },
    async onWebsocketMessage(connection: bigint, message: WsMessage): Promise<void> {
      const ptr = message.tag === "text" ? guest.lowerString(message.val) : guest.put(message.val);
      const len = message.tag === "text" ? guest.lowered : message.val.length;
      await onWebsocketMessage(
        BigInt.asIntN(64, connection),
        message.tag === "text" ? 0 : 1,
        ptr,
        len,
      );
    },
    async onWebsocketClose(connection: bigint, code: number, reason: string): Promise<void> {
      const ptr = guest.lowerString(reason);
      await onWebsocketClose(BigInt.asIntN(64, connection), code, ptr, guest.lowered);
    },
  };
}
