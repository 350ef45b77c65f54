import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { rowsTableOf } from '../src/data/identifiers.ts';
import {
  AggregateRowsDocument,
  ExportDatabaseDocument,
  ExportRowsDocument,
  ListRowsDocument,
  LookupRowsDocument,
  SimilarRowsDocument,
} from '../src/generated/documents.ts';
import { schema } from '../src/graph/schema.ts';
import { operationCost } from '../src/graph/server/query-cost.ts';
import { HEAVY_READ_COST, QUERY_LIMITS } from '../src/graph/server/query-limits.ts';
import { createOrg, type TestOrg } from './helpers/factories.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { createSlowTable, holdTable } from './helpers/slow-table.ts';
import type { TestTable } from './helpers/workspace.ts';

/**
 * Issue 48: one request with 15 aliases of a heavy read (an aggregate over 200k rows) ran them all at once and held
 * the pool. Heavy reads now cost HEAVY_READ_COST each (a fifth is over the budget) and one request's heavy reads take
 * turns (one at a time). The reads wait on a lock the test holds on their table (holdTable), so what runs and what
 * waits is seen in pg_stat_activity and in the service's metrics, whatever the machine's load.
 */
const METRICS_TOKEN = 'metrics-token-for-tests-0123456789';

let server: TestServer;
let org: TestOrg;
let table: TestTable;

beforeAll(async () => {
  server = await startTestServer({ METRICS_TOKEN, QUERY_TIMEOUT_MS: '120000', RUN_WORKER: 'false' });
  org = await createOrg(server.prisma);
  table = await createSlowTable(server, org, 100);
}, 60_000);
afterAll(() => server?.close());

const address = () => ({ orgId: table.orgId, databaseId: table.databaseId, tableId: table.tableId });

const HEAVY_FIELDS = {
  aggregateRows:
    'aggregateRows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, input: {aggregates: [{fn: "count", as: "n"}]}) { data { values } }',
  similarRows:
    'similarRows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, input: {fieldId: "Name", value: "customer 7"}) { data { score } }',
  'rows(search)':
    'rows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, search: "customer", limit: 1) { data { id } }',
} as const;

function aliases(field: string, count: number): string {
  const selections = Array.from({ length: count }, (_item, index) => `a${index}: ${field}`).join('\n  ');
  return `query($orgId: ID!, $databaseId: ID!, $tableId: ID!) {\n  ${selections}\n}`;
}

/** The service's statements reading the table that are active now, and how many of them wait for a lock. */
async function statementsOnTable(client: pg.Client): Promise<{ active: number; waiting: number }> {
  const { rows } = await client.query<{ active: number; waiting: number }>(
    `SELECT count(*)::int AS active, count(*) FILTER (WHERE wait_event_type = 'Lock')::int AS waiting
       FROM pg_stat_activity
      WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE $1`,
    [`%${rowsTableOf(table.databaseId, table.tableId)}%`],
  );
  return rows[0]!;
}

/** The service's `graphql_heavy_reads` gauge for one state, from GET /metrics. */
async function heavyReads(state: 'running' | 'waiting'): Promise<number> {
  const answer = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  const line = (await answer.text())
    .split('\n')
    .find((entry) => entry.startsWith(`graphql_heavy_reads{state="${state}"}`));
  return Number(line?.split(' ')[1] ?? Number.NaN);
}

async function withClient<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: server.database.url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

describe('aliased heavy reads in the query cost', () => {
  it.each(Object.keys(HEAVY_FIELDS) as (keyof typeof HEAVY_FIELDS)[])(
    'refuses 15 aliases of %s with 400 QUERY_TOO_COMPLEX, and none of them runs',
    async (name) => {
      const hold = await holdTable(server, table);
      try {
        // Answered while the table is locked: had any alias run, it would be waiting on the lock.
        const response = await server.graphql(aliases(HEAVY_FIELDS[name], 15), address(), { token: org.adminKey });
        expect(response.status, response.text).toBe(400);
        expect(response.body.data).toBeUndefined();
        expect(response.body.errors).toEqual([
          {
            message: expect.stringMatching(/^Query Cost limit of 200000 exceeded, found \d+\.$/),
            extensions: { code: 'QUERY_TOO_COMPLEX', details: { limit: 'maxCost', max: 200_000 } },
          },
        ]);
        expect(await withClient(statementsOnTable)).toEqual({ active: 0, waiting: 0 });
      } finally {
        await hold.release();
      }
    },
  );

  it('refuses a fifth heavy read, and answers four', async () => {
    const five = await server.graphql(aliases(HEAVY_FIELDS.aggregateRows, 5), address(), { token: org.adminKey });
    expect(five.status, five.text).toBe(400);
    expect(five.body.errors[0].extensions).toEqual({
      code: 'QUERY_TOO_COMPLEX',
      details: { limit: 'maxCost', max: 200_000 },
    });
    const four = await server.graphql(aliases(HEAVY_FIELDS.aggregateRows, 4), address(), { token: org.adminKey });
    expect(four.status, four.text).toBe(200);
    expect(Object.values(four.body.data)).toEqual(Array(4).fill({ data: [{ values: { n: 100 } }] }));
  });

  it('keeps ordinary pages at their cost: 15 aliases of a 100-row page, and `search: null`, answer', async () => {
    const page =
      'rows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, limit: 100, search: null) { data { id } }';
    const response = await server.graphql(aliases(page, 15), address(), { token: org.adminKey });
    expect(response.status, response.text).toBe(200);
    expect(response.body.data.a14.data).toHaveLength(100);
  });

  it('prices the REST operations of aggregate, similar, lookup, search, total and export as one heavy read', () => {
    const variables = { ...address(), input: {}, idempotencyKey: 'k' };
    const costs = {
      aggregate: operationCost(schema, AggregateRowsDocument, null, variables),
      similar: operationCost(schema, SimilarRowsDocument, null, variables),
      lookup: operationCost(schema, LookupRowsDocument, null, variables),
      search: operationCost(schema, ListRowsDocument, null, { ...variables, search: 'acme' }),
      total: operationCost(schema, ListRowsDocument, null, { ...variables, includeTotal: true }),
      exportRows: operationCost(schema, ExportRowsDocument, null, variables),
      exportDatabase: operationCost(schema, ExportDatabaseDocument, null, variables),
    };
    for (const [name, cost] of Object.entries(costs)) {
      expect(cost, name).toBeGreaterThanOrEqual(HEAVY_READ_COST);
      expect(cost, name).toBeLessThan(QUERY_LIMITS.maxCost / 4);
    }
    // A page without search or total (REST's `includeTotal` defaults to false) stays priced by what it holds.
    expect(operationCost(schema, ListRowsDocument, null, variables)).toBeLessThan(1_000);
  });
});

/** Three aggregates with their input as a variable: no custom-scalar literal, so graphql-jit runs the document. */
const compiledAggregates = `query($orgId: ID!, $databaseId: ID!, $tableId: ID!, $input: AggregateRowsInput!) {
  ${['a0', 'a1', 'a2'].map((alias) => `${alias}: aggregateRows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, input: $input) { data { values } }`).join('\n  ')}
}`;

describe("one request's heavy reads take turns", () => {
  it.each([
    [
      'a literal input (graphql-js)',
      () => server.graphql(aliases(HEAVY_FIELDS.aggregateRows, 3), address(), { token: org.adminKey }),
    ],
    [
      'the input as a variable (graphql-jit)',
      () =>
        server.graphql(
          compiledAggregates,
          { ...address(), input: { aggregates: [{ fn: 'count', as: 'n' }] } },
          { token: org.adminKey },
        ),
    ],
  ])(
    'runs three aliased aggregates, with %s, one at a time: one statement on the table, two waiting their turn',
    async (_shape, send) => {
      const hold = await holdTable(server, table);
      const answer = send();
      try {
        // Once two wait in the request's queue and one runs, nothing more can start until the lock is released.
        await vi.waitFor(
          async () => {
            expect([await heavyReads('running'), await heavyReads('waiting')]).toEqual([1, 2]);
          },
          { timeout: 30_000, interval: 25 },
        );
        await vi.waitFor(async () => expect((await withClient(statementsOnTable)).waiting).toBe(1), {
          timeout: 30_000,
          interval: 25,
        });
        expect(await withClient(statementsOnTable)).toEqual({ active: 1, waiting: 1 });
      } finally {
        await hold.release();
      }
      const response = await answer;
      expect(response.status, response.text).toBe(200);
      expect(Object.values(response.body.data)).toEqual(Array(3).fill({ data: [{ values: { n: 100 } }] }));
      expect([await heavyReads('running'), await heavyReads('waiting')]).toEqual([0, 0]);
    },
  );
});
