import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { vi } from 'vitest';
import { loadConfig, type Config } from '../../src/kernel/config.ts';
import type { PrismaClient } from '../../src/db/prisma.ts';
import type { TestDatabase } from './database.ts';
import { send, type TestServer } from './server.ts';

/**
 * The service as an operator runs it: `npm start` and `npm run worker` as child processes, each in its own process
 * group (npm → node, `exec` in the script), so that stopping the group reaches every process of it.
 */
export interface ServiceProcess {
  pid: number;
  /** Every line the process wrote to stdout (its JSON logs), as they arrive. */
  lines: string[];
  stop(): Promise<void>;
}

export type Env = Record<string, string>;

const running = new Set<number>();
// Whatever ends the test run, no service process outlives it.
process.once('exit', () => {
  for (const pid of running) signalGroup(pid, 'SIGKILL');
});

function signalGroup(pid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false;
  }
}

const groupAlive = (pid: number) => signalGroup(pid, 0);

async function untilGone(pid: number, deadlineMs: number): Promise<boolean> {
  return vi
    .waitFor(
      () => {
        if (groupAlive(pid)) throw new Error(`process group ${pid} is still running`);
        return true;
      },
      { timeout: deadlineMs, interval: 50 },
    )
    .catch(() => false);
}

/** The environment a process gets: the test's own, without the service settings the test run may carry. */
function serviceEnv(env: Env): NodeJS.ProcessEnv {
  const inherited = { ...process.env };
  for (const name of ['REDIS_URL', 'DATABASE_URL', 'PORT', 'HOST', 'RUN_WORKER']) delete inherited[name];
  return { ...inherited, NODE_ENV: 'production', LOG_LEVEL: 'warn', ...env };
}

function spawnService(script: 'start' | 'worker', env: Env): ServiceProcess {
  const child: ChildProcess = spawn('npm', ['run', '-s', script], {
    detached: true,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: serviceEnv(env),
  });
  const pid = child.pid!;
  running.add(pid);
  const lines: string[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => lines.push(line));
  return {
    pid,
    lines,
    // SIGTERM lets the service shut down as it would in production; what is left after 15 s is killed.
    stop: async () => {
      if (signalGroup(pid, 'SIGTERM') && !(await untilGone(pid, 15_000))) {
        signalGroup(pid, 'SIGKILL');
        await untilGone(pid, 5_000);
      }
      if (child.exitCode === null && child.signalCode === null) await once(child, 'exit');
      running.delete(pid);
    },
  };
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface ApiProcess extends TestServer, ServiceProcess {}

/**
 * `npm start` on a free port over `database`, its worker off (`RUN_WORKER=false`), ready once `GET /readyz` answers
 * 200. Usable wherever the test helpers take a TestServer; `prisma` is the test's own client on the same database.
 */
export async function startApiProcess(
  database: TestDatabase,
  prisma: PrismaClient,
  env: Env = {},
): Promise<ApiProcess> {
  const port = await freePort();
  const settings = { DATABASE_URL: database.url, PORT: String(port), HOST: '127.0.0.1', RUN_WORKER: 'false', ...env };
  const service = spawnService('start', settings);
  const url = `http://127.0.0.1:${port}`;
  // Ready (true), or gone before it was (false): either ends the wait; 90 s without either is not ready either.
  const ready = await vi
    .waitFor(
      async () => {
        if (
          await fetch(`${url}/readyz`).then(
            (response) => response.status === 200,
            () => false,
          )
        )
          return true;
        if (!groupAlive(service.pid)) return false;
        throw new Error(`npm start on port ${port} is not ready yet`);
      },
      { timeout: 90_000, interval: 100 },
    )
    .catch(() => false);
  if (!ready) {
    await service.stop();
    throw new Error(`npm start on port ${port} did not become ready`);
  }
  return {
    ...service,
    url,
    prisma,
    database,
    config: loadConfig({}, settings as Partial<Record<keyof Config, string>>),
    request: (method, path, options = {}) => send(url, method, path, options),
    graphql: (query, variables = {}, options = {}) =>
      send(url, 'POST', '/graphql', { ...options, body: { query, variables } }),
    close: service.stop,
  };
}

/** The JSON log entries a process wrote whose `msg` is `message`. */
export function logged(service: ServiceProcess, message: string): Record<string, any>[] {
  return service.lines.flatMap((line) => {
    try {
      const entry = JSON.parse(line);
      return entry.msg === message ? [entry] : [];
    } catch {
      return [];
    }
  });
}

/**
 * `npm run worker` over `database`, logging at info so that the test can read which jobs it finished; resolves once
 * it logged "worker started".
 */
export async function startWorkerProcess(database: TestDatabase, env: Env = {}): Promise<ServiceProcess> {
  const service = spawnService('worker', { DATABASE_URL: database.url, LOG_LEVEL: 'info', ...env });
  const started = await vi
    .waitFor(
      () => {
        if (logged(service, 'worker started').length > 0) return true;
        if (!groupAlive(service.pid)) return false;
        throw new Error('npm run worker has not started yet');
      },
      { timeout: 90_000, interval: 100 },
    )
    .catch(() => false);
  if (!started) {
    await service.stop();
    throw new Error('npm run worker did not start');
  }
  return service;
}
