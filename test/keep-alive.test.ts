import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { setTimeout as pause } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEEP_ALIVE_HINT_S } from '../src/http/keep-alive.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';

/**
 * A client that keeps a connection for as long as the server's `Keep-Alive: timeout=N` hint allows, and is late by a
 * second (a busy event loop, a loaded machine), must still find it open: the server never closes an idle
 * connection at the moment it told clients they may reuse it (issue 25: ECONNRESET under load).
 */
let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

/** One GET on `socket`; the status line and headers of the answer (bodies here are small JSON). */
async function get(socket: Socket, path: string): Promise<{ status: number; headers: Record<string, string> }> {
  if (socket.destroyed || !socket.writable || socket.readableEnded) throw new Error('the server closed the connection');
  socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  let text = '';
  while (!text.includes('\r\n\r\n')) {
    const [chunk] = await Promise.race([once(socket, 'data'), once(socket, 'close').then(() => [null])]);
    if (chunk === null) throw new Error('the server closed the connection');
    text += String(chunk);
  }
  const [head, body] = text.split('\r\n\r\n') as [string, string];
  const [statusLine, ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(
    lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
  );
  let received = Buffer.byteLength(body);
  while (received < Number(headers['content-length']))
    received += Buffer.byteLength(String((await once(socket, 'data'))[0]));
  return { status: Number(statusLine!.split(' ')[1]), headers };
}

describe('kept-alive connections', () => {
  it('stay open past the advertised idle timeout, so a late client reusing one gets its answer', async () => {
    const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
    await once(socket, 'connect');
    try {
      const first = await get(socket, '/healthz');
      expect(first.status).toBe(200);
      expect(first.headers.connection).toBe('keep-alive');
      expect(first.headers['keep-alive']).toBe(`timeout=${KEEP_ALIVE_HINT_S}`);
      await pause(KEEP_ALIVE_HINT_S * 1000 + 1_000);
      expect((await get(socket, '/healthz')).status).toBe(200);
    } finally {
      socket.destroy();
    }
  }, 30_000);
});
