import autocannon from 'autocannon';
import { api, median, startServers, type Figures, type Servers } from './harness.ts';

/**
 * A 100-row page of a 6-field table two ways, same run, concurrency 4: REST `GET …/rows?limit=100` and the same
 * `rows` query POSTed to /graphql. It measures what executing a GraphQL document costs on the widest common answer
 * (~700 resolved fields), e.g. graphql-js against a compiled executor (docs/decisions/graphql-execution.md).
 * BENCH_SECONDS (default 5) per measurement, BENCH_ROUNDS (default 3) alternating rounds; medians reported.
 */
const CONNECTIONS = 4;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PAGE = 100;

const FIELDS = [
  { name: 'Name', type: 'text', required: true },
  { name: 'Quantity', type: 'integer' },
  { name: 'Price', type: 'number' },
  { name: 'Active', type: 'boolean' },
  { name: 'Due', type: 'date' },
  { name: 'Status', type: 'select', options: { choices: ['open', 'closed'] } },
];

const ROWS_QUERY = `query ListRows($orgId: ID!, $databaseId: ID!, $tableId: ID!, $limit: Int) {
  rows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, limit: $limit) {
    data { id version createdAt updatedAt values } nextCursor hasMore
  }
}`;

interface Table {
  orgId: string;
  databaseId: string;
  tableId: string;
  path: string;
}

async function createTable(servers: Servers): Promise<Table> {
  const { orgId } = servers;
  const database = await api(servers, 'POST', `/v1/orgs/${orgId}/databases`, { name: `Pages ${Date.now()}` });
  const table = await api(servers, 'POST', `/v1/orgs/${orgId}/databases/${database.id}/tables`, {
    name: 'Orders',
    fields: FIELDS,
  });
  const path = `/v1/orgs/${orgId}/databases/${database.id}/tables/${table.id}/rows`;
  const operations = Array.from({ length: PAGE + 20 }, (_, i) => ({
    op: 'create',
    values: { Name: `Widget ${i}`, Quantity: i, Price: 19.99, Active: i % 2 === 0, Due: '2026-12-01', Status: 'open' },
  }));
  await api(servers, 'POST', `${path}/batch`, { expectedSchemaVersion: table.schemaVersion, operations });
  return { orgId, databaseId: database.id, tableId: table.id, path };
}

async function measure(name: string, options: autocannon.Options, seconds: number): Promise<Figures> {
  const result = await autocannon({ ...options, connections: CONNECTIONS, duration: seconds });
  return {
    name,
    requests: result.requests.total,
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.non2xx,
  };
}

function pages(servers: Servers, table: Table): [string, autocannon.Options][] {
  const headers = { authorization: `Bearer ${servers.apiKey}` };
  const base = `http://127.0.0.1:${servers.servicePort}`;
  const variables = { orgId: table.orgId, databaseId: table.databaseId, tableId: table.tableId, limit: PAGE };
  return [
    ['REST GET …/rows?limit=100', { url: `${base}${table.path}?limit=${PAGE}`, headers }],
    [
      'POST /graphql rows(limit: 100)',
      {
        url: `${base}/graphql`,
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ query: ROWS_QUERY, variables }),
      },
    ],
  ];
}

const servers = await startServers();
try {
  const table = await createTable(servers);
  const targets = pages(servers, table);
  for (const [name, options] of targets) await measure(name, options, 2); // warm-up: V8, pools, caches
  const results = new Map<string, Figures[]>();
  for (let round = 1; round <= ROUNDS; round += 1) {
    for (const [name, options] of targets) {
      const figures = await measure(name, options, SECONDS);
      results.set(name, [...(results.get(name) ?? []), figures]);
      process.stdout.write(
        `round ${round}  ${name.padEnd(32)} ${figures.rps.toFixed(0).padStart(6)} req/s   p50 ${figures.p50} ms   p99 ${figures.p99} ms   errors ${figures.errors}\n`,
      );
    }
  }
  process.stdout.write('\n');
  for (const [name, rounds] of results) {
    process.stdout.write(
      `median ${name.padEnd(32)} ${median(rounds.map((f) => f.rps))
        .toFixed(0)
        .padStart(6)} req/s   p50 ${median(rounds.map((f) => f.p50))} ms\n`,
    );
  }
} finally {
  await servers.stop();
}
