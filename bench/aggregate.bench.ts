import { createInterface } from 'node:readline';
import pg from 'pg';
import { aggregateRows } from '../src/data/aggregate.ts';
import { lookupRows } from '../src/data/lookup.ts';
import type { FieldDefinition } from '../src/data/field-types.ts';
import { columnOf, rowsTableOf } from '../src/data/identifiers.ts';
import { cpuLine, withCpu } from './cpu.ts';
import {
  api,
  median,
  ratioLine,
  registerFloor,
  startBeforeServer,
  startServers,
  workerArgs,
  type BuiltServer,
  type Servers,
  spawnChild,
} from './harness.ts';

/**
 * Issue 28, on BENCH_ROWS rows (default 1,000,000) of one table, one request at a time, REST and raw alternating:
 * - `count` + `sum` grouped by a 20-choice select through POST …/rows/aggregate against the same statement
 *   (src/data/aggregate.ts) run through `pg`. Target: REST / raw ≥ 0.8.
 * - search p50 for a word 10 rows hold, through GET …/rows?search=, before and after the table's search index.
 * - lookup of 1,000 keys through POST …/rows/lookup against `SELECT … WHERE (sku) IN (…)` through `pg`.
 *   Target: REST / raw ≥ 0.5.
 * BENCH_ROUNDS (default 3) and BENCH_REQUESTS (default 10 per round and way) shrink it for quick runs. Each side of
 * each round also prints its CPU per request (bench/cpu.ts): the figure that holds on a loaded machine.
 */
const ROWS = Number(process.env.BENCH_ROWS ?? 1_000_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 10);
const CHOICES = Array.from({ length: 20 }, (_item, index) => `C${String(index).padStart(2, '0')}`);
/** One row in RARE_EVERY holds the rare word. */
const RARE_EVERY = Math.max(1, Math.floor(ROWS / 10));

interface BenchTable {
  databaseId: string;
  tableId: string;
  path: string;
  fields: FieldDefinition[];
  ruleId: string;
}

async function startWorker(databaseUrl: string): Promise<{ stop(): Promise<void> }> {
  const env = {
    ...process.env,
    NODE_ENV: process.env.NODE_ENV ?? 'production',
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: 'info',
  };
  const child = spawnChild(process.execPath, workerArgs(), {
    stdio: ['ignore', 'pipe', 'inherit'],
    env,
  });
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.includes('"worker started"')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`bench worker exited (${code})`)));
  });
  return {
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function finished(servers: Servers, accepted: { statusUrl: string }): Promise<any> {
  for (;;) {
    const job = await api(servers, 'GET', accepted.statusUrl);
    if (job.state === 'succeeded') return job;
    if (['failed', 'cancelled'].includes(job.state))
      throw new Error(`job ${job.id} ${job.state}: ${JSON.stringify(job.error)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function createBenchTable(servers: Servers): Promise<BenchTable> {
  const { orgId } = servers;
  const database = await api(servers, 'POST', `/v1/orgs/${orgId}/databases`, { name: `Aggregate bench ${Date.now()}` });
  const created = await api(servers, 'POST', `/v1/orgs/${orgId}/databases/${database.id}/tables`, {
    name: 'Stock',
    fields: [
      { name: 'Sku', type: 'text', required: true, options: { maxLength: 40 } },
      { name: 'Name', type: 'text', options: { maxLength: 200 } },
      { name: 'Category', type: 'select', options: { choices: CHOICES } },
      { name: 'Qty', type: 'integer' },
      { name: 'Price', type: 'number', options: { precision: 15, scale: 2 } },
    ],
  });
  const path = `/v1/orgs/${orgId}/databases/${database.id}/tables/${created.id}`;
  // The rule first, on the empty table: the seed below then fills its index as it goes.
  const rule = await finished(servers, await api(servers, 'POST', `${path}/unique-rules`, { fieldIds: ['Sku'] }));
  const schema = await api(servers, 'GET', `${path}/schema`);
  return { databaseId: database.id, tableId: created.id, path, fields: schema.fields, ruleId: rule.result.ruleId };
}

const columnNamed = (table: BenchTable, name: string) =>
  columnOf(table.fields.find((field) => field.name === name)!.id);

async function loadRows(client: pg.Client, table: BenchTable): Promise<void> {
  const column = (name: string) => columnNamed(table, name);
  await client.query('SELECT setseed(0.28)');
  await client.query(
    `INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)}
      (id, version, created_at, updated_at, ${column('Sku')}, ${column('Name')}, ${column('Category')}, ${column('Qty')}, ${column('Price')})
    SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), 'SKU-' || g,
           CASE WHEN g % $2::int = 0 THEN 'Zéphyrine crème ' || g ELSE 'Article ' || md5(g::text) END,
           ($3::text[])[1 + g % 20], floor(random() * 100)::int, round((random() * 1000)::numeric, 2)
      FROM generate_series(1, $1::int) AS g`,
    [ROWS, RARE_EVERY, CHOICES],
  );
  await client.query('UPDATE public.data_tables SET row_count = $1 WHERE id = $2', [ROWS, table.tableId]);
  await client.query(`VACUUM (ANALYZE) ${rowsTableOf(table.databaseId, table.tableId)}`);
}

async function timed(work: () => Promise<void>, times: number): Promise<number[]> {
  const latencies: number[] = [];
  for (let index = 0; index < times; index += 1) {
    const started = performance.now();
    await work();
    latencies.push(performance.now() - started);
  }
  return latencies;
}

/** `timed`, with the CPU each process spent per request: the API's (or, for raw, this process's) and PostgreSQL's. */
async function timedWithCpu(servers: Servers, pid: number, work: () => Promise<void>, times: number) {
  return withCpu({ pid, databaseUrl: servers.databaseUrl }, async () => {
    const latencies = await timed(work, times);
    return { latencies, requests: latencies.length };
  });
}

async function post(servers: Servers, path: string, body: unknown, port = servers.servicePort): Promise<void> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${servers.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (response.status !== 200) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  await response.arrayBuffer();
}

async function get(servers: Servers, path: string): Promise<any> {
  const response = await fetch(`http://127.0.0.1:${servers.servicePort}${path}`, {
    headers: { authorization: `Bearer ${servers.apiKey}` },
  });
  if (response.status !== 200) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  return response.json();
}

const ms = (values: number[]) => `${median(values).toFixed(1)} ms`;

/**
 * REST (`rest` given the API's port) against raw, alternating; with BENCH_BEFORE also REST on the other checkout's
 * built server, and the service CPU per request of this checkout over that one's.
 */
async function compare(
  label: string,
  rest: (port: number) => Promise<void>,
  raw: () => Promise<void>,
  target: number,
  quotient: string,
): Promise<void> {
  await rest(servers.servicePort);
  if (before) await rest(before.port);
  await raw();
  const ratios: number[] = [];
  const cpuQuotients: number[] = [];
  for (let round = 1; round <= ROUNDS; round += 1) {
    const restSide = await timedWithCpu(servers, servers.pid, () => rest(servers.servicePort), REQUESTS);
    const rawSide = await timedWithCpu(servers, process.pid, raw, REQUESTS);
    ratios.push(median(rawSide.latencies) / median(restSide.latencies));
    process.stdout.write(
      `  round ${round}: REST p50 ${ms(restSide.latencies)} (${cpuLine(restSide.cpu)}), ` +
        `raw pg p50 ${ms(rawSide.latencies)} (${cpuLine(rawSide.cpu)})\n`,
    );
    if (!before) continue;
    const earlier = await timedWithCpu(servers, before.pid, () => rest(before!.port), REQUESTS);
    cpuQuotients.push((restSide.cpu?.service ?? NaN) / (earlier.cpu?.service ?? NaN));
    process.stdout.write(`           REST before p50 ${ms(earlier.latencies)} (${cpuLine(earlier.cpu)})\n`);
  }
  process.stdout.write(`${ratioLine(label, quotient, ratios, target)}\n`);
  if (before)
    process.stdout.write(
      `cpu | ${label} | service CPU per request, this checkout / BENCH_BEFORE | median of ${cpuQuotients.length}: ` +
        `${median(cpuQuotients).toFixed(2)} | rounds ${cpuQuotients.map((value) => value.toFixed(2)).join(' ')}\n`,
    );
}

/**
 * The floor under the lookup row: a bare node:http server (bench/servers.ts) running the service's own lookup
 * statement and joining the rows' texts, with nothing of the service around it (no credential, GraphQL, key order
 * or compression): what no Node service on this machine can beat, against the same raw `IN`.
 */
async function lookupFloor(table: BenchTable, keys: string[]): Promise<void> {
  const sku = table.fields.find((field) => field.name === 'Sku')!;
  const rule = { ruleId: table.ruleId, fields: [sku], enforcement: 'btree' as const };
  const url = await registerFloor(
    servers,
    'lookup',
    lookupRows(
      table,
      rule,
      keys.map((key) => [key]),
      table.fields,
    ),
  );
  const raw = `SELECT * FROM ${rowsTableOf(table.databaseId, table.tableId)} WHERE (${columnOf(sku.id)}) IN (${keys.map((_key, index) => `($${index + 1})`).join(', ')})`;
  const floorGet = async () => {
    const response = await fetch(url);
    if (response.status !== 200) throw new Error(`lookup floor: ${response.status} ${await response.text()}`);
    await response.arrayBuffer();
  };
  await floorGet();
  const quotients: number[] = [];
  for (let round = 1; round <= ROUNDS; round += 1) {
    const floor = await timedWithCpu(servers, servers.floorPid, floorGet, REQUESTS);
    const rawSide = await timedWithCpu(
      servers,
      process.pid,
      async () => void (await client.query(raw, keys)),
      REQUESTS,
    );
    quotients.push(median(rawSide.latencies) / median(floor.latencies));
    process.stdout.write(
      `  round ${round}: floor p50 ${ms(floor.latencies)} (${cpuLine(floor.cpu)}), raw pg p50 ${ms(rawSide.latencies)}\n`,
    );
  }
  process.stdout.write(
    `floor | lookup 1,000 keys | bare node:http + pg, same statement, no service / raw pg | median of ${quotients.length}: ` +
      `${median(quotients).toFixed(2)} | rounds ${quotients.map((value) => value.toFixed(2)).join(' ')}\n`,
  );
}

const servers = await startServers();
let worker: { stop(): Promise<void> } | undefined;
let before: BuiltServer | undefined;
const client = new pg.Client({ connectionString: servers.databaseUrl });
try {
  worker = await startWorker(servers.databaseUrl);
  await client.connect();
  const table = await createBenchTable(servers);
  before = await startBeforeServer(servers);
  const seeded = performance.now();
  await loadRows(client, table);
  process.stdout.write(
    `aggregates, search, lookup on ${ROWS} rows (seeded in ${((performance.now() - seeded) / 1000).toFixed(1)} s); ` +
      `${ROUNDS} rounds of ${REQUESTS} requests each way, one at a time\n`,
  );

  const category = table.fields.find((field) => field.name === 'Category')!;
  const qty = table.fields.find((field) => field.name === 'Qty')!;
  const statement = aggregateRows(table, {
    filter: null,
    groups: [{ field: category, granularity: null, timeZone: 'UTC' }],
    aggregates: [
      { fn: 'count', field: null, fraction: null },
      { fn: 'sum', field: qty, fraction: null },
    ],
    having: null,
    orderBy: [],
    limit: 100,
    offset: 0,
  });
  process.stdout.write('count + sum grouped by a 20-choice select\n');
  await compare(
    'aggregate count+sum by select',
    (port) =>
      post(
        servers,
        `${table.path}/rows/aggregate`,
        {
          groupBy: ['Category'],
          aggregates: [
            { fn: 'count', as: 'n' },
            { fn: 'sum', fieldId: 'Qty', as: 'qty' },
          ],
        },
        port,
      ),
    async () => {
      await client.query(statement.sql, statement.params);
    },
    0.8,
    'REST / raw pg',
  );

  const keys = Array.from({ length: 1000 }, (_item, index) => `SKU-${1 + Math.floor((index * ROWS) / 1000)}`);
  process.stdout.write('lookup of 1,000 keys\n');
  await compare(
    'lookup 1,000 keys',
    (port) =>
      post(servers, `${table.path}/rows/lookup`, { ruleId: table.ruleId, keys: keys.map((key) => [key]) }, port),
    async () => {
      await client.query(
        `SELECT * FROM ${rowsTableOf(table.databaseId, table.tableId)} WHERE (${columnNamed(table, 'Sku')}) IN (${keys.map((_key, index) => `($${index + 1})`).join(', ')})`,
        keys,
      );
    },
    0.5,
    'REST / raw pg',
  );

  await lookupFloor(table, keys);

  const searchPath = `${table.path}/rows?search=${encodeURIComponent('zephyrine')}&limit=50`;
  const found = (await get(servers, searchPath)).data.length;
  const unindexed = await timed(async () => void (await get(servers, searchPath)), Math.max(3, Math.min(REQUESTS, 5)));
  const building = performance.now();
  const { schemaVersion } = await api(servers, 'GET', `${table.path}/schema`);
  const applied = await api(servers, 'POST', `${table.path}/schema/operations`, {
    expectedSchemaVersion: schemaVersion,
    change: { kind: 'add_index', using: 'search' },
  });
  await finished(servers, applied);
  const built = (performance.now() - building) / 1000;
  await get(servers, searchPath);
  const indexed = await timed(async () => void (await get(servers, searchPath)), REQUESTS);
  process.stdout.write(
    `search for a word ${found} rows hold: p50 ${ms(unindexed)} without its index, ${ms(indexed)} with it ` +
      `(built online in ${built.toFixed(1)} s)\n`,
  );
  process.stdout.write(
    `ratio | search p50 | without index / with index | median of 1: ${(median(unindexed) / median(indexed)).toFixed(1)} | rounds - | target - \n`,
  );
} finally {
  await client.end().catch(() => undefined);
  await worker?.stop();
  await before?.stop();
  await servers.stop();
}
