import autocannon from 'autocannon';
import pg from 'pg';
import { resolveField, type FilterExpression, type OrderByItem } from '../src/data/filter.ts';
import { compileFilter } from '../src/data/filter-sql.ts';
import type { FieldDefinition } from '../src/data/field-types.ts';
import { columnOf, rowsTableOf } from '../src/data/identifiers.ts';
import type { SortKey } from '../src/data/keyset.ts';
import { selectRowPage } from '../src/data/rows.ts';
import type { Params, Statement } from '../src/data/statement.ts';
import { cpuCeiling, cpuCeilingLine, cpuLine, withCpu } from './cpu.ts';
import { api, figures, median, ratioLine, registerFloor, startServers, type Figures, type Servers } from './harness.ts';

/**
 * List 100 rows through a shared view with a 3-clause filter on a 1,000,000-row table (issue 4): REST
 * `GET …/rows?viewId=…&limit=100` at concurrency 4 for a fixed time, against the very statement the service runs
 * for that page (built with the service's own `selectRowPage` + `compileFilter`) executed straight through `pg`.
 * Same machine, same PostgreSQL, same run.
 *
 * Two views, because without indexes on the user's columns their cost differs by orders of magnitude:
 * - "id order": the view has no orderBy, so the page is in row id order (every order ends with the id). PostgreSQL
 *   walks the primary key and stops after 101 matches, ~1,600 rows at this filter's ~6% selectivity.
 * - "Amount desc": a realistic sorted view. Nothing indexes Amount, so every page scans and filters all 1M rows and
 *   keeps the top 101 of ~62,500 matches. This is what a user's sorted view costs until they can add indexes.
 * The SQL side does identical work in both cases; the ratio shows what the service adds on top (auth, table and view
 * lookups, cursor, JSON), and the absolute p50/p99 show what PostgreSQL itself costs. The raw side reads the rows
 * as text columns (what a hand-written client would); the service asks for each row as one JSON text (`json`),
 * which PostgreSQL evaluates after the sort's LIMIT, so on the unindexed sorted view the service can beat it.
 */
const CONCURRENCY = 4;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const TABLE_ROWS = Number(process.env.BENCH_TABLE_ROWS ?? 1_000_000);
const WARM_UP_SECONDS = 2;
const PAGE_SIZE = 100;

const STATUSES = ['open', 'pending', 'closed', 'archived'];
const FIELDS = [
  { name: 'Name', type: 'text', required: true },
  { name: 'Status', type: 'select', options: { choices: STATUSES } },
  { name: 'Amount', type: 'number' },
  { name: 'Created', type: 'date' },
  { name: 'Active', type: 'boolean' },
];

/** Status 1 in 4, Amount 1 in 2, Active 1 in 2 (see the generator below): about 6% of the rows match. */
const WHERE: FilterExpression = {
  and: [
    { field: 'Status', op: 'eq', value: 'open' },
    { field: 'Amount', op: 'gte', value: 500 },
    { field: 'Active', op: 'eq', value: true },
  ],
};
const VIEWS: { label: string; orderBy: OrderByItem[] }[] = [
  { label: 'id order', orderBy: [] },
  { label: 'Amount desc', orderBy: [{ field: 'Amount', direction: 'desc' }] },
];

interface BenchTable {
  databaseId: string;
  tableId: string;
  schemaVersion: number;
  path: string;
}

async function createBenchTable(servers: Servers): Promise<BenchTable> {
  const { orgId } = servers;
  const database = await api(servers, 'POST', `/v1/orgs/${orgId}/databases`, { name: `Bench ${Date.now()}` });
  const table = await api(servers, 'POST', `/v1/orgs/${orgId}/databases/${database.id}/tables`, {
    name: 'Orders',
    fields: FIELDS,
  });
  return {
    databaseId: database.id,
    tableId: table.id,
    schemaVersion: table.schemaVersion,
    path: `/v1/orgs/${orgId}/databases/${database.id}/tables/${table.id}`,
  };
}

/** The fields as the service's schema loader reads them (src/catalog/table-schema.ts), in position order. */
async function catalogFields(client: pg.Client, tableId: string): Promise<FieldDefinition[]> {
  const { rows } = await client.query<FieldDefinition>(
    'SELECT id, name, type, required, options, position FROM fields WHERE table_id = $1 ORDER BY position',
    [tableId],
  );
  return rows;
}

/**
 * Rows go straight into the physical table in one statement: through the API a million creates (each with its cell
 * history) would take far longer than the benchmark, and reads never look at history. Ids are digits only, valid
 * ULID-alphabet strings in insertion order; setseed makes the data the same on every run.
 */
async function loadRows(client: pg.Client, table: BenchTable, fields: FieldDefinition[]): Promise<void> {
  const column = (name: string) => columnOf(fields.find((field) => field.name === name)!.id);
  await client.query('SELECT setseed(0.42)');
  await client.query(
    `INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)}
      (id, version, created_at, updated_at, ${['Name', 'Status', 'Amount', 'Created', 'Active'].map(column).join(', ')})
    SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), 'Customer ' || g,
           ($2::text[])[1 + floor(random() * 4)::int], round((random() * 1000)::numeric, 2),
           date '2020-01-01' + floor(random() * 2000)::int, random() < 0.5
      FROM generate_series(1, $1::int) AS g`,
    [TABLE_ROWS, STATUSES],
  );
  await client.query('UPDATE public.data_tables SET row_count = $1 WHERE id = $2', [TABLE_ROWS, table.tableId]);
  // VACUUM as well as ANALYZE: sets hint bits and the visibility map now, so the first measured reads do not write.
  await client.query(`VACUUM (ANALYZE) ${rowsTableOf(table.databaseId, table.tableId)}`);
}

/** The statement src/graph/rows/row-pages.ts runs for the first page of this view (no request where/orderBy). */
function viewPageStatement(table: BenchTable, fields: FieldDefinition[], orderBy: OrderByItem[]): Statement {
  const keys: SortKey[] = orderBy.map((item) => ({
    field: resolveField(fields, item.field)!,
    direction: item.direction,
  }));
  const filter = (params: Params) => compileFilter(WHERE, fields, (value, cast) => params.add(value, cast), 'r');
  return selectRowPage(
    { databaseId: table.databaseId, tableId: table.tableId, fields },
    { filter, keys, after: null, limit: PAGE_SIZE },
  );
}

/** autocannon for a fixed time; latencies from its per-response timings so both sides are summarised alike. */
async function restPages(
  servers: Servers,
  url: string,
  seconds: number,
  name = 'REST GET …/rows?viewId',
): Promise<Figures> {
  const latencies: number[] = [];
  let errors = 0;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      { url, connections: CONCURRENCY, duration: seconds, headers: { authorization: `Bearer ${servers.apiKey}` } },
      (error, finished) => (error ? reject(error) : resolve(finished)),
    );
    instance.on('response', (_client, status, _bytes, time) => {
      if (status === 200) latencies.push(time);
      else errors += 1;
    });
  });
  return figures(name, latencies, result.duration, errors + result.errors);
}

/**
 * The baseline: the same statement with nothing but `pg` between us and PostgreSQL. Named, as the service's data
 * plane names its statements (src/db/sql.ts), so both sides plan it the same way.
 */
async function rawPages(pool: pg.Pool, statement: Statement, name: string, seconds: number): Promise<Figures> {
  const latencies: number[] = [];
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < deadline) {
        const begin = performance.now();
        await pool.query({ name, text: statement.sql, values: statement.params });
        latencies.push(performance.now() - begin);
      }
    }),
  );
  return figures('raw pg query', latencies, (performance.now() - started) / 1000, 0);
}

/**
 * The service's own page statement, for the floor server (bench/servers.ts): what a Node process costs with nothing
 * of the service around the statement. Each row's JSON is the service's own (`json`), so PostgreSQL does the
 * service's work, not the raw side's; the floor joins the 101 rows' texts (the 101st tells the service `hasMore`).
 */
function floorStatement(table: BenchTable, fields: FieldDefinition[], orderBy: OrderByItem[]): Statement {
  const keys: SortKey[] = orderBy.map((item) => ({
    field: resolveField(fields, item.field)!,
    direction: item.direction,
  }));
  const filter = (params: Params) => compileFilter(WHERE, fields, (value, cast) => params.add(value, cast), 'r');
  const page = selectRowPage(
    { databaseId: table.databaseId, tableId: table.tableId, fields },
    { filter, keys, after: null, limit: PAGE_SIZE, json: fields },
  );
  return page;
}

/** Guards against benchmarking two different things: the REST page and the raw page hold the same rows in order. */
async function checkSamePage(servers: Servers, url: string, pool: pg.Pool, statement: Statement): Promise<void> {
  const response = await fetch(url, { headers: { authorization: `Bearer ${servers.apiKey}` } });
  const page = (await response.json()) as { data: { id: string }[]; hasMore: boolean };
  const { rows } = await pool.query<{ id: string }>(statement.sql, statement.params);
  const rest = page.data.map((row) => row.id).join();
  const raw = rows
    .slice(0, PAGE_SIZE)
    .map((row) => row.id)
    .join();
  if (response.status !== 200 || page.data.length !== PAGE_SIZE || !page.hasMore || rest !== raw) {
    throw new Error(`REST and raw pages differ (status ${response.status}, ${page.data.length} rows)`);
  }
}

async function planOf(pool: pg.Pool, statement: Statement): Promise<string> {
  const { rows } = await pool.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
    `EXPLAIN (FORMAT JSON) ${statement.sql}`,
    statement.params,
  );
  const names: string[] = [];
  for (let node: PlanNode | undefined = rows[0]!['QUERY PLAN'][0].Plan; node; node = node.Plans?.[0]) {
    names.push(node['Index Name'] ? `${node['Node Type']} (${node['Index Name']})` : node['Node Type']);
  }
  return names.join(' → ');
}
interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

const ms = (value: number) => value.toFixed(1);
const line = (f: Figures) =>
  `${f.name.padEnd(24)} ${f.rps.toFixed(0).padStart(6)} req/s   p50 ${ms(f.p50)} ms   p99 ${ms(f.p99)} ms   errors ${f.errors}`;

const servers = await startServers();
const pool = new pg.Pool({ connectionString: servers.databaseUrl, max: CONCURRENCY });
try {
  const table = await createBenchTable(servers);
  const loader = new pg.Client({ connectionString: servers.databaseUrl });
  await loader.connect();
  const loadStarted = performance.now();
  const fields = await catalogFields(loader, table.tableId);
  await loadRows(loader, table, fields);
  await loader.end();
  process.stdout.write(`loaded ${TABLE_ROWS} rows in ${((performance.now() - loadStarted) / 1000).toFixed(1)} s\n`);

  const summary: string[] = [];
  for (const [index, view] of VIEWS.entries()) {
    const created = await api(servers, 'POST', `${table.path}/views`, {
      expectedSchemaVersion: table.schemaVersion,
      name: `Open, active, Amount ≥ 500 (${view.label})`,
      visibility: 'shared',
      definition: {
        columnOrder: [],
        columnWidths: {},
        frozenColumns: 0,
        hiddenColumns: [],
        query: { where: WHERE, orderBy: view.orderBy },
      },
    });
    const url = `http://127.0.0.1:${servers.servicePort}${table.path}/rows?viewId=${created.id}&limit=${PAGE_SIZE}`;
    const statement = viewPageStatement(table, fields, view.orderBy);
    const name = `bench_view_${index}`;
    await checkSamePage(servers, url, pool, statement);
    process.stdout.write(
      `\nview "${view.label}": where Status = open AND Amount ≥ 500 AND Active, limit ${PAGE_SIZE}\n` +
        `  plan: ${await planOf(pool, statement)}\n`,
    );
    await restPages(servers, url, WARM_UP_SECONDS);
    await rawPages(pool, statement, name, WARM_UP_SECONDS);
    // Alternating rounds: both share the machine's 2 cores with PostgreSQL, so one pair of runs swings widely;
    // the median of the per-round ratios is what we report.
    process.stdout.write(`  ${ROUNDS} rounds of ${SECONDS} s each way, concurrency ${CONCURRENCY}\n`);
    // The floor only for the id-order view: the sorted one is PostgreSQL's own cost until it has an index.
    const floorUrl = view.orderBy.length
      ? null
      : await registerFloor(servers, name, floorStatement(table, fields, view.orderBy));
    if (floorUrl) await restPages(servers, floorUrl, WARM_UP_SECONDS);
    const ratios: number[] = [];
    const ceilings: (number | undefined)[] = [];
    const floors: number[] = [];
    for (let round = 1; round <= ROUNDS; round += 1) {
      const rest = await withCpu(servers, () => restPages(servers, url, SECONDS));
      const raw = await withCpu(servers, () => rawPages(pool, statement, name, SECONDS));
      ratios.push(rest.rps / raw.rps);
      ceilings.push(cpuCeiling(rest.cpu, raw.cpu));
      process.stdout.write(
        `  round ${round}\n    ${line(rest)}\n      ${cpuLine(rest.cpu)}\n    ${line(raw)}\n      ${cpuLine(raw.cpu)}\n` +
          `    REST / raw ${(rest.rps / raw.rps).toFixed(2)}\n`,
      );
      if (floorUrl) {
        const floor = await withCpu(servers, () => restPages(servers, floorUrl, SECONDS, 'floor: node:http + pg'));
        floors.push(floor.rps / raw.rps);
        process.stdout.write(
          `    ${line(floor)}\n      ${cpuLine(floor.cpu)}\n    floor / raw ${(floor.rps / raw.rps).toFixed(2)}\n`,
        );
      }
    }
    // The target is for the id-order view; the sorted one is PostgreSQL's own cost until it has an index.
    const row = `rows through a 3-clause view, ${view.label}`;
    summary.push(ratioLine(row, 'REST / raw', ratios, view.orderBy.length ? 0 : 0.5), cpuCeilingLine(row, ceilings));
    if (floorUrl)
      summary.push(
        `floor | ${row} | bare node:http + pg, same statement, no service / raw | median of ${floors.length}: ${median(floors).toFixed(2)} | rounds ${floors.map((value) => value.toFixed(2)).join(' ')}`,
      );
  }
  process.stdout.write(`\n${summary.join('\n')}\n`);
} finally {
  await pool.end();
  await servers.stop();
}
