import autocannon from 'autocannon';
import pg from 'pg';
import { selectFeedPage } from '../src/catalog/activity-feed.ts';
import type { Statement } from '../src/data/statement.ts';
import { cpuCeiling, cpuCeilingLine, cpuLine, withCpu } from './cpu.ts';
import { api, figures, median, ratioLine, registerFloor, startServers, type Figures, type Servers } from './harness.ts';

/**
 * The activity feed on an org with 1,000,000 events (issue 7): p50/p99 of a filtered page of 100 through REST
 * `GET /v1/orgs/{orgId}/activity?tableId=…&category=records&limit=100` at concurrency 4 for a fixed time, against
 * the bare index scan a hand-written service would run for that page, through `pg` as a prepared statement: one
 * table, no joins, no formatting. Same machine, same PostgreSQL, same run.
 *
 * The unfiltered first page is measured too, REST against bare. Each scenario prints the plans of the service's
 * statement (built with its own `selectFeedPage`) and of the bare one; for the filtered page the service's statement
 * also runs alone through `pg` once: the gap between it and the bare scan is the SQL's extra work, the gap between
 * it and REST is everything the service does around the query.
 */
const CONCURRENCY = 4;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000_000);
const WARM_UP_SECONDS = 2;
const PAGE_SIZE = 100;

interface Catalog {
  databaseId: string;
  tableIds: [string, string];
}

/** A real database and two real tables, so the events' joins find what a real feed's would. */
async function createCatalog(servers: Servers): Promise<Catalog> {
  const base = `/v1/orgs/${servers.orgId}/databases`;
  const database = await api(servers, 'POST', base, { name: `Bench ${Date.now()}` });
  const fields = [{ name: 'Name', type: 'text', required: true }];
  const orders = await api(servers, 'POST', `${base}/${database.id}/tables`, { name: 'Orders', fields });
  const customers = await api(servers, 'POST', `${base}/${database.id}/tables`, { name: 'Customers', fields });
  return { databaseId: database.id, tableIds: [orders.id, customers.id] };
}

/**
 * The events go straight into activity_events in one statement: through the API a million writes would take far
 * longer than the benchmark. Ids are digits only (valid ULID-alphabet strings below any real ULID); times spread
 * over the past 90 days. 80% are `records.changed` and 20% schema events, split evenly over the two tables, by one
 * of four actors (the bench user and three others). setseed makes the data the same on every run.
 */
async function loadEvents(client: pg.Client, servers: Servers, catalog: Catalog): Promise<void> {
  const actors = [
    { id: servers.userId, kind: 'user', key: servers.apiKey.split('_')[1]!, name: 'Bench' },
    { id: '0ACTQR00000000000000000001', kind: 'user', key: 'aaaaaaaaaaa1', name: 'Ada Lovelace' },
    { id: '0ACTQR00000000000000000002', kind: 'user', key: 'aaaaaaaaaaa2', name: 'Grace Hopper' },
    { id: '0ACTQR00000000000000000003', kind: 'team-key', key: 'aaaaaaaaaaa3', name: 'Nightly sync' },
  ];
  // The secondary indexes are dropped for the load and rebuilt from their own definitions: maintaining five of them
  // row by row, in random time order, took 80 s here; rebuilding all five takes about 20 s and yields the same indexes.
  const { rows: indexes } = await client.query<{
    name: string;
    definition: string;
  }>(`SELECT indexname AS name, indexdef AS definition
      FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'activity_events' AND indexname <> 'activity_events_pkey'`);
  for (const index of indexes) await client.query(`DROP INDEX public."${index.name}"`);
  // Nor are the org foreign key's triggers run per event (another 8 s): every event is of the bench org, which exists.
  await client.query('SET session_replication_role = replica');
  await client.query('SELECT setseed(0.42)');
  await client.query(
    `INSERT INTO activity_events (id, org_id, occurred_at, category, event, status, summary, actor_id, actor_kind,
        actor_key, actor_name, database_id, table_id, row_id, affected_rows, mutation_id)
    SELECT '0' || lpad(g::text, 25, '0'), $2, now() - r.age * interval '90 days',
           CASE WHEN r.kind < 0.8 THEN 'records' ELSE 'schema' END,
           CASE WHEN r.kind < 0.8 THEN 'records.changed'
                ELSE (ARRAY['field.create', 'field.update', 'table.update', 'rule.create', 'fields.reorder'])[1 + floor(r.pick * 5)::int] END,
           'requested',
           CASE WHEN r.kind < 0.8 THEN (ARRAY['Created 1 row', 'Updated 1 row', 'Deleted 1 row'])[1 + floor(r.pick * 3)::int]
                ELSE 'Changed the schema of ' || (ARRAY['Orders', 'Customers'])[r.tab] END,
           ($5::text[])[r.actor], ($6::text[])[r.actor], ($7::text[])[r.actor], ($8::text[])[r.actor],
           $3, ($4::text[])[r.tab],
           CASE WHEN r.kind < 0.8 THEN '1' || lpad((g % 50000)::text, 25, '0') END,
           CASE WHEN r.kind < 0.8 THEN 1 END,
           CASE WHEN r.kind < 0.8 THEN '2' || lpad(g::text, 25, '0') END
      FROM generate_series(1, $1::int) AS g
      -- g in the select list makes the subquery correlated, so its random() draws are made per event, not once.
      CROSS JOIN LATERAL (SELECT g AS n, random() AS age, random() AS kind, random() AS pick,
                                 1 + floor(random() * 2)::int AS tab, 1 + floor(random() * 4)::int AS actor) AS r`,
    [
      EVENTS,
      servers.orgId,
      catalog.databaseId,
      catalog.tableIds,
      actors.map((actor) => actor.id),
      actors.map((actor) => actor.kind),
      actors.map((actor) => actor.key),
      actors.map((actor) => actor.name),
    ],
  );
  await client.query('RESET session_replication_role');
  await client.query(`SET maintenance_work_mem = '256MB'`);
  for (const index of indexes) await client.query(index.definition);
  // VACUUM as well as ANALYZE: sets hint bits and the visibility map now, so the first measured reads do not write.
  await client.query('VACUUM (ANALYZE) activity_events');
  // And a checkpoint, so the load's dirty pages are not written back during the measured rounds.
  await client.query('CHECKPOINT');
}

/** The bare scans: the event columns, one index range, no joins; `now()` as the cutoff. */
const EVENT_COLUMNS = `id, category, occurred_at, summary, event, status, actor_id, actor_key, actor_kind, actor_name,
  database_id, table_id, row_id, affected_rows, job_id, file_name, destination`;
const bareFiltered = (tableId: string): Statement => ({
  sql: `SELECT ${EVENT_COLUMNS} FROM activity_events
         WHERE table_id = $1 AND category = 'records' AND occurred_at <= now()
         ORDER BY occurred_at DESC, id DESC LIMIT ${PAGE_SIZE + 1}`,
  params: [tableId],
});
const bareFirstPage = (orgId: string): Statement => ({
  sql: `SELECT ${EVENT_COLUMNS} FROM activity_events
         WHERE org_id = $1 AND occurred_at <= now()
         ORDER BY occurred_at DESC, id DESC LIMIT ${PAGE_SIZE + 1}`,
  params: [orgId],
});

/**
 * autocannon for a fixed time. Rate from the start to the last response (autocannon's own duration is rounded to
 * its one-second ticks); latencies from its per-response timings so both sides are summarised alike.
 */
async function restPages(
  servers: Servers,
  url: string,
  seconds: number,
  name = 'REST GET …/activity',
): Promise<Figures> {
  const latencies: number[] = [];
  let errors = 0;
  const started = performance.now();
  let lastResponse = started;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    // A page that takes seconds must not time out (autocannon's default is 10 s) and be sent again while the first
    // is still running: that would put more than CONCURRENCY pages in the server at once.
    const instance = autocannon(
      {
        url,
        connections: CONCURRENCY,
        duration: seconds,
        timeout: 60,
        headers: { authorization: `Bearer ${servers.apiKey}` },
      },
      (error, finished) => (error ? reject(error) : resolve(finished)),
    );
    instance.on('response', (_client, status, _bytes, time) => {
      lastResponse = performance.now();
      if (status === 200) latencies.push(time);
      else errors += 1;
    });
  });
  return figures(name, latencies, (lastResponse - started) / 1000, errors + result.errors);
}

/**
 * Waits until no other client backend is running a statement on the bench database. A REST run ends with requests
 * still in the server (abandoned by autocannon, or queued for the data-plane pool); when a page costs seconds, they
 * would otherwise keep PostgreSQL busy during the next side's run.
 */
async function settle(pool: pg.Pool): Promise<void> {
  const deadline = performance.now() + 120_000;
  for (;;) {
    const { rows } = await pool.query<{ busy: number }>(`SELECT count(*)::int AS busy FROM pg_stat_activity
      WHERE datname = current_database() AND backend_type = 'client backend' AND state <> 'idle' AND pid <> pg_backend_pid()`);
    if (rows[0]!.busy === 0) return;
    if (performance.now() > deadline) throw new Error(`${rows[0]!.busy} statements still running after 120 s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** A statement through `pg`, named (prepared once per connection) as the service's data plane names its own. */
async function sqlPages(
  pool: pg.Pool,
  label: string,
  statement: Statement,
  name: string,
  seconds: number,
): Promise<Figures> {
  const latencies: number[] = [];
  const started = performance.now();
  const deadline = started + seconds * 1000;
  let lastResponse = started;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < deadline) {
        const begin = performance.now();
        await pool.query({ name, text: statement.sql, values: statement.params });
        lastResponse = performance.now();
        latencies.push(lastResponse - begin);
      }
    }),
  );
  return figures(label, latencies, (lastResponse - started) / 1000, 0);
}

/** Guards against benchmarking two different things: REST and the bare scan return the same entries in order. */
async function checkSamePage(servers: Servers, url: string, pool: pg.Pool, statement: Statement): Promise<void> {
  const response = await fetch(url, { headers: { authorization: `Bearer ${servers.apiKey}` } });
  const page = (await response.json()) as { data: { id: string }[]; hasMore: boolean };
  const { rows } = await pool.query<{ id: string }>(statement.sql, statement.params);
  const rest = page.data?.map((entry) => entry.id).join();
  const bare = rows
    .slice(0, PAGE_SIZE)
    .map((row) => row.id)
    .join();
  if (response.status !== 200 || page.data.length !== PAGE_SIZE || !page.hasMore || rest !== bare) {
    throw new Error(`REST and bare pages differ (status ${response.status}, ${page.data?.length} entries)`);
  }
}

interface PlanNode {
  'Node Type': string;
  'Join Type'?: string;
  'Index Name'?: string;
  Alias?: string;
  'Relation Name'?: string;
  'Index Cond'?: string;
  Filter?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Actual Total Time'?: number;
  Plans?: PlanNode[];
}

/** One line per plan node, indented; the scan of activity_events with its index condition, filter and rows read. */
function renderPlan(node: PlanNode, depth = 0): string[] {
  const index = node['Index Name'] ? ` using ${node['Index Name']}` : '';
  const relation = node['Relation Name'] ? ` on ${node['Relation Name']}` : '';
  const rows =
    node['Actual Rows'] === undefined
      ? ''
      : `  (rows ${node['Actual Rows']}${node['Actual Loops']! > 1 ? ` × ${node['Actual Loops']} loops` : ''}` +
        `${node['Rows Removed by Filter'] ? `, removed by filter ${node['Rows Removed by Filter']}` : ''})`;
  const type =
    node['Join Type'] && node['Join Type'] !== 'Inner'
      ? `${node['Node Type']} ${node['Join Type']} Join`
      : node['Node Type'];
  const lines = [`${'  '.repeat(depth)}${type}${index}${relation}${rows}`];
  if (node['Relation Name'] === 'activity_events') {
    if (node['Index Cond']) lines.push(`${'  '.repeat(depth + 2)}index cond ${node['Index Cond']}`);
    if (node.Filter) lines.push(`${'  '.repeat(depth + 2)}filter ${node.Filter}`);
  }
  return [...lines, ...(node.Plans ?? []).flatMap((child) => renderPlan(child, depth + 1))];
}

interface Explained {
  lines: string[];
  ms: number;
}

async function explain(client: pg.PoolClient, sql: string, params: unknown[]): Promise<Explained> {
  const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode; 'Execution Time': number }] }>(
    `EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`,
    params,
  );
  const plan = rows[0]!['QUERY PLAN'][0];
  return { lines: renderPlan(plan.Plan), ms: plan['Execution Time'] };
}

/**
 * The plan for these parameter values, and the generic plan PostgreSQL may switch a prepared statement to after five
 * executions (both sides are prepared statements). PostgreSQL 15 has no EXPLAIN (GENERIC_PLAN): PREPARE, force it.
 */
async function plansOf(pool: pg.Pool, statement: Statement): Promise<string> {
  const client = await pool.connect();
  try {
    const custom = await explain(client, statement.sql, statement.params);
    await client.query(`PREPARE bench_plan AS ${statement.sql}`);
    await client.query('SET plan_cache_mode = force_generic_plan');
    const literals = statement.params.map((value) =>
      typeof value === 'number' ? String(value) : client.escapeLiteral(String(value)),
    );
    const generic = await explain(client, `EXECUTE bench_plan(${literals.join(', ')})`, []);
    await client.query('RESET plan_cache_mode; DEALLOCATE bench_plan');
    const same = generic.lines.join('\n') === custom.lines.join('\n');
    const unindexed = [...custom.lines, ...generic.lines].some((line) => /Seq Scan on activity_events/.test(line));
    return [
      `    plan (${custom.ms.toFixed(2)} ms in PostgreSQL):`,
      ...custom.lines.map((line) => `      ${line}`),
      same
        ? `    generic plan: the same (${generic.ms.toFixed(2)} ms)`
        : `    generic plan (${generic.ms.toFixed(2)} ms):`,
      ...(same ? [] : generic.lines.map((line) => `      ${line}`)),
      ...(unindexed ? ['    !! activity_events is read by a sequential scan, not an index range'] : []),
    ].join('\n');
  } finally {
    client.release();
  }
}

const ms = (value: number) => (Number.isNaN(value) ? '–' : value.toFixed(1));
const rate = (value: number) => (value < 10 ? value.toFixed(2) : value.toFixed(0));
const line = (f: Figures) =>
  `${f.name.padEnd(26)} ${rate(f.rps).padStart(6)} req/s   p50 ${ms(f.p50)} ms   p99 ${ms(f.p99)} ms   errors ${f.errors}`;
/** Ratios far below 1 in significant digits, so 0.0012 does not print as 0.00. */
const ratio = (value: number) => (value >= 0.1 ? value.toFixed(2) : value.toPrecision(2));

interface Scenario {
  label: string;
  url: string;
  /** The statement the service runs for this page, built with its own `selectFeedPage`. */
  service: Statement;
  bare: Statement;
  /** Also run `service` through `pg` once, after the rounds (the filtered page only, to keep the run short). */
  diagnose: boolean;
}

/**
 * The service's statement as one body PostgreSQL builds, for the floor server (bench/servers.ts): what a Node
 * process costs with nothing of the service around that statement.
 */
function floorStatement(service: Statement): Statement {
  return {
    sql: `SELECT '{"data":[' || coalesce(string_agg(p.entry::text, ',' ORDER BY p.n), '') || ']}' AS body
            FROM (SELECT row_number() OVER () AS n, q.entry FROM (${service.sql}) q LIMIT ${PAGE_SIZE}) p`,
    params: service.params,
  };
}

const servers = await startServers();
const pool = new pg.Pool({ connectionString: servers.databaseUrl, max: CONCURRENCY });
try {
  const catalog = await createCatalog(servers);
  const loader = new pg.Client({ connectionString: servers.databaseUrl });
  await loader.connect();
  const loadStarted = performance.now();
  await loadEvents(loader, servers, catalog);
  await loader.end();
  process.stdout.write(`loaded ${EVENTS} events in ${((performance.now() - loadStarted) / 1000).toFixed(1)} s\n`);

  const tableId = catalog.tableIds[0];
  const feed = `http://127.0.0.1:${servers.servicePort}/v1/orgs/${servers.orgId}/activity?limit=${PAGE_SIZE}`;
  const asOf = new Date().toISOString();
  const scenarios: Scenario[] = [
    {
      label: 'filtered: tableId + category=records',
      url: `${feed}&tableId=${tableId}&category=records`,
      diagnose: true,
      service: selectFeedPage({ orgId: servers.orgId, tableId, category: 'records' }, asOf, null, PAGE_SIZE),
      bare: bareFiltered(tableId),
    },
    {
      label: 'first page, unfiltered',
      url: feed,
      diagnose: false,
      service: selectFeedPage({ orgId: servers.orgId }, asOf, null, PAGE_SIZE),
      bare: bareFirstPage(servers.orgId),
    },
  ];

  const summary: string[] = [];
  for (const [index, scenario] of scenarios.entries()) {
    await checkSamePage(servers, scenario.url, pool, scenario.bare);
    process.stdout.write(
      `\n${scenario.label}, limit ${PAGE_SIZE}\n` +
        `  service SQL (selectFeedPage)\n${await plansOf(pool, scenario.service)}\n` +
        `  bare SQL\n${await plansOf(pool, scenario.bare)}\n`,
    );
    const floorUrl = await registerFloor(servers, `activity_${index}`, floorStatement(scenario.service));
    const run = async (seconds: number) => ({
      rest: await withCpu(servers, () => restPages(servers, scenario.url, seconds)).finally(() => settle(pool)),
      bare: await withCpu(servers, () =>
        sqlPages(pool, 'bare index scan (pg)', scenario.bare, `bench_bare_${index}`, seconds),
      ),
      floor: await withCpu(servers, () => restPages(servers, floorUrl, seconds, 'floor: node:http + pg')),
    });
    await run(WARM_UP_SECONDS);
    // Alternating rounds: both share the machine's 2 cores with PostgreSQL, so one pair of runs swings widely;
    // the median of the per-round ratios is what we report.
    process.stdout.write(`  ${ROUNDS} rounds of ${SECONDS} s each way, concurrency ${CONCURRENCY}\n`);
    const ratios: number[] = [];
    const ceilings: (number | undefined)[] = [];
    const floors: number[] = [];
    for (let round = 1; round <= ROUNDS; round += 1) {
      const { rest, bare, floor } = await run(SECONDS);
      ratios.push(rest.rps / bare.rps);
      ceilings.push(cpuCeiling(rest.cpu, bare.cpu));
      floors.push(floor.rps / bare.rps);
      process.stdout.write(
        `  round ${round}\n    ${line(rest)}\n      ${cpuLine(rest.cpu)}\n    ${line(bare)}\n      ${cpuLine(bare.cpu)}\n` +
          `    REST / bare ${ratio(rest.rps / bare.rps)}\n    ${line(floor)}\n      ${cpuLine(floor.cpu)}\n    floor / bare ${ratio(floor.rps / bare.rps)}\n`,
      );
    }
    const row = `activity page, ${scenario.label}`;
    summary.push(
      ratioLine(row, 'REST / bare', ratios, 0.5),
      cpuCeilingLine(row, ceilings),
      `floor | ${row} | bare node:http + pg, the service's statement, no service / bare | median of ${floors.length}: ${ratio(median(floors))} | rounds ${floors.map(ratio).join(' ')}`,
    );
    if (scenario.diagnose) {
      // Where the time goes: the service's statement alone, with nothing but `pg` around it. If this is about as
      // fast as REST, the cost is the SQL; if it is about as fast as the bare scan, it is the service around it.
      const alone = await sqlPages(pool, 'service SQL alone (pg)', scenario.service, `bench_service_${index}`, SECONDS);
      process.stdout.write(`  the service's statement through pg, one run of ${SECONDS} s\n    ${line(alone)}\n`);
    }
  }
  process.stdout.write(`\n${summary.join('\n')}\n`);
} finally {
  await pool.end();
  await servers.stop();
}
