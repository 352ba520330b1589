/**
 * A WebSocket client for tests (Deno's own): opened before it is returned,
 * its messages queued as they come, its close kept with when it came.
 *
 * @module
 */

/** How a socket closed, and when (`performance.now()`). */
export interface Closed {
  code: number;
  reason: string;
  wasClean: boolean;
  at: number;
}

/** An open socket: `next()` is its next message (text, or bytes), `closed` its close. */
export interface TestSocket {
  socket: WebSocket;
  next(): Promise<string | Uint8Array>;
  closed: Promise<Closed>;
}

/** Opens a socket to `url`; rejects when it does not open. */
export async function openSocket(url: string): Promise<TestSocket> {
  const socket = new WebSocket(url);
  socket.binaryType = "arraybuffer";
  const messages: (string | Uint8Array)[] = [];
  const waiters: (() => void)[] = [];
  socket.onmessage = (event) => {
    messages.push(
      typeof event.data === "string" ? event.data : new Uint8Array(event.data as ArrayBuffer),
    );
    for (const wake of waiters.splice(0)) wake();
  };
  const closed = new Promise<Closed>((resolve) => {
    socket.onclose = (event) =>
      resolve({
        code: event.code,
        reason: event.reason,
        wasClean: event.wasClean,
        at: performance.now(),
      });
  });
  await new Promise<void>((resolve, reject) => {
    socket.onopen = () => resolve();
    socket.onerror = () => reject(new Error(`the socket to ${url} failed`));
  });
  const next = async () => {
    while (messages.length === 0) await new Promise<void>((resolve) => waiters.push(resolve));
    return messages.shift()!;
  };
  return { socket, next, closed };
}
