import { randomBytes, randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
import pg from 'pg';
import { ulid } from 'ulid';
import { cpuCeiling, cpuCeilingLine, cpuLine, withCpu } from './cpu.ts';
import { api, ratioLine, startServers, type Figures, type Servers } from './harness.ts';

/**
 * Create row (endpoint 6) through REST at concurrency 16 for a fixed number of rows, against the same transaction
 * issued as raw SQL through `pg`: row insert + one history entry per cell + activity event + idempotency record.
 * Same machine, same PostgreSQL, same run. Target: REST / raw ≥ 0.5.
 */
const CONCURRENCY = 16;
const ROWS = Number(process.env.BENCH_ROWS ?? 2_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const WARM_UP_ROWS = 1_000;

const FIELDS = [
  { name: 'Name', type: 'text', required: true },
  { name: 'Quantity', type: 'integer' },
  { name: 'Price', type: 'number' },
  { name: 'Active', type: 'boolean' },
  { name: 'Due', type: 'date' },
  { name: 'Status', type: 'select', options: { choices: ['open', 'closed'] } },
];
const VALUES = { Name: 'Widget', Quantity: 3, Price: 19.99, Active: true, Due: '2026-12-01', Status: 'open' };

async function createBenchTable(servers: Servers): Promise<{ path: string; schemaVersion: number }> {
  const { orgId } = servers;
  const database = await api(servers, 'POST', `/v1/orgs/${orgId}/databases`, { name: `Bench ${Date.now()}` });
  const table = await api(servers, 'POST', `/v1/orgs/${orgId}/databases/${database.id}/tables`, {
    name: 'Orders',
    fields: FIELDS,
  });
  return {
    path: `/v1/orgs/${orgId}/databases/${database.id}/tables/${table.id}/rows`,
    schemaVersion: table.schemaVersion,
  };
}

async function withClient<T>(url: string, run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

async function restCreates(servers: Servers, path: string, schemaVersion: number, amount: number): Promise<Figures> {
  // autocannon's `duration` is whole seconds, and a fixed-count run only ends on its next one-second tick:
  // time from the start to the last response instead.
  const started = performance.now();
  let lastResponse = started;
  const options: autocannon.Options = {
    url: `http://127.0.0.1:${servers.servicePort}${path}`,
    connections: CONCURRENCY,
    amount,
    method: 'POST',
    headers: { authorization: `Bearer ${servers.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ expectedSchemaVersion: schemaVersion, values: VALUES }),
    requests: [
      { setupRequest: (request) => ({ ...request, headers: { ...request.headers, 'idempotency-key': randomUUID() } }) },
    ],
  };
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(options, (error, finished) => (error ? reject(error) : resolve(finished)));
    instance.on('response', () => {
      lastResponse = performance.now();
    });
  });
  const seconds = (lastResponse - started) / 1000;
  return {
    name: 'REST POST …/rows',
    requests: amount,
    rps: amount / seconds,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.non2xx,
  };
}

/** The baseline: the same writes a row create commits, with nothing but `pg` between us and PostgreSQL. */
const RAW_SCHEMA = `
  DROP SCHEMA IF EXISTS bench_raw CASCADE;
  CREATE SCHEMA bench_raw;
  CREATE TABLE bench_raw.rows (id char(26) PRIMARY KEY, version bigint NOT NULL DEFAULT 1, created_at timestamptz(3) NOT NULL,
    updated_at timestamptz(3) NOT NULL, name text NOT NULL, quantity bigint, price numeric(15,2), active boolean, due date, status text);
  CREATE TABLE bench_raw.history (row_id char(26) NOT NULL, version bigint NOT NULL, field_id char(26) NOT NULL, operation varchar(8) NOT NULL,
    value jsonb NOT NULL, mutation_id char(26) NOT NULL, actor_id char(26) NOT NULL, actor_kind varchar(16) NOT NULL,
    actor_name varchar(120) NOT NULL, changed_at timestamptz(3) NOT NULL, PRIMARY KEY (row_id, version, field_id));`;

const FIELD_IDS = FIELDS.map(() => ulid());

async function rawTransaction(pool: pg.Pool, orgId: string, actorId: string): Promise<void> {
  const client = await pool.connect();
  try {
    const [rowId, mutationId, at] = [ulid(), ulid(), new Date().toISOString()];
    await client.query('BEGIN');
    await client.query(
      `INSERT INTO bench_raw.rows (id, created_at, updated_at, name, quantity, price, active, due, status)
      VALUES ($1, $2, $2, $3, $4, $5, $6, $7, $8)`,
      [rowId, at, VALUES.Name, VALUES.Quantity, String(VALUES.Price), VALUES.Active, VALUES.Due, VALUES.Status],
    );
    const cells = Object.values(VALUES);
    await client.query(
      `INSERT INTO bench_raw.history (row_id, version, field_id, operation, value, mutation_id, actor_id, actor_kind, actor_name, changed_at)
      SELECT $1, 1, f, 'create', v, $2, $3, 'user', 'Bench', $4 FROM unnest($5::text[], $6::jsonb[]) AS c(f, v)`,
      [rowId, mutationId, actorId, at, FIELD_IDS, cells.map((value) => JSON.stringify(value))],
    );
    await client.query(
      `INSERT INTO activity_events (id, org_id, occurred_at, category, event, summary, actor_id, actor_kind, actor_name, row_id, affected_rows, mutation_id)
      VALUES ($1, $2, $3, 'records', 'records.changed', 'Created 1 row', $4, 'user', 'Bench', $5, 1, $6)`,
      [ulid(), orgId, at, actorId, rowId, mutationId],
    );
    await client.query(
      `INSERT INTO idempotency_records (actor_key, key, slot, operation, fingerprint, outcome, expires_at)
      VALUES ($1, $2, $3, 'createRow', $4, $5, now() + interval '24 hours')`,
      [
        `user:${actorId}`,
        randomUUID(),
        randomBytes(8).readBigInt64BE(0).toString(),
        'f'.repeat(64),
        JSON.stringify({ ok: true, data: { rowId } }),
      ],
    );
    await client.query('COMMIT');
  } finally {
    client.release();
  }
}

async function rawCreates(servers: Servers, amount: number): Promise<Figures> {
  const pool = new pg.Pool({ connectionString: servers.databaseUrl, max: CONCURRENCY });
  const { orgId, userId: actorId } = servers;
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < amount) {
        next += 1;
        const begin = performance.now();
        await rawTransaction(pool, orgId, actorId);
        latencies.push(performance.now() - begin);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  await pool.end();
  latencies.sort((a, b) => a - b);
  const at = (q: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!);
  return {
    name: 'raw pg transaction',
    requests: amount,
    rps: amount / seconds,
    p50: at(0.5),
    p99: at(0.99),
    errors: 0,
  };
}

const line = (f: Figures) =>
  `${f.name.padEnd(24)} ${f.rps.toFixed(0).padStart(6)} rows/s   p50 ${f.p50} ms   p99 ${f.p99} ms   errors ${f.errors}`;

const servers = await startServers();
try {
  await withClient(servers.databaseUrl, (client) => client.query(RAW_SCHEMA));
  const table = await createBenchTable(servers);
  await restCreates(servers, table.path, table.schemaVersion, WARM_UP_ROWS);
  await rawCreates(servers, WARM_UP_ROWS);
  // Alternating rounds: the two share the machine's 2 cores with PostgreSQL (checkpoints, autovacuum), so a
  // single pair of runs swings widely; the median of the per-round ratios is what we report.
  process.stdout.write(`create row, ${ROUNDS} rounds of ${ROWS} rows each way, concurrency ${CONCURRENCY}\n`);
  const ratios: number[] = [];
  const ceilings: (number | undefined)[] = [];
  for (let round = 1; round <= ROUNDS; round += 1) {
    const rest = await withCpu(servers, () => restCreates(servers, table.path, table.schemaVersion, ROWS));
    const raw = await withCpu(servers, () => rawCreates(servers, ROWS));
    ratios.push(rest.rps / raw.rps);
    ceilings.push(cpuCeiling(rest.cpu, raw.cpu));
    process.stdout.write(
      `round ${round}\n  ${line(rest)}\n    ${cpuLine(rest.cpu)}\n  ${line(raw)}\n    ${cpuLine(raw.cpu)}\n` +
        `  REST / raw ${(rest.rps / raw.rps).toFixed(2)}\n`,
    );
  }
  process.stdout.write(
    `\n${ratioLine('row create', 'REST / raw transaction', ratios, 0.75)}\n${cpuCeilingLine('row create', ceilings)}\n`,
  );
} finally {
  await servers.stop();
}
