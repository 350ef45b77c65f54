import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { setTimeout as pause } from 'node:timers/promises';
import autocannon from 'autocannon';
import pg from 'pg';
import { columnOf, rowsTableOf } from '../src/data/identifiers.ts';
import { api, median, ratioLine, mainArgs, startServers, type Figures, spawnChild } from './harness.ts';

/**
 * Issue 14: req/s of one API process against two behind the same load — a page of 50 rows (GET …/rows?limit=50) at
 * concurrency 8, for BENCH_SECONDS (default 3) per measurement, median of BENCH_ROUNDS (default 3). The two processes
 * are `src/bin/main.ts` as `npm start` runs it (worker off, limits off) over the bench database; the load generator splits
 * its connections evenly between the two ports (4 + 4), against 8 on one port. Target: two / one ≥ 1.2.
 */
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ROWS = 10_000;
const CONNECTIONS = 8;

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

interface ApiProcess {
  port: number;
  child: ChildProcess;
}

async function startApiProcess(databaseUrl: string): Promise<ApiProcess> {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_ENV: 'production',
    DATABASE_URL: databaseUrl,
    PORT: String(port),
    HOST: '127.0.0.1',
    RUN_WORKER: 'false',
    LOG_LEVEL: 'warn',
    RATE_LIMIT_RPS: '0',
    CONCURRENCY_LIMIT: '0',
    ORG_CONCURRENCY_LIMIT: '0',
  };
  delete env.REDIS_URL;
  const child = spawnChild(process.execPath, mainArgs(), {
    stdio: ['ignore', 'ignore', 'inherit'],
    env,
  });
  const deadline = Date.now() + 60_000;
  while (
    !(await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (response) => response.ok,
      () => false,
    ))
  ) {
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`API process on port ${port} did not become ready`);
    await pause(100);
  }
  return { port, child };
}

async function stop({ child }: ApiProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  await exited;
}

/** `connections` split evenly over `ports`, all for the same SECONDS; req/s summed, latencies of the first port. */
async function load(name: string, ports: number[], path: string, apiKey: string, seconds = SECONDS): Promise<Figures> {
  const results = await Promise.all(
    ports.map((port) =>
      autocannon({
        url: `http://127.0.0.1:${port}${path}`,
        connections: CONNECTIONS / ports.length,
        duration: seconds,
        headers: { authorization: `Bearer ${apiKey}` },
      }),
    ),
  );
  return {
    name,
    requests: results.reduce((sum, result) => sum + result.requests.total, 0),
    rps: results.reduce((sum, result) => sum + result.requests.average, 0),
    p50: results[0]!.latency.p50,
    p99: Math.max(...results.map((result) => result.latency.p99)),
    errors: results.reduce((sum, result) => sum + result.errors + result.non2xx, 0),
  };
}

const servers = await startServers();
const started: ApiProcess[] = [];
try {
  const database = await api(servers, 'POST', `/v1/orgs/${servers.orgId}/databases`, { name: 'Processes' });
  const table = await api(servers, 'POST', `/v1/orgs/${servers.orgId}/databases/${database.id}/tables`, {
    name: 'Customers',
    fields: [{ name: 'Name', type: 'text' }],
  });
  const seed = new pg.Client({ connectionString: servers.databaseUrl });
  await seed.connect();
  await seed.query(
    `INSERT INTO ${rowsTableOf(database.id, table.id)} (id, version, created_at, updated_at, ${columnOf(table.fields[0].id)})
    SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), 'customer ' || g FROM generate_series(1, $1::int) AS g`,
    [ROWS],
  );
  await seed.query(`ANALYZE ${rowsTableOf(database.id, table.id)}`);
  await seed.end();
  const path = `/v1/orgs/${servers.orgId}/databases/${database.id}/tables/${table.id}/rows?limit=50`;

  started.push(...(await Promise.all([startApiProcess(servers.databaseUrl), startApiProcess(servers.databaseUrl)])));
  const [one, two] = started.map((process) => process.port) as [number, number];
  // Warm both processes (JIT, compiled documents, schema cache) before anything is measured.
  await load('warm-up', [one, two], path, servers.apiKey, 2);

  const ratios: number[] = [];
  for (let round = 1; round <= ROUNDS; round += 1) {
    const single = await load('one process', [one], path, servers.apiKey);
    const pair = await load('two processes', [one, two], path, servers.apiKey);
    for (const f of [single, pair]) {
      process.stdout.write(
        `round ${round} ${f.name.padEnd(14)} ${f.rps.toFixed(0).padStart(6)} req/s   p50 ${f.p50} ms   p99 ${f.p99} ms   errors ${f.errors}\n`,
      );
    }
    ratios.push(pair.rps / single.rps);
  }
  process.stdout.write(
    `row page (${ROWS} rows, limit 50), concurrency ${CONNECTIONS}, median two / one: ${median(ratios).toFixed(2)}\n`,
  );
  process.stdout.write(`${ratioLine('processes: row page', 'two processes / one, req/s', ratios, 1.2)}\n`);
} finally {
  await Promise.all(started.map(stop));
  await servers.stop();
}
