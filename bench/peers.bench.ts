import { randomBytes, randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import autocannon from 'autocannon';
import jwt from 'jsonwebtoken';
import pg from 'pg';
import { ulid } from 'ulid';
import type { FilterExpression } from '../src/data/filter.ts';
import { compileFilter } from '../src/data/filter-sql.ts';
import type { FieldDefinition } from '../src/data/field-types.ts';
import { columnOf, rowsTableOf, schemaOf } from '../src/data/identifiers.ts';
import { selectRowPage } from '../src/data/rows.ts';
import type { Params, Statement } from '../src/data/statement.ts';
import { cpuLine, withCpu, type CpuTimes } from './cpu.ts';
import {
  api,
  figures,
  registerFloor,
  median,
  ratioLine,
  startBeforeServer,
  startServers,
  type BuiltServer,
  type Figures,
  type Servers,
  spawnChild,
} from './harness.ts';
import { FIELDS, VALUES } from './items-table.ts';

/**
 * Our service against PostGraphile 5 (bench/peers/postgraphile.ts) on the same physical table, in one alternating
 * run: 100,000 rows, 16 connections.
 * - filtered page: 100 rows where `qty >= <random 0..899> AND active = true`, ordered by id, through our REST, our
 *   /graphql, PostGraphile, and the raw `pg` floor (the service's own page statement, prepared, on a 16-client pool);
 * - keyset page deep in the table: the 100 rows after the 90,000th, by id (REST, PostGraphile, raw);
 * - single-row create: our REST POST …/rows against PostGraphile's `createItem` mutation.
 * Each round runs every target for BENCH_SECONDS (default 10), BENCH_ROUNDS rounds (default 3); medians reported.
 * CPU per request is read from /proc for the serving process (ours or PostGraphile's) and all of PostgreSQL.
 */
const CONNECTIONS = 16;
const TABLE_ROWS = Number(process.env.BENCH_TABLE_ROWS ?? 100_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PAGE = 100;
const DEEP = Math.floor(TABLE_ROWS * 0.9);
const PEER_ROLE = 'wds_bench_peer';
/** BENCH_TARGETS: a comma-separated list of target name prefixes (`page: REST,deep`), e.g. to profile one path. */
const ONLY = process.env.BENCH_TARGETS?.split(',').map((prefix) => prefix.trim());
const chosen = (name: string) => !ONLY || ONLY.some((prefix) => name.startsWith(prefix));

interface BenchTable {
  orgId: string;
  databaseId: string;
  tableId: string;
  path: string;
  schemaVersion: number;
  fields: FieldDefinition[];
}

const threshold = () => Math.floor(Math.random() * 900);
const whereFor = (min: number): FilterExpression => ({
  and: [
    { field: 'Qty', op: 'gte', value: min },
    { field: 'Active', op: 'eq', value: true },
  ],
});

async function createTable(servers: Servers): Promise<BenchTable> {
  const { orgId } = servers;
  const database = await api(servers, 'POST', `/v1/orgs/${orgId}/databases`, { name: `Peers ${Date.now()}` });
  const table = await api(servers, 'POST', `/v1/orgs/${orgId}/databases/${database.id}/tables`, {
    name: 'Items',
    fields: FIELDS,
  });
  const path = `/v1/orgs/${orgId}/databases/${database.id}/tables/${table.id}/rows`;
  const schema = await api(servers, 'GET', `/v1/orgs/${orgId}/databases/${database.id}/tables/${table.id}/schema`);
  return {
    orgId,
    databaseId: database.id,
    tableId: table.id,
    path,
    schemaVersion: table.schemaVersion,
    fields: schema.fields,
  };
}

const columnNamed = (table: BenchTable, name: string) => columnOf(table.fields.find((f) => f.name === name)!.id);

/**
 * 100,000 rows by SQL, then the grants and smart comments PostGraphile reads: the role the JWT names may read and
 * insert, and the table and its columns get readable GraphQL names (`@name`, PostGraphile's documented way).
 */
async function loadRows(client: pg.Client, table: BenchTable): Promise<void> {
  const physical = rowsTableOf(table.databaseId, table.tableId);
  const column = (name: string) => columnNamed(table, name);
  await client.query('SELECT setseed(0.30)');
  await client.query(
    `INSERT INTO ${physical} (id, version, created_at, updated_at, ${FIELDS.map((f) => column(f.name)).join(', ')})
    SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), 'Item ' || g, floor(random() * 1000)::int,
           round((random() * 1000)::numeric, 2), random() < 0.5, date '2020-01-01' + floor(random() * 2000)::int,
           CASE WHEN random() < 0.5 THEN 'open' ELSE 'closed' END
      FROM generate_series(1, $1::int) AS g`,
    [TABLE_ROWS],
  );
  await client.query('UPDATE public.data_tables SET row_count = $1 WHERE id = $2', [TABLE_ROWS, table.tableId]);
  await client.query(`VACUUM (ANALYZE) ${physical}`);
  await client.query(`DO $$ BEGIN
      IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${PEER_ROLE}') THEN CREATE ROLE ${PEER_ROLE} NOLOGIN; END IF;
    END $$`);
  await client.query(`GRANT USAGE ON SCHEMA ${schemaOf(table.databaseId)} TO ${PEER_ROLE}`);
  await client.query(`GRANT SELECT, INSERT ON ${physical} TO ${PEER_ROLE}`);
  await client.query(`COMMENT ON TABLE ${physical} IS '@name item'`);
  for (const field of FIELDS)
    await client.query(`COMMENT ON COLUMN ${physical}.${column(field.name)} IS '@name ${field.name.toLowerCase()}'`);
}

async function startPeer(
  databaseUrl: string,
  table: BenchTable,
  secret: string,
): Promise<{ port: number; pid: number; stop(): Promise<void> }> {
  const child = spawnChild(process.execPath, ['--import', 'tsx', 'bench/peers/postgraphile.ts'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...process.env,
      NODE_ENV: 'production',
      GRAPHILE_ENV: 'production',
      PEER_DATABASE_URL: databaseUrl,
      PEER_SCHEMA: schemaOf(table.databaseId).slice(1, -1),
      PEER_JWT_SECRET: secret,
    },
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`PostGraphile peer exited (${code})`)));
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    port: (JSON.parse(line) as { port: number }).port,
    pid: child.pid!,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

const OUR_PAGE_QUERY = `query Page($orgId: ID!, $databaseId: ID!, $tableId: ID!, $where: JSON, $limit: Int) {
  rows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, where: $where, limit: $limit) {
    data { id version createdAt updatedAt values } nextCursor hasMore
  }
}`;
const ITEM_FIELDS = 'rowId version createdAt updatedAt name qty price active due status';
const PEER_PAGE_QUERY = `query Page($min: BigInt!) {
  allItems(first: ${PAGE}, orderBy: PRIMARY_KEY_ASC, filter: { qty: { greaterThanOrEqualTo: $min }, active: { equalTo: true } }) {
    nodes { ${ITEM_FIELDS} } pageInfo { hasNextPage endCursor }
  }
}`;
const PEER_DEEP_QUERY = `query Deep($after: Cursor) {
  allItems(first: ${PAGE}, after: $after, orderBy: PRIMARY_KEY_ASC) { nodes { ${ITEM_FIELDS} } pageInfo { hasNextPage endCursor } }
}`;
const PEER_CREATE = `mutation Create($item: ItemInput!) { createItem(input: { item: $item }) { item { rowId version } } }`;

interface Target {
  name: string;
  /** The serving process whose CPU is read; undefined for the raw client (its CPU is the client's). */
  pid: number | undefined;
  run(seconds: number): Promise<Figures>;
}

/** autocannon for `seconds`, a fresh request from `next` each time; only 200/201 without GraphQL errors count. */
function httpTarget(
  name: string,
  pid: number,
  url: string,
  next: () => { method: 'GET' | 'POST'; path?: string; body?: string; headers: Record<string, string> },
): Target {
  return {
    name,
    pid,
    run: async (seconds) => {
      const latencies: number[] = [];
      let errors = 0;
      const result = await new Promise<autocannon.Result>((resolve, reject) => {
        const instance = autocannon(
          {
            url,
            connections: CONNECTIONS,
            duration: seconds,
            requests: [{ setupRequest: (request) => ({ ...request, ...next() }) }],
          },
          (error, finished) => (error ? reject(error) : resolve(finished)),
        );
        instance.on('response', (_client, status, _bytes, time) => {
          if (status === 200 || status === 201) latencies.push(time);
          else errors += 1;
        });
      });
      return figures(name, latencies, result.duration, errors + result.errors);
    },
  };
}

/** The raw floor: `statement` on a 16-client `pg` pool, prepared (named), `vary` giving each run's parameters. */
function rawTarget(name: string, pool: pg.Pool, statement: Statement, vary: () => unknown[]): Target {
  return {
    name,
    pid: undefined,
    run: async (seconds) => {
      const latencies: number[] = [];
      const started = performance.now();
      const deadline = started + seconds * 1000;
      await Promise.all(
        Array.from({ length: CONNECTIONS }, async () => {
          while (performance.now() < deadline) {
            const begin = performance.now();
            await pool.query({ name, text: statement.sql, values: vary() });
            latencies.push(performance.now() - begin);
          }
        }),
      );
      return figures(name, latencies, (performance.now() - started) / 1000, 0);
    },
  };
}

/** The service's own filtered-page statement, its threshold parameter's index found by a sentinel value. */
function filteredStatement(table: BenchTable): { statement: Statement; at: number } {
  const sentinel = -7_777_777;
  const filter = (params: Params) =>
    compileFilter(whereFor(sentinel), table.fields, (value, cast) => params.add(value, cast), 'r');
  const statement = selectRowPage(
    { databaseId: table.databaseId, tableId: table.tableId, fields: table.fields },
    { filter, keys: [], after: null, limit: PAGE, json: table.fields },
  );
  const at = statement.params.findIndex((value) => value === sentinel || value === String(sentinel));
  if (at < 0) throw new Error('the threshold parameter was not found in the page statement');
  return { statement, at };
}

function deepStatement(table: BenchTable, afterId: string): Statement {
  return selectRowPage(
    { databaseId: table.databaseId, tableId: table.tableId, fields: table.fields },
    { filter: null, keys: [], after: { values: [], rowId: afterId }, limit: PAGE, json: table.fields },
  );
}

const seededId = (n: number) => `0${String(n).padStart(25, '0')}`;

/** Our cursor after the DEEP-th row, by paging from the start (cursors are sealed; there is no other way in). */
async function ourDeepCursor(servers: Servers, table: BenchTable): Promise<string> {
  let cursor: string | undefined;
  for (let read = 0; read < DEEP; read += PAGE) {
    const page = await api(servers, 'GET', `${table.path}?limit=${PAGE}${cursor ? `&cursor=${cursor}` : ''}`);
    cursor = page.nextCursor;
  }
  return cursor!;
}

async function graphql(url: string, token: string, query: string, variables: object): Promise<any> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await response.json()) as { data?: any; errors?: unknown[] };
  if (response.status !== 200 || body.errors) throw new Error(`${url}: ${response.status} ${JSON.stringify(body)}`);
  return body.data;
}

/** Guards against measuring different things: every side answers the same 100 row ids for one threshold. */
async function checkSameRows(
  servers: Servers,
  table: BenchTable,
  peerUrl: string,
  token: string,
  pool: pg.Pool,
  page: { statement: Statement; at: number },
): Promise<void> {
  const min = 500;
  const where = encodeURIComponent(JSON.stringify(whereFor(min)));
  const rest = (await api(servers, 'GET', `${table.path}?limit=${PAGE}&where=${where}`)).data.map((r: any) => r.id);
  const ours = await graphql(`http://127.0.0.1:${servers.servicePort}/graphql`, servers.apiKey, OUR_PAGE_QUERY, {
    orgId: table.orgId,
    databaseId: table.databaseId,
    tableId: table.tableId,
    where: whereFor(min),
    limit: PAGE,
  });
  const peer = await graphql(peerUrl, token, PEER_PAGE_QUERY, { min: String(min) });
  const params = [...page.statement.params];
  params[page.at] = min;
  const { rows } = await pool.query<{ id: string }>(page.statement.sql, params);
  const lists = [
    rest,
    ours.rows.data.map((r: any) => r.id),
    peer.allItems.nodes.map((r: any) => r.rowId),
    rows.slice(0, PAGE).map((r) => r.id),
  ].map((ids: string[]) => ids.join());
  if (rest.length !== PAGE || new Set(lists).size !== 1) throw new Error('the four sides answer different pages');
}

function targets(
  servers: Servers,
  table: BenchTable,
  peer: { port: number; pid: number },
  token: string,
  pool: pg.Pool,
  deep: { ourCursor: string; peerCursor: string },
  before: BuiltServer | undefined,
  floorUrl: string,
): Target[] {
  const service = `http://127.0.0.1:${servers.servicePort}`;
  const peerUrl = `http://127.0.0.1:${peer.port}/graphql`;
  const ours = { authorization: `Bearer ${servers.apiKey}` };
  const theirs = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const json = { ...ours, 'content-type': 'application/json' };
  const page = filteredStatement(table);
  const deepRaw = deepStatement(table, seededId(DEEP));
  const pageParams = () => {
    const params = [...page.statement.params];
    params[page.at] = threshold();
    return params;
  };
  const restPage = () => ({
    method: 'GET' as const,
    path: `${table.path}?limit=${PAGE}&where=${encodeURIComponent(JSON.stringify(whereFor(threshold())))}`,
    headers: ours,
  });
  const graphqlPage = () => ({
    method: 'POST' as const,
    path: '/graphql',
    headers: json,
    body: JSON.stringify({
      query: OUR_PAGE_QUERY,
      variables: {
        orgId: table.orgId,
        databaseId: table.databaseId,
        tableId: table.tableId,
        where: whereFor(threshold()),
        limit: PAGE,
      },
    }),
  });
  return [
    httpTarget('page: REST', servers.pid, service, restPage),
    httpTarget('page: /graphql', servers.pid, service, graphqlPage),
    ...(before
      ? [
          httpTarget('page: REST, before', before.pid, `http://127.0.0.1:${before.port}`, restPage),
          httpTarget('page: /graphql, before', before.pid, `http://127.0.0.1:${before.port}`, graphqlPage),
        ]
      : []),
    httpTarget('page: PostGraphile', peer.pid, peerUrl, () => ({
      method: 'POST',
      headers: theirs,
      body: JSON.stringify({ query: PEER_PAGE_QUERY, variables: { min: String(threshold()) } }),
    })),
    httpTarget('page: floor', servers.floorPid, floorUrl, () => ({
      method: 'GET',
      path: `${new URL(floorUrl).pathname}?params=${encodeURIComponent(JSON.stringify(pageParams()))}`,
      headers: {},
    })),
    rawTarget('page: raw pg', pool, page.statement, pageParams),
    httpTarget('deep: REST', servers.pid, service, () => ({
      method: 'GET',
      path: `${table.path}?limit=${PAGE}&cursor=${deep.ourCursor}`,
      headers: ours,
    })),
    httpTarget('deep: PostGraphile', peer.pid, peerUrl, () => ({
      method: 'POST',
      headers: theirs,
      body: JSON.stringify({ query: PEER_DEEP_QUERY, variables: { after: deep.peerCursor } }),
    })),
    rawTarget('deep: raw pg', pool, deepRaw, () => deepRaw.params),
    httpTarget('create: REST', servers.pid, service, () => ({
      method: 'POST',
      path: table.path,
      headers: { ...json, 'idempotency-key': randomUUID() },
      body: JSON.stringify({ expectedSchemaVersion: table.schemaVersion, values: VALUES }),
    })),
    httpTarget('create: PostGraphile', peer.pid, peerUrl, () => {
      const at = new Date().toISOString();
      const item = { rowId: ulid(), createdAt: at, updatedAt: at, ...lowerCased(VALUES) };
      return { method: 'POST', headers: theirs, body: JSON.stringify({ query: PEER_CREATE, variables: { item } }) };
    }),
  ];
}

const lowerCased = (values: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(values).map(([key, value]) => [key.toLowerCase(), value]));

const line = (f: Figures & { cpu: CpuTimes | undefined }) =>
  `${f.name.padEnd(22)} ${f.rps.toFixed(0).padStart(6)} req/s   p50 ${f.p50.toFixed(1)} ms   p99 ${f.p99.toFixed(1)} ms` +
  `   errors ${f.errors}   ${cpuLine(f.cpu)}`;

const servers = await startServers();
const client = new pg.Client({ connectionString: servers.databaseUrl });
await client.connect();
const pool = new pg.Pool({ connectionString: servers.databaseUrl, max: CONNECTIONS });
let peer: Awaited<ReturnType<typeof startPeer>> | undefined;
let before: BuiltServer | undefined;
try {
  const table = await createTable(servers);
  await loadRows(client, table);
  const secret = randomBytes(32).toString('hex');
  peer = await startPeer(servers.databaseUrl, table, secret);
  const token = jwt.sign({ role: PEER_ROLE, user_id: servers.userId }, secret, {
    audience: 'postgraphile',
    expiresIn: '2h',
  });
  const peerUrl = `http://127.0.0.1:${peer.port}/graphql`;
  await checkSameRows(servers, table, peerUrl, token, pool, filteredStatement(table));
  const peerDeep = await graphql(
    peerUrl,
    token,
    `{ allItems(first: 1, offset: ${DEEP - 1}, orderBy: PRIMARY_KEY_ASC) { pageInfo { endCursor } } }`,
    {},
  );
  const deep = {
    ourCursor: chosen('deep: REST') ? await ourDeepCursor(servers, table) : '',
    peerCursor: peerDeep.allItems.pageInfo.endCursor,
  };
  before = await startBeforeServer(servers);
  const floorUrl = await registerFloor(servers, 'filtered_page', filteredStatement(table).statement);
  const all = targets(servers, table, peer, token, pool, deep, before, floorUrl).filter((target) =>
    chosen(target.name),
  );
  process.stdout.write(
    `peers: ${TABLE_ROWS} rows, ${CONNECTIONS} connections, ${ROUNDS} alternating rounds of ${SECONDS} s per target; ` +
      `load average ${(await import('node:os'))
        .loadavg()
        .map((v) => v.toFixed(1))
        .join(' ')}\n` +
      'create writes: ours the row, one history entry per cell, the activity event and the idempotency record ' +
      '(one statement); PostGraphile the row (one INSERT in its transaction with SET LOCAL role and claim)\n',
  );
  for (const target of all) await target.run(2); // warm-up: V8, pools, plans
  const results = new Map<string, (Figures & { cpu: CpuTimes | undefined })[]>();
  for (let round = 1; round <= ROUNDS; round += 1) {
    process.stdout.write(`round ${round}\n`);
    for (const target of all) {
      const sources = { pid: target.pid ?? process.pid, databaseUrl: servers.databaseUrl };
      const measured = await withCpu(sources, () => target.run(SECONDS));
      results.set(target.name, [...(results.get(target.name) ?? []), measured]);
      process.stdout.write(`  ${line(measured)}\n`);
    }
  }
  const rps = (name: string) => results.get(name)?.map((f) => f.rps) ?? [];
  const per = (over: string, under: string) => rps(over).map((value, index) => value / rps(under)[index]!);
  const ratio = (row: string, quotient: string, over: string, under: string, target: number) =>
    chosen(over) && chosen(under) ? `${ratioLine(row, quotient, per(over, under), target)}\n` : '';
  // The floor is what no Node service on this machine can beat: informational lines, not issue targets.
  const floor = (quotient: string, over: string, under: string) => {
    if (!chosen(over) || !chosen(under)) return '';
    const quotients = per(over, under);
    return `floor | filtered page | ${quotient} | median of ${quotients.length}: ${median(quotients).toFixed(2)} | rounds ${quotients.map((q) => q.toFixed(2)).join(' ')}\n`;
  };
  process.stdout.write('\nmedians\n');
  for (const [name, rounds] of results) {
    const cpu = (key: keyof CpuTimes) => median(rounds.map((f) => f.cpu?.[key] ?? NaN)).toFixed(2);
    process.stdout.write(
      `  ${name.padEnd(22)} ${median(rps(name)).toFixed(0).padStart(6)} req/s   p50 ${median(rounds.map((f) => f.p50)).toFixed(1)} ms` +
        `   p99 ${median(rounds.map((f) => f.p99)).toFixed(1)} ms   CPU per request: service ${cpu('service')} ms, PostgreSQL ${cpu('postgres')} ms\n`,
    );
  }
  process.stdout.write(
    `\n${ratio('filtered page', 'REST / PostGraphile', 'page: REST', 'page: PostGraphile', 1.2)}` +
      ratio('filtered page', '/graphql / PostGraphile', 'page: /graphql', 'page: PostGraphile', 1.0) +
      ratio('deep keyset page', 'REST / PostGraphile', 'deep: REST', 'deep: PostGraphile', 1.2) +
      ratio('row create', 'REST / PostGraphile createItem', 'create: REST', 'create: PostGraphile', 0.6) +
      ratio('filtered page', 'REST / raw pg', 'page: REST', 'page: raw pg', 0.5) +
      floor('bare node:http + pg, same statement, no service / raw pg', 'page: floor', 'page: raw pg') +
      floor('REST / bare node:http + pg', 'page: REST', 'page: floor'),
  );
  // BENCH_BEFORE: the CPU one request costs this checkout's built server over what it costs the other's, per round.
  for (const name of before ? ['page: REST', 'page: /graphql'] : []) {
    const after = results.get(name) ?? [];
    const earlier = results.get(`${name}, before`) ?? [];
    const quotients = after.map((f, index) => (f.cpu?.service ?? NaN) / (earlier[index]?.cpu?.service ?? NaN));
    if (quotients.length === 0) continue;
    const format = (values: number[]) => values.map((value) => value.toFixed(2)).join(' ');
    process.stdout.write(
      `cpu | ${name} | service CPU per request, this checkout / BENCH_BEFORE | median of ${quotients.length}: ` +
        `${median(quotients).toFixed(2)} | rounds ${format(quotients)}\n`,
    );
  }
} finally {
  await before?.stop();
  await peer?.stop();
  await pool.end();
  await client.end();
  await servers.stop();
}
