import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { ulid } from 'ulid';
import { api, median, startServers, type Servers } from './harness.ts';

/**
 * Row batches (issue 13): batches of 1,000 creates through REST (POST …/rows/batch), one after another, against the
 * same rows written by raw SQL through `pg`: per batch one transaction with a multi-row INSERT of the rows, one of
 * their history (a row per cell), the activity event and the idempotency record. Same machine, same PostgreSQL,
 * same run; the REST and raw runs alternate and the median ratio is reported. Target: REST / raw ≥ 0.5.
 * BENCH_BATCHES (default 100), BENCH_BATCH_SIZE (default 1000) and BENCH_ROUNDS (default 3) shrink it for quick runs.
 */
const BATCHES = Number(process.env.BENCH_BATCHES ?? 100);
const BATCH_SIZE = Number(process.env.BENCH_BATCH_SIZE ?? 1_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

const FIELDS = [
  { name: 'Name', type: 'text', required: true },
  { name: 'Quantity', type: 'integer' },
  { name: 'Price', type: 'number' },
  { name: 'Active', type: 'boolean' },
  { name: 'Due', type: 'date' },
  { name: 'Status', type: 'select', options: { choices: ['open', 'closed'] } },
];
const VALUES = { Name: 'Widget', Quantity: 3, Price: 19.99, Active: true, Due: '2026-12-01', Status: 'open' };

interface Result {
  seconds: number;
  rows: number;
}
const rate = (result: Result) => result.rows / result.seconds;

async function createBenchTable(servers: Servers): Promise<{ path: string; schemaVersion: number }> {
  const { orgId } = servers;
  const database = await api(servers, 'POST', `/v1/orgs/${orgId}/databases`, { name: `Batch bench ${Date.now()}` });
  const table = await api(servers, 'POST', `/v1/orgs/${orgId}/databases/${database.id}/tables`, {
    name: 'Orders',
    fields: FIELDS,
  });
  return {
    path: `/v1/orgs/${orgId}/databases/${database.id}/tables/${table.id}/rows/batch`,
    schemaVersion: table.schemaVersion,
  };
}

async function restBatches(
  servers: Servers,
  table: { path: string; schemaVersion: number },
  batches: number,
): Promise<Result> {
  const body = JSON.stringify({
    expectedSchemaVersion: table.schemaVersion,
    operations: Array.from({ length: BATCH_SIZE }, () => ({ op: 'create', values: VALUES })),
  });
  const started = performance.now();
  for (let batch = 0; batch < batches; batch += 1) {
    const response = await fetch(`http://127.0.0.1:${servers.servicePort}${table.path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${servers.apiKey}`,
        'content-type': 'application/json',
        'idempotency-key': randomUUID(),
      },
      body,
    });
    if (response.status !== 200) throw new Error(`batch ${batch}: ${response.status} ${await response.text()}`);
    await response.arrayBuffer();
  }
  return { seconds: (performance.now() - started) / 1000, rows: batches * BATCH_SIZE };
}

/** The baseline's tables: the same columns and history as the service's physical tables. */
const RAW_SCHEMA = `
  DROP SCHEMA IF EXISTS bench_batch CASCADE;
  CREATE SCHEMA bench_batch;
  CREATE TABLE bench_batch.rows (id char(26) PRIMARY KEY, version bigint NOT NULL DEFAULT 1, created_at timestamptz(3) NOT NULL,
    updated_at timestamptz(3) NOT NULL, name text NOT NULL, quantity bigint, price numeric(15,2), active boolean, due date, status text);
  CREATE TABLE bench_batch.history (row_id char(26) NOT NULL, version bigint NOT NULL, field_id char(26) NOT NULL, operation varchar(8) NOT NULL,
    value jsonb NOT NULL, mutation_id char(26) NOT NULL, actor_id char(26) NOT NULL, actor_kind varchar(16) NOT NULL,
    actor_name varchar(120) NOT NULL, changed_at timestamptz(3) NOT NULL, PRIMARY KEY (row_id, version, field_id));`;

const FIELD_IDS = FIELDS.map(() => ulid());
const CELLS = Object.values(VALUES).map((value) => JSON.stringify(value));

async function rawBatch(client: pg.Client, orgId: string, actorId: string): Promise<void> {
  const ids = Array.from({ length: BATCH_SIZE }, () => ulid());
  const [mutationId, at] = [ulid(), new Date().toISOString()];
  const column = <T>(value: T) => Array<T>(BATCH_SIZE).fill(value);
  await client.query('BEGIN');
  await client.query(
    `INSERT INTO bench_batch.rows (id, created_at, updated_at, name, quantity, price, active, due, status)
    SELECT id, $2, $2, name, quantity, price, active, due, status
      FROM unnest($1::bpchar[], $3::text[], $4::bigint[], $5::numeric[], $6::boolean[], $7::date[], $8::text[]) AS r(id, name, quantity, price, active, due, status)`,
    [
      ids,
      at,
      column(VALUES.Name),
      column(VALUES.Quantity),
      column(String(VALUES.Price)),
      column(VALUES.Active),
      column(VALUES.Due),
      column(VALUES.Status),
    ],
  );
  await client.query(
    `INSERT INTO bench_batch.history (row_id, version, field_id, operation, value, mutation_id, actor_id, actor_kind, actor_name, changed_at)
    SELECT r.id, 1, c.f, 'create', c.v, $2, $3, 'user', 'Bench', $4 FROM unnest($1::bpchar[]) AS r(id) CROSS JOIN unnest($5::text[], $6::jsonb[]) AS c(f, v)`,
    [ids, mutationId, actorId, at, FIELD_IDS, CELLS],
  );
  await client.query(
    `INSERT INTO activity_events (id, org_id, occurred_at, category, event, summary, actor_id, actor_kind, actor_name, affected_rows, mutation_id)
    VALUES ($1, $2, $3, 'records', 'records.changed', 'Created rows', $4, 'user', 'Bench', $5, $6)`,
    [ulid(), orgId, at, actorId, BATCH_SIZE, mutationId],
  );
  await client.query(
    `INSERT INTO idempotency_records (actor_key, key, slot, operation, fingerprint, outcome, expires_at)
    VALUES ($1, $2, $3, 'batchRows', $4, $5, now() + interval '24 hours')`,
    [
      `user:${actorId}`,
      randomUUID(),
      randomBytes(8).readBigInt64BE(0).toString(),
      'f'.repeat(64),
      JSON.stringify({ ok: true, data: { ids } }),
    ],
  );
  await client.query('COMMIT');
}

async function rawBatches(servers: Servers, batches: number): Promise<Result> {
  const client = new pg.Client({ connectionString: servers.databaseUrl });
  await client.connect();
  try {
    const started = performance.now();
    for (let batch = 0; batch < batches; batch += 1) await rawBatch(client, servers.orgId, servers.userId);
    return { seconds: (performance.now() - started) / 1000, rows: batches * BATCH_SIZE };
  } finally {
    await client.end();
  }
}

const line = (name: string, result: Result) =>
  `${name.padEnd(28)} ${rate(result).toFixed(0).padStart(7)} rows/s   ${((result.seconds * 1000) / (result.rows / BATCH_SIZE)).toFixed(1)} ms/batch`;

const servers = await startServers();
try {
  const setup = new pg.Client({ connectionString: servers.databaseUrl });
  await setup.connect();
  await setup.query(RAW_SCHEMA);
  await setup.end();
  const table = await createBenchTable(servers);
  const warmUp = Math.max(1, Math.ceil(BATCHES / 10));
  await restBatches(servers, table, warmUp);
  await rawBatches(servers, warmUp);
  process.stdout.write(
    `row batches: ${ROUNDS} rounds of ${BATCHES} batches × ${BATCH_SIZE} creates each way, one batch at a time\n`,
  );
  const ratios: number[] = [];
  for (let round = 1; round <= ROUNDS; round += 1) {
    const rest = await restBatches(servers, table, BATCHES);
    const raw = await rawBatches(servers, BATCHES);
    ratios.push(rate(rest) / rate(raw));
    process.stdout.write(
      `round ${round}\n  ${line('REST POST …/rows/batch', rest)}\n  ${line('raw pg multi-row INSERT', raw)}\n  REST / raw ${(rate(rest) / rate(raw)).toFixed(2)}\n`,
    );
  }
  process.stdout.write(`\nREST / raw, median of ${ROUNDS}: ${median(ratios).toFixed(2)}  (target ≥ 0.5)\n`);
} finally {
  servers.stop();
}
