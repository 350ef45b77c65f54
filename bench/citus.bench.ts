import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import pg from 'pg';
import { migrate } from '../src/db/migrate.ts';
import { createPrisma, type PrismaClient } from '../src/db/prisma.ts';
import { rowsTableOf } from '../src/data/identifiers.ts';
import { createApp } from '../src/http/app.ts';
import { bootstrapOrg } from '../src/identity/provision.ts';
import { loadConfig } from '../src/kernel/config.ts';
import { createLogger } from '../src/kernel/log.ts';
import { createRows, median } from './harness.ts';

/**
 * The service on a three-node Citus cluster (a coordinator and two workers, ../shared/citus/cluster.sh) against the
 * same service on the machine's plain PostgreSQL, same process, same run, alternating rounds: row create (endpoint
 * 6), a view page (50 rows of a 10,000-row table through a saved filter and sort), and row creates spread over two
 * databases placed on the two different workers. On one machine the cluster cannot be faster: every statement on a
 * workspace table takes an extra hop coordinator → worker, and the three servers share the same cores.
 */
const ROWS = Number(process.env.BENCH_ROWS ?? 600);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = 8;
const PAGE_SECONDS = 5;
const TABLE_ROWS = 10_000;
const PLAIN_URL = process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
const CLUSTER_DIR = process.env.BENCH_CITUS_DIR ?? '/tmp/wds-citus-bench';
const CLUSTER_PORT = Number(process.env.BENCH_CITUS_PORT ?? 56462);
const DATABASE = 'wds_bench_citus';

const FIELDS = [
  { name: 'Name', type: 'text', required: true },
  { name: 'Status', type: 'select', options: { choices: ['open', 'closed', 'waiting', 'done'] } },
  { name: 'Amount', type: 'number' },
];
const VALUES = { Name: 'Widget', Status: 'open', Amount: 19.99 };

interface Target {
  label: string;
  url: string;
  port: number;
  apiKey: string;
  orgId: string;
  prisma: PrismaClient;
  server: Server;
}

interface Table {
  databaseId: string;
  tableId: string;
  path: string;
  schemaVersion: number;
}

function clusterScript(): string {
  const found = [process.env.CITUS_DIR, '../shared/citus', '../../shared/citus']
    .filter((dir): dir is string => Boolean(dir))
    .map((dir) => `${dir}/cluster.sh`)
    .find((file) => existsSync(file));
  if (!found) throw new Error('No ../shared/citus/cluster.sh: this benchmark needs Citus (../shared/citus/build.sh)');
  return found;
}

async function on<T>(url: string, run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

async function plainDatabase(): Promise<string> {
  await on(PLAIN_URL, async (client) => {
    await client.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${DATABASE}`);
  });
  const url = new URL(PLAIN_URL);
  url.pathname = `/${DATABASE}`;
  return url.toString();
}

function citusDatabase(): string {
  const script = clusterScript();
  execFileSync(script, ['start', CLUSTER_DIR, String(CLUSTER_PORT)], { stdio: 'ignore' });
  return execFileSync(script, ['db', CLUSTER_DIR, DATABASE, String(CLUSTER_PORT)], { encoding: 'utf8' }).trim();
}

async function startTarget(label: string, url: string): Promise<Target> {
  await migrate(url);
  const config = loadConfig(
    {},
    { LOG_LEVEL: 'silent', RATE_LIMIT_RPS: '0', CONCURRENCY_LIMIT: '0', ORG_CONCURRENCY_LIMIT: '0', DATABASE_URL: url },
  );
  const prisma = createPrisma(url, config.DATABASE_POOL_SIZE, config.QUERY_TIMEOUT_MS);
  const { orgId, apiKey } = await bootstrapOrg(prisma, {
    orgName: 'Bench',
    email: `bench-${Date.now()}@example.com`,
    name: 'Bench',
  });
  const server = createServer(createApp({ prisma, config, logger: createLogger('silent') }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { label, url, port: (server.address() as AddressInfo).port, apiKey, orgId, prisma, server };
}

async function api(target: Target, method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(`http://127.0.0.1:${target.port}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${target.apiKey}`,
      'content-type': 'application/json',
      'idempotency-key': randomUUID(),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${target.label} ${method} ${path}: ${response.status} ${await response.text()}`);
  return response.json();
}

async function createTable(target: Target): Promise<Table> {
  const database = await api(target, 'POST', `/v1/orgs/${target.orgId}/databases`, { name: `Bench ${randomUUID()}` });
  const table = await api(target, 'POST', `/v1/orgs/${target.orgId}/databases/${database.id}/tables`, {
    name: 'Orders',
    fields: FIELDS,
  });
  return {
    databaseId: database.id,
    tableId: table.id,
    schemaVersion: table.schemaVersion,
    path: `/v1/orgs/${target.orgId}/databases/${database.id}/tables/${table.id}`,
  };
}

/** Row creates at CONCURRENCY, rows per second from the first request to the last response. */
const creates = (target: Target, table: Table, amount: number, connections = CONCURRENCY) =>
  createRows(target, table, VALUES, amount, connections);

async function pages(target: Target, url: string, seconds: number): Promise<number> {
  const result = await autocannon({
    url,
    connections: CONCURRENCY,
    duration: seconds,
    headers: { authorization: `Bearer ${target.apiKey}` },
  });
  if (result.errors + result.non2xx > 0) throw new Error(`${target.label}: ${result.non2xx} non-2xx answers`);
  return result.requests.average;
}

/** A 10,000-row table (loaded by one INSERT … SELECT, as bench/views.bench.ts does) and a view over it. */
async function viewPageUrl(target: Target): Promise<string> {
  const table = await createTable(target);
  const schema = await api(target, 'GET', `${table.path}/schema`);
  const column = (name: string) => `f_${schema.fields.find((field: any) => field.name === name).id.toLowerCase()}`;
  await on(target.url, async (client) => {
    await client.query('SELECT setseed(0.42)');
    await client.query(
      `INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)}
        (id, version, created_at, updated_at, ${['Name', 'Status', 'Amount'].map(column).join(', ')})
       SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), 'Customer ' || g,
              (ARRAY['open', 'closed', 'waiting', 'done'])[1 + floor(random() * 4)::int], round((random() * 1000)::numeric, 2)
         FROM generate_series(1, $1::int) AS g`,
      [TABLE_ROWS],
    );
    await client.query('UPDATE public.data_tables SET row_count = $1 WHERE id = $2', [TABLE_ROWS, table.tableId]);
    await client.query(`VACUUM (ANALYZE) ${rowsTableOf(table.databaseId, table.tableId)}`);
  });
  const view = await api(target, 'POST', `${table.path}/views`, {
    expectedSchemaVersion: table.schemaVersion,
    name: 'Open, Amount ≥ 500',
    visibility: 'shared',
    definition: {
      columnOrder: [],
      columnWidths: {},
      frozenColumns: 0,
      hiddenColumns: [],
      query: {
        where: {
          and: [
            { field: 'Status', op: 'eq', value: 'open' },
            { field: 'Amount', op: 'gte', value: 500 },
          ],
        },
        orderBy: [{ field: 'Amount', direction: 'desc' }],
      },
    },
  });
  return `http://127.0.0.1:${target.port}${table.path}/rows?viewId=${view.id}&limit=50`;
}

async function workerOf(url: string, databaseId: string): Promise<number> {
  return on(url, async (client) => {
    const { rows } = await client.query<{ nodeport: number }>(
      'SELECT DISTINCT nodeport FROM citus_shards WHERE table_name::text LIKE $1',
      [`d_${databaseId.toLowerCase()}.%`],
    );
    return rows[0]!.nodeport;
  });
}

/** Two databases of the cluster on its two workers: moves the second when Citus placed both on one. */
async function spreadOverWorkers(url: string, first: Table, second: Table): Promise<[number, number]> {
  const a = await workerOf(url, first.databaseId);
  const b = await workerOf(url, second.databaseId);
  if (a !== b) return [a, b];
  const other = a === CLUSTER_PORT + 1 ? CLUSTER_PORT + 2 : CLUSTER_PORT + 1;
  await on(url, (client) =>
    client.query(
      `SELECT citus_move_shard_placement(shardid, '127.0.0.1', $1, '127.0.0.1', $2, shard_transfer_mode => 'block_writes')
         FROM citus_shards WHERE table_name::text LIKE $3 LIMIT 1`,
      [b, other, `d_${second.databaseId.toLowerCase()}.%`],
    ),
  );
  return [a, await workerOf(url, second.databaseId)];
}

const plain = await startTarget('plain', await plainDatabase());
const citus = await startTarget('citus', citusDatabase());
const targets = [plain, citus];
const load = () => `load average ${loadavg()[0]!.toFixed(1)}`;

/** The `ratio |` line of bench/harness.ts, without a target: one machine cannot show what more machines would. */
function ratioLine(row: string, quotient: string, ratios: number[]): string {
  return `ratio | ${row} | ${quotient} | median of ${ratios.length}: ${median(ratios).toFixed(2)} | rounds ${ratios
    .map((ratio) => ratio.toFixed(2))
    .join(' ')} | no target (one 2-core machine: the cluster adds a hop)`;
}
try {
  process.stdout.write(`Citus: coordinator + 2 workers on 127.0.0.1:${CLUSTER_PORT}..${CLUSTER_PORT + 2}; ${load()}\n`);
  const summary: string[] = [];

  const tables = new Map<Target, Table>();
  for (const target of targets) {
    tables.set(target, await createTable(target));
    await creates(target, tables.get(target)!, 200);
  }
  const createRatios: number[] = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    const plainRps = await creates(plain, tables.get(plain)!, ROWS);
    const citusRps = await creates(citus, tables.get(citus)!, ROWS);
    process.stdout.write(`create round ${round + 1}: plain ${plainRps.toFixed(0)}/s, citus ${citusRps.toFixed(0)}/s\n`);
    createRatios.push(citusRps / plainRps);
  }
  summary.push(ratioLine('citus row create', 'Citus rows/s ÷ plain PostgreSQL rows/s', createRatios));

  const pageUrls = new Map<Target, string>();
  for (const target of targets) {
    pageUrls.set(target, await viewPageUrl(target));
    await pages(target, pageUrls.get(target)!, 1);
  }
  const pageRatios: number[] = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    const plainRps = await pages(plain, pageUrls.get(plain)!, PAGE_SECONDS);
    const citusRps = await pages(citus, pageUrls.get(citus)!, PAGE_SECONDS);
    process.stdout.write(
      `view page round ${round + 1}: plain ${plainRps.toFixed(0)}/s, citus ${citusRps.toFixed(0)}/s\n`,
    );
    pageRatios.push(citusRps / plainRps);
  }
  summary.push(ratioLine('citus view page', 'Citus pages/s ÷ plain PostgreSQL pages/s', pageRatios));

  const pairs = new Map<Target, [Table, Table]>();
  for (const target of targets) pairs.set(target, [await createTable(target), await createTable(target)]);
  const [first, second] = pairs.get(citus)!;
  const ports = await spreadOverWorkers(citus.url, first, second);
  process.stdout.write(`two databases on workers ${ports.join(' and ')}\n`);
  const spreadRatios: number[] = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    const rates: number[] = [];
    for (const target of targets) {
      const [a, b] = pairs.get(target)!;
      const both = await Promise.all([creates(target, a, ROWS / 2, 4), creates(target, b, ROWS / 2, 4)]);
      rates.push(both[0] + both[1]);
    }
    process.stdout.write(
      `two-database round ${round + 1}: plain ${rates[0]!.toFixed(0)}/s, citus ${rates[1]!.toFixed(0)}/s\n`,
    );
    spreadRatios.push(rates[1]! / rates[0]!);
  }
  summary.push(ratioLine('citus two databases, two workers', 'Citus rows/s ÷ plain PostgreSQL rows/s', spreadRatios));
  process.stdout.write(`\n${summary.join('\n')}\n${load()}\n`);
} finally {
  for (const target of targets) {
    await new Promise((resolve) => target.server.close(resolve));
    await target.prisma.$disconnect();
  }
  execFileSync(clusterScript(), ['stop', CLUSTER_DIR], { stdio: 'ignore' });
}
