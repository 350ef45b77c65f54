import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { request } from 'node:http';
import { createConnection, createServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createPrisma, type PrismaClient } from '../src/db/prisma.ts';
import { createLogger } from '../src/kernel/log.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { createOrg, type TestOrg } from './helpers/factories.ts';

/**
 * Issue 48: one client address holding idle sockets must not take every connection. `npm start` runs with
 * MAX_CONNECTIONS 40, so the derived per-address cap is 16 (a quarter, at least 16). Linux routes all of 127/8 to
 * loopback, so sockets bound to 127.0.0.2 are another client address than 127.0.0.1.
 */
const CAP = 40;
const PER_ADDRESS = 16;
let database: TestDatabase;
let prisma: PrismaClient;
let org: TestOrg;
let child: ChildProcess;
let port: number;
const sockets: Socket[] = [];

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port: free } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return free;
}

beforeAll(async () => {
  database = await createTestDatabase();
  prisma = createPrisma(database.url, 2, 0, createLogger('silent'));
  org = await createOrg(prisma);
  port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_ENV: 'production',
    LOG_LEVEL: 'error',
    DATABASE_URL: database.url,
    PORT: String(port),
    HOST: '0.0.0.0',
    RUN_WORKER: 'false',
    MAX_CONNECTIONS: String(CAP),
    RATE_LIMIT_RPS: '0',
    CONCURRENCY_LIMIT: '0',
    ORG_CONCURRENCY_LIMIT: '0',
  };
  delete env.REDIS_URL;
  delete env.MAX_CONNECTIONS_PER_ADDRESS;
  child = spawn('npm', ['run', '-s', 'start'], { env, detached: true, stdio: ['ignore', 'ignore', 'inherit'] });
  await vi.waitFor(
    async () => {
      // A connection that closes after its answer (fetch's would stay open and count against 127.0.0.1).
      if ((await getFrom('127.0.0.1', '/readyz')) !== 200) throw new Error('npm start is not ready yet');
    },
    { timeout: 90_000, interval: 200 },
  );
}, 120_000);

afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  if (child?.pid) {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await prisma?.$disconnect();
  await database?.drop();
});

/** A socket from `from` that sends nothing; `closed` is set once the server has closed it. */
function idleSocket(from: string): { socket: Socket; closed: boolean } {
  const socket = createConnection({ host: '127.0.0.1', port, localAddress: from });
  const held = { socket, closed: false };
  sockets.push(socket);
  socket.on('error', () => undefined);
  socket.on('close', () => {
    held.closed = true;
  });
  return held;
}

/** GET `path` from the client address `from` on a fresh connection: its status, or the error's code. */
function getFrom(from: string, path: string, token?: string): Promise<number | string> {
  return new Promise((resolve) => {
    const outgoing = request(
      {
        host: '127.0.0.1',
        port,
        path,
        localAddress: from,
        agent: false,
        headers: token ? { authorization: `Bearer ${token}` } : {},
      },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
      },
    );
    outgoing.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
    outgoing.end();
  });
}

describe('connections per client address', () => {
  it('keeps an address holding every socket it can to its share, and another address is still served', async () => {
    const held = Array.from({ length: CAP }, () => idleSocket('127.0.0.1'));
    // The server closes every socket of 127.0.0.1 beyond its share at once; the others stay open, sending nothing.
    await vi.waitFor(() => expect(held.filter((entry) => entry.closed)).toHaveLength(CAP - PER_ADDRESS), {
      timeout: 10_000,
      interval: 50,
    });
    expect(await getFrom('127.0.0.2', '/v1/me/preferences', org.adminKey)).toBe(200);
    expect(await getFrom('127.0.0.2', '/readyz')).toBe(200);
    // 127.0.0.1 itself gets no further connection while it holds its share.
    expect(await getFrom('127.0.0.1', '/readyz')).toBe('ECONNRESET');
    expect(held.filter((entry) => entry.closed)).toHaveLength(CAP - PER_ADDRESS);
  });

  it('gives the address its connections back as its sockets close', async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    await vi.waitFor(async () => expect(await getFrom('127.0.0.1', '/readyz')).toBe(200), {
      timeout: 10_000,
      interval: 100,
    });
  });
});
