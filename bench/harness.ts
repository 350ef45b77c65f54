import autocannon from 'autocannon';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { profileDir, profileSince, topSelfTime } from './profile.ts';

/** What every benchmark shares: the servers process, the API helper and how figures are summarised. */
export interface Figures {
  name: string;
  requests: number;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

export interface Servers {
  servicePort: number;
  barePort: number;
  /** A bare node:http server answering registered statements with PostgreSQL's text (bench/servers.ts). */
  floorPort: number;
  /** The process of the bare and floor servers (bench/servers.ts): its CPU per request. */
  floorPid: number;
  apiKey: string;
  orgId: string;
  userId: string;
  databaseUrl: string;
  /** The API's process (the built server, or the servers process with BENCH_SERVER=tsx): CPU and memory readings. */
  pid: number;
  /** Stops the servers; with BENCH_PROFILE=1, waits for their CPU profile and prints its top self-time functions. */
  stop(): Promise<void>;
}

/**
 * BENCH_SERVER: `dist` (default) benchmarks the API as production runs it, `node dist/main.js` (built by
 * `npm run build` first, so it is never stale); `tsx` benchmarks the API inside bench/servers.ts, compiled by tsx
 * at run time, as benches did before the built server existed (for before/after comparisons).
 */
const SERVER = process.env.BENCH_SERVER ?? 'dist';
if (SERVER !== 'dist' && SERVER !== 'tsx') throw new Error(`BENCH_SERVER is dist or tsx, not ${SERVER}`);

// NODE_ENV=production as `npm start` runs it: graphql-js, for one, checks every instanceof twice otherwise.
const childEnv = () => ({ ...process.env, NODE_ENV: process.env.NODE_ENV ?? 'production' });
const profileArgs = () => (profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []);

/**
 * The processes a bench started (servers, API, workers, peers): stopped with SIGTERM when the bench process exits,
 * however it exits — returning, throwing, or interrupted. One left behind keeps its database connections and its
 * worker's loops: a worker orphaned by a crashed run once delivered the next runs' webhooks beside theirs (their
 * drains waited ~60 s on its endpoint locks, and its CPU counted against their "with" sides).
 */
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));

/** `spawn`, with the child stopped when the bench exits (see `children`). */
export function spawnChild(...args: Parameters<typeof spawn>): ChildProcess {
  const child = spawn(...args);
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

function stopper(child: ChildProcess): () => Promise<void> {
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return async () => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
  };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** How a bench starts the job worker (and the whole server): the built ones with BENCH_SERVER=dist, else tsx. */
export const workerArgs = (): string[] =>
  SERVER === 'dist' ? ['dist/worker.js'] : ['--import', 'tsx', 'src/bin/worker.ts'];
export const mainArgs = (): string[] => (SERVER === 'dist' ? ['dist/main.js'] : ['--import', 'tsx', 'src/bin/main.ts']);

export interface BuiltServer {
  port: number;
  pid: number;
  stop(): Promise<void>;
}

/**
 * `node dist/main.js` of the checkout in `directory` (built first) on the bench's database, with the same settings
 * bench/servers.ts gives its in-process API.
 */
async function startBuiltServer(databaseUrl: string, directory = process.cwd(), profile = true): Promise<BuiltServer> {
  const built = spawnSync(process.execPath, ['scripts/build.mjs'], { stdio: 'inherit', cwd: directory });
  if (built.status !== 0) throw new Error(`npm run build failed in ${directory}`);
  const port = await freePort();
  const limitsOff =
    process.env.BENCH_KEEP_LIMITS === '1'
      ? {}
      : { RATE_LIMIT_RPS: '0', CONCURRENCY_LIMIT: '0', ORG_CONCURRENCY_LIMIT: '0' };
  const child = spawnChild(process.execPath, [...(profile ? profileArgs() : []), 'dist/main.js'], {
    cwd: directory,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...childEnv(),
      ...limitsOff,
      DATABASE_URL: databaseUrl,
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'silent',
      RUN_WORKER: 'false',
    },
  });
  const stop = stopper(child);
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`dist/main.js exited (${child.exitCode})`);
    const ready = await fetch(`http://127.0.0.1:${port}/healthz`).then(
      (response) => response.ok,
      () => false,
    );
    if (ready) return { port, pid: child.pid!, stop };
    if (Date.now() > deadline) {
      await stop();
      throw new Error('dist/main.js did not answer /healthz within 60 s');
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * BENCH_BEFORE=<directory>: another checkout (e.g. a worktree of main with node_modules) whose built server runs
 * beside this one on the same database, so a bench can measure before and after in one alternating run: on a
 * shared machine, runs minutes apart differ by more than most changes do. Undefined without BENCH_BEFORE.
 */
export async function startBeforeServer(servers: Servers): Promise<BuiltServer | undefined> {
  const directory = process.env.BENCH_BEFORE;
  return directory ? startBuiltServer(servers.databaseUrl, directory, false) : undefined;
}

/**
 * bench/servers.ts in its own process (node directly, so SIGTERM reaches it), so the load generator does not share
 * the service's event loop: it prepares the bench database and the bench org, serves the bare and floor servers
 * and (BENCH_SERVER=tsx) the API, and prints one JSON line when ready. With BENCH_SERVER=dist the API is the
 * built server in a process of its own.
 */
export async function startServers(): Promise<Servers> {
  const started = Date.now();
  const builtApi = SERVER === 'dist';
  const child = spawnChild(
    process.execPath,
    [...(builtApi ? [] : profileArgs()), '--import', 'tsx', 'bench/servers.ts'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: childEnv(),
    },
  );
  const stopHelpers = stopper(child);
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`bench servers exited (${code})`)));
  });
  const ready = JSON.parse(line) as Omit<Servers, 'pid' | 'stop'>;
  const api = builtApi ? await startBuiltServer(ready.databaseUrl) : undefined;
  const stop = async () => {
    await api?.stop();
    await stopHelpers();
    const file = profileDir && profileSince(profileDir, started);
    if (file) process.stdout.write(`\n${topSelfTime(file)}\n`);
  };
  process.stdout.write(`API: ${builtApi ? 'node dist/main.js (built)' : 'bench/servers.ts through tsx'}\n`);
  return api ? { ...ready, servicePort: api.port, pid: api.pid, stop } : { ...ready, pid: child.pid!, stop };
}

/**
 * Registers a statement with the floor server: one that yields one `body` text, or a row page statement of the
 * service (`selectRowPage` with `json`: columns id, h, v), whose rows the floor joins into `{"data":[…]}` as texts,
 * never parsed. Answers the URL that runs it.
 */
export async function registerFloor(
  servers: Servers,
  name: string,
  statement: { sql: string; params: unknown[] },
): Promise<string> {
  const url = `http://127.0.0.1:${servers.floorPort}/statements/${name}`;
  const response = await fetch(url, { method: 'POST', body: JSON.stringify(statement) });
  if (response.status !== 204) throw new Error(`floor server refused the statement (${response.status})`);
  return url;
}

/** A REST call as the bench org's admin, with a fresh Idempotency-Key. */
export async function api(servers: Servers, method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(`http://127.0.0.1:${servers.servicePort}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${servers.apiKey}`,
      'content-type': 'application/json',
      'idempotency-key': randomUUID(),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
  return response.json();
}

export function percentile(sorted: number[], q: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

export function figures(name: string, latencies: number[], seconds: number, errors: number): Figures {
  const sorted = [...latencies].sort((a, b) => a - b);
  return {
    name,
    requests: latencies.length,
    rps: latencies.length / seconds,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    errors,
  };
}

/**
 * Puts the server in the same state before each side of a comparison: what the side before left behind (dirty pages
 * a checkpoint would write, new and dead row versions autovacuum would visit) is done here, unmeasured, instead of
 * landing on whichever side runs next. Needs a superuser (CHECKPOINT), as the bench's databases are.
 */
export async function quiesce(client: { query(sql: string): Promise<unknown> }): Promise<void> {
  await client.query('VACUUM (ANALYZE)');
  await client.query('CHECKPOINT');
}

export const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/**
 * The one line every benchmark ends a measured row with, so `npm run bench | grep '^ratio'` gives the table:
 * `ratio | <row> | <what over what> | median of N: <x> | rounds <r1> <r2> … | target ≥ <t>`.
 */
export function ratioLine(row: string, quotient: string, ratios: number[], target: number): string {
  const format = (value: number) => (value >= 0.1 ? value.toFixed(2) : value.toPrecision(2));
  const verdict = median(ratios) >= target ? 'met' : 'not met';
  return (
    `ratio | ${row} | ${quotient} | median of ${ratios.length}: ${format(median(ratios))} | rounds ${ratios.map(format).join(' ')}` +
    ` | target ≥ ${target} ${verdict}`
  );
}

/**
 * Creates/s of `amount` row creates into the table (through the API at `target`) over `connections` connections,
 * each with its own Idempotency-Key, timed to the last answer: autocannon reports its end on its once-a-second tick,
 * which quantised a rate of ~400/s to 3000/7, 3000/8, … (±7 %).
 */
export async function createRows(
  target: { port: number; apiKey: string },
  table: { path: string; schemaVersion: number },
  values: Record<string, unknown>,
  amount: number,
  connections: number,
): Promise<number> {
  const started = performance.now();
  let lastResponse = started;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: `http://127.0.0.1:${target.port}${table.path}/rows`,
        connections,
        amount,
        method: 'POST',
        headers: { authorization: `Bearer ${target.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ expectedSchemaVersion: table.schemaVersion, values }),
        requests: [
          {
            setupRequest: (request) => ({
              ...request,
              headers: { ...request.headers, 'idempotency-key': randomUUID() },
            }),
          },
        ],
      },
      (error, finished) => (error ? reject(error) : resolve(finished)),
    );
    instance.on('response', () => {
      lastResponse = performance.now();
    });
  });
  if (result.errors + result.non2xx > 0)
    throw new Error(`row creates failed: ${result.errors} errors, ${result.non2xx} non-2xx`);
  return amount / ((lastResponse - started) / 1000);
}
