import { createInterface } from 'node:readline';
import autocannon from 'autocannon';
import pg from 'pg';
import type { FieldDefinition } from '../src/data/field-types.ts';
import { columnOf, rowsTableOf, schemaOf, sortIndexOf } from '../src/data/identifiers.ts';
import { createSortIndex } from '../src/data/sort-indexes.ts';
import type { Position, SortKey } from '../src/data/keyset.ts';
import { selectRowPage } from '../src/data/rows.ts';
import type { Statement } from '../src/data/statement.ts';
import { cpuCeiling, cpuCeilingLine, cpuLine, withCpu } from './cpu.ts';
import { api, figures, median, startServers, workerArgs, type Figures, type Servers, spawnChild } from './harness.ts';

/**
 * A shared view sorted by a field nothing indexed (issue 14), on BENCH_ROWS rows (default 1,000,000): page 1 and
 * a deep page (BENCH_DEPTH rows in, default 200,000) through REST `GET …/rows?viewId=…&limit=100` with no index,
 * then with the view's automatic index, then the very statement the service runs over that index (its own
 * `selectRowPage`) straight through `pg`. Same machine, same PostgreSQL, same run; medians of BENCH_ROUNDS rounds.
 * Indexed pages run for BENCH_SECONDS at concurrency 4; unindexed ones are BENCH_SLOW_SAMPLES sequential requests.
 *
 * Order of events: the view is saved while a worker runs, so its automatic index is built by the `updateTable` job
 * (timed); the deep cursor is walked to over that index; then the index is dropped and its row set back to
 * `building` (exactly the state of a view whose index is not ready yet) for the "no index" figures, and rebuilt
 * for the "index" figures. Cursors do not depend on indexes, so one deep cursor serves every phase.
 */
const CONCURRENCY = 4;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const TABLE_ROWS = Number(process.env.BENCH_ROWS ?? 1_000_000);
const DEPTH = Math.min(Number(process.env.BENCH_DEPTH ?? 200_000), Math.floor(TABLE_ROWS / 2));
const PAGE_SIZE = 100;
const SLOW_SAMPLES = Number(process.env.BENCH_SLOW_SAMPLES ?? 5);
const ORDER = [{ field: 'Amount', direction: 'asc' as const }];
// An unindexed page of 1M rows can outlast the request budget (5 s) on a loaded machine; it is what is measured here.
process.env.QUERY_TIMEOUT_MS ??= '0';

interface BenchTable {
  databaseId: string;
  tableId: string;
  schemaVersion: number;
  path: string;
}

async function createBenchTable(servers: Servers): Promise<BenchTable> {
  const { orgId } = servers;
  const database = await api(servers, 'POST', `/v1/orgs/${orgId}/databases`, { name: `Sorted ${Date.now()}` });
  const table = await api(servers, 'POST', `/v1/orgs/${orgId}/databases/${database.id}/tables`, {
    name: 'Orders',
    fields: [
      { name: 'Name', type: 'text', required: true },
      { name: 'Amount', type: 'number' },
      { name: 'Created', type: 'date' },
    ],
  });
  return {
    databaseId: database.id,
    tableId: table.id,
    schemaVersion: table.schemaVersion,
    path: `/v1/orgs/${orgId}/databases/${database.id}/tables/${table.id}`,
  };
}

/** Straight into the physical table (as bench/views.bench.ts): 5% of amounts empty, many repeated values. */
async function loadRows(client: pg.Client, table: BenchTable, fields: FieldDefinition[]): Promise<void> {
  const column = (name: string) => columnOf(fields.find((field) => field.name === name)!.id);
  await client.query('SELECT setseed(0.42)');
  await client.query(
    `INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)} (id, version, created_at, updated_at, ${column('Name')}, ${column('Amount')}, ${column('Created')})
    SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), 'Customer ' || g,
           CASE WHEN random() < 0.05 THEN NULL ELSE round((random() * 10000)::numeric, 2) END, date '2020-01-01' + floor(random() * 2000)::int
      FROM generate_series(1, $1::int) AS g`,
    [TABLE_ROWS],
  );
  await client.query('UPDATE public.data_tables SET row_count = $1 WHERE id = $2', [TABLE_ROWS, table.tableId]);
  await client.query(`VACUUM (ANALYZE) ${rowsTableOf(table.databaseId, table.tableId)}`);
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

async function waitForReadyIndex(servers: Servers, table: BenchTable): Promise<{ id: string }> {
  for (;;) {
    const schema = await api(servers, 'GET', `${table.path}/schema`);
    const index = (schema.indexes as { id: string; state: string }[])[0];
    if (index?.state === 'ready') return index;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function restPages(servers: Servers, url: string, label: string): Promise<Figures> {
  const latencies: number[] = [];
  let errors = 0;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      { url, connections: CONCURRENCY, duration: SECONDS, headers: { authorization: `Bearer ${servers.apiKey}` } },
      (error, finished) => (error ? reject(error) : resolve(finished)),
    );
    instance.on('response', (_client, status, _bytes, time) => {
      if (status === 200) latencies.push(time);
      else errors += 1;
    });
  });
  return figures(label, latencies, result.duration, errors + result.errors);
}

/**
 * Without an index a page takes seconds: a time-boxed run at concurrency 4 would finish few or none, so these are
 * SLOW_SAMPLES requests one after another (each alone on PostgreSQL, the fairest figure for "before").
 */
async function slowPages(servers: Servers, url: string, label: string): Promise<Figures> {
  const latencies: number[] = [];
  let errors = 0;
  const started = performance.now();
  for (let sample = 0; sample < SLOW_SAMPLES; sample += 1) {
    const begin = performance.now();
    const response = await fetch(url, { headers: { authorization: `Bearer ${servers.apiKey}` } });
    await response.arrayBuffer();
    if (response.status === 200) latencies.push(performance.now() - begin);
    else errors += 1;
  }
  return figures(label, latencies, (performance.now() - started) / 1000, errors);
}

async function rawPages(pool: pg.Pool, statement: Statement, name: string, label: string): Promise<Figures> {
  const latencies: number[] = [];
  const started = performance.now();
  const deadline = started + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < deadline) {
        const begin = performance.now();
        await pool.query({ name, text: statement.sql, values: statement.params });
        latencies.push(performance.now() - begin);
      }
    }),
  );
  return figures(label, latencies, (performance.now() - started) / 1000, 0);
}

/** Sets the index's catalog state as the service sees it (index_version moves, so cached definitions are re-read). */
async function markIndex(
  pool: pg.Pool,
  table: BenchTable,
  indexId: string,
  state: 'building' | 'ready',
): Promise<void> {
  await pool.query('UPDATE table_indexes SET state = $2 WHERE id = $1', [indexId, state]);
  await pool.query('UPDATE data_tables SET index_version = index_version + 1 WHERE id = $1', [table.tableId]);
}

const ms = (value: number) => value.toFixed(1);
const line = (f: Figures) =>
  `${f.name.padEnd(30)} ${f.rps.toFixed(1).padStart(7)} req/s   p50 ${ms(f.p50).padStart(7)} ms   p99 ${ms(f.p99).padStart(7)} ms   errors ${f.errors}`;

const servers = await startServers();
const pool = new pg.Pool({ connectionString: servers.databaseUrl, max: CONCURRENCY });
let worker: { stop(): Promise<void> } | undefined;
try {
  const table = await createBenchTable(servers);
  const { rows: fields } = await pool.query<FieldDefinition>(
    'SELECT id, name, type, required, options, position FROM fields WHERE table_id = $1 ORDER BY position',
    [table.tableId],
  );
  const loader = new pg.Client({ connectionString: servers.databaseUrl });
  await loader.connect();
  const loadStarted = performance.now();
  await loadRows(loader, table, fields);
  await loader.end();
  process.stdout.write(`loaded ${TABLE_ROWS} rows in ${((performance.now() - loadStarted) / 1000).toFixed(1)} s\n`);

  worker = await startWorker(servers.databaseUrl);
  const saveStarted = performance.now();
  const view = await api(servers, 'POST', `${table.path}/views`, {
    expectedSchemaVersion: table.schemaVersion,
    name: 'By amount',
    visibility: 'shared',
    definition: { columnOrder: [], columnWidths: {}, frozenColumns: 0, hiddenColumns: [], query: { orderBy: ORDER } },
  });
  const saved = performance.now() - saveStarted;
  const index = await waitForReadyIndex(servers, table);
  process.stdout.write(
    `view saved in ${ms(saved)} ms; its automatic index was ready ${((performance.now() - saveStarted) / 1000).toFixed(1)} s after the save\n`,
  );
  await worker.stop();
  worker = undefined;

  const base = `http://127.0.0.1:${servers.servicePort}${table.path}/rows?viewId=${view.id}&limit=${PAGE_SIZE}`;
  let cursor = '';
  let last: { id: string; values: Record<string, unknown> } | undefined;
  for (let read = 0; read < DEPTH; read += PAGE_SIZE) {
    const page = (await (
      await fetch(`${base}${cursor ? `&cursor=${cursor}` : ''}`, {
        headers: { authorization: `Bearer ${servers.apiKey}` },
      })
    ).json()) as { data: { id: string; values: Record<string, unknown> }[]; nextCursor: string };
    cursor = page.nextCursor;
    last = page.data.at(-1);
  }
  const amount = fields.find((field) => field.name === 'Amount')!;
  const keys: SortKey[] = [{ field: amount, direction: 'asc' }];
  const value = last!.values[amount.id];
  const position: Position = { values: [value === null ? null : String(value)], rowId: last!.id };
  const physical = { databaseId: table.databaseId, tableId: table.tableId, fields };
  const pages = [
    {
      label: 'page 1',
      url: base,
      statement: selectRowPage(physical, { filter: null, keys, after: null, limit: PAGE_SIZE, indexed: true }),
    },
    {
      label: `page after ${DEPTH} rows`,
      url: `${base}&cursor=${cursor}`,
      statement: selectRowPage(physical, { filter: null, keys, after: position, limit: PAGE_SIZE, indexed: true }),
    },
  ];
  process.stdout.write(
    `view "Amount asc" (5% empty), limit ${PAGE_SIZE}; ${ROUNDS} rounds of ${SECONDS} s per figure, concurrency ${CONCURRENCY}\n`,
  );

  const summary: string[] = [];
  const results = pages.map(() => ({
    before: [] as number[],
    after: [] as number[],
    raw: [] as number[],
    afterRps: [] as number[],
    rawRps: [] as number[],
    ceilings: [] as (number | undefined)[],
  }));
  for (let round = 1; round <= ROUNDS; round += 1) {
    process.stdout.write(`round ${round}\n`);
    await markIndex(pool, table, index.id, 'building');
    await pool.query(`DROP INDEX ${schemaOf(table.databaseId)}.${sortIndexOf(index.id)}`);
    for (const [at, page] of pages.entries()) {
      const before = await slowPages(servers, page.url, `REST ${page.label}, no index`);
      results[at]!.before.push(before.p50);
      process.stdout.write(`  ${line(before)}\n`);
    }
    await pool.query(
      createSortIndex(table.databaseId, table.tableId, index.id, [{ fieldId: amount.id, direction: 'asc' }]).sql,
    );
    await markIndex(pool, table, index.id, 'ready');
    for (const [at, page] of pages.entries()) {
      const after = await withCpu(servers, () => restPages(servers, page.url, `REST ${page.label}, index`));
      const raw = await withCpu(servers, () =>
        rawPages(pool, page.statement, `bench_sorted_${at}`, `raw pg ${page.label}, index`),
      );
      results[at]!.ceilings.push(cpuCeiling(after.cpu, raw.cpu));
      results[at]!.after.push(after.p50);
      results[at]!.raw.push(raw.p50);
      results[at]!.afterRps.push(after.rps);
      results[at]!.rawRps.push(raw.rps);
      process.stdout.write(`  ${line(after)}\n    ${cpuLine(after.cpu)}\n  ${line(raw)}\n    ${cpuLine(raw.cpu)}\n`);
    }
  }
  for (const [at, page] of pages.entries()) {
    const r = results[at]!;
    const [before, after, raw] = [median(r.before), median(r.after), median(r.raw)];
    summary.push(
      `  ${page.label.padEnd(22)} p50 no index ${ms(before).padStart(7)} ms   index ${ms(after).padStart(6)} ms   raw ${ms(raw).padStart(6)} ms` +
        `   speed-up ${(before / after).toFixed(0)}×   raw p50 / REST p50 ${(raw / after).toFixed(2)}   REST / raw req/s ${median(r.afterRps.map((rps, i) => rps / r.rawRps[i]!)).toFixed(2)}`,
    );
  }
  process.stdout.write(
    `\nmedians of ${ROUNDS} rounds\n${summary.join('\n')}\n` +
      `${pages.map((page, at) => cpuCeilingLine(`sorted view with its index, ${page.label}`, results[at]!.ceilings)).join('\n')}\n`,
  );
} finally {
  await worker?.stop();
  await pool.end();
  servers.stop();
}
