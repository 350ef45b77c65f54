import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { processMs } from './cpu.ts';
import { spawnChild } from './harness.ts';

/**
 * The change feed's consumers in a process of their own: the webhook receivers and the SSE readers of
 * bench/webhook-rows.ts and bench/changes.bench.ts, as a consumer of the service would run them.
 *
 * In the bench's own process they shared one event loop with autocannon, the load generator: every webhook POST the
 * receiver answered and every SSE frame the reader parsed delayed autocannon's next request, so the "with" side of a
 * creates/s ratio was slowed by the bench itself as well as by the service's work. Here they still run on the same
 * cores (their CPU is read and printed), but no longer in the load generator's loop. The parent drives them over IPC.
 */

/** One change received by a receiver (a batch is one receipt per change), at the receiver's clock. */
export interface Receipt {
  at: number;
  committedAt: number;
}

type Request =
  | { op: 'receiver' }
  | { op: 'count'; receiver: number }
  | { op: 'receipts'; receiver: number; from: number }
  | { op: 'open'; url: string; headers: Record<string, string>; streams: number }
  | { op: 'close'; readers: number };

interface Envelope {
  id: number;
  request: Request;
}

export interface Consumers {
  pid: number;
  /** A webhook receiver on loopback: its URL and its handle. */
  receiver(): Promise<{ handle: number; url: string }>;
  /** Changes the receiver has received so far. */
  count(receiver: number): Promise<number>;
  /** The receipts from the `from`th on. */
  receipts(receiver: number, from: number): Promise<Receipt[]>;
  /** `streams` SSE readers of `url`, each reading what it is sent until closed; answers once all are open. */
  openReaders(url: string, headers: Record<string, string>, streams: number): Promise<number>;
  closeReaders(readers: number): Promise<void>;
  /** CPU ms the process has spent (user + system). */
  cpuMs(): number;
  stop(): Promise<void>;
}

export async function startConsumers(): Promise<Consumers> {
  const child: ChildProcess = spawnChild(process.execPath, ['--import', 'tsx', new URL(import.meta.url).pathname], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  await once(child, 'message');
  let next = 0;
  const waiting = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  child.on('message', (message: { id: number; value?: unknown; error?: string }) => {
    const entry = waiting.get(message.id);
    waiting.delete(message.id);
    if (message.error !== undefined) entry?.reject(new Error(message.error));
    else entry?.resolve(message.value);
  });
  const ask = <T>(request: Request): Promise<T> =>
    new Promise((resolve, reject) => {
      next += 1;
      waiting.set(next, { resolve: resolve as (value: unknown) => void, reject });
      child.send({ id: next, request } satisfies Envelope);
    });
  return {
    pid: child.pid!,
    receiver: () => ask({ op: 'receiver' }),
    count: (receiver) => ask({ op: 'count', receiver }),
    receipts: (receiver, from) => ask({ op: 'receipts', receiver, from }),
    openReaders: (url, headers, streams) => ask({ op: 'open', url, headers, streams }),
    closeReaders: (readers) => ask({ op: 'close', readers }),
    cpuMs: () => processMs(child.pid!) ?? 0,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

/** The child: serves the parent's requests until it is told to stop. */
async function serve(): Promise<void> {
  const receivers: { receipts: Receipt[]; server: Server }[] = [];
  const readers = new Map<number, { abort: AbortController; reading: Promise<unknown>[] }>();
  let lastReaders = 0;

  async function startReceiver(): Promise<{ handle: number; url: string }> {
    const receipts: Receipt[] = [];
    const server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const at = Date.now();
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          data: { committedAt?: string; changes?: { committedAt: string }[] };
        };
        const changes = body.data.changes ?? (body.data.committedAt ? [{ committedAt: body.data.committedAt }] : []);
        for (const change of changes) receipts.push({ at, committedAt: Date.parse(change.committedAt) });
        response.writeHead(204).end();
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    receivers.push({ receipts, server });
    return {
      handle: receivers.length - 1,
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    };
  }

  async function openReaders(url: string, headers: Record<string, string>, streams: number): Promise<number> {
    const abort = new AbortController();
    const responses = await Promise.all(
      Array.from({ length: streams }, () => fetch(url, { headers, signal: abort.signal })),
    );
    const reading = responses.map(async (response) => {
      if (response.status !== 200) throw new Error(`SSE reader: ${response.status} ${await response.text()}`);
      const body = response.body!.getReader();
      while (!(await body.read()).done);
    });
    for (const read of reading)
      read.catch((error: unknown) => {
        if (!abort.signal.aborted) process.stderr.write(`SSE reader failed: ${String(error)}\n`);
      });
    lastReaders += 1;
    readers.set(lastReaders, { abort, reading });
    return lastReaders;
  }

  async function closeReaders(handle: number): Promise<void> {
    const open = readers.get(handle);
    readers.delete(handle);
    open?.abort.abort();
    await Promise.allSettled(open?.reading ?? []);
  }

  const handlers = {
    receiver: () => startReceiver(),
    count: (request: { receiver: number }) => receivers[request.receiver]!.receipts.length,
    receipts: (request: { receiver: number; from: number }) =>
      receivers[request.receiver]!.receipts.slice(request.from),
    open: (request: { url: string; headers: Record<string, string>; streams: number }) =>
      openReaders(request.url, request.headers, request.streams),
    close: (request: { readers: number }) => closeReaders(request.readers),
  };
  process.on('message', (message: Envelope) => {
    const handler = handlers[message.request.op] as (request: Request) => unknown;
    Promise.resolve()
      .then(() => handler(message.request))
      .then(
        (value) => process.send!({ id: message.id, value }),
        (error: unknown) => process.send!({ id: message.id, error: String(error) }),
      );
  });
  process.once('SIGTERM', () => {
    for (const handle of readers.keys()) void closeReaders(handle);
    for (const { server } of receivers) {
      server.closeAllConnections();
      server.close();
    }
    process.exit(0);
  });
  process.once('disconnect', () => process.exit(0));
  process.send!('ready');
}

if (process.argv[1] === new URL(import.meta.url).pathname) await serve();
