import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FILTER_COST_BUDGET, MAX_FILTER_VALUES } from '../src/data/filter-budget.ts';
import { expectError } from './helpers/expectations.ts';
import { createOrg, type TestOrg } from './helpers/factories.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { createSlowTable, slowRowsPath, textSearches } from './helpers/slow-table.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { definitionOf, expectProblems, savedView, viewClient } from './helpers/views.ts';
import { addUniqueRule, createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Issue 18 §1: a statement time budget on every request's queries (503 QUERY_TIMEOUT), and a filter cost and
 * bound-value budget checked before SQL runs — on GET rows, on /graphql rows(where:) and when a view is saved.
 */
const suite = useServerWithOrg();
const { postView } = viewClient(suite);

const ROWS_QUERY = `query Rows($orgId: ID!, $databaseId: ID!, $tableId: ID!, $where: JSON, $viewId: ID) {
  rows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, where: $where, viewId: $viewId, limit: 1) { data { id } }
}`;
const searches = textSearches;
const inLists = (lists: number) => ({
  or: Array.from({ length: lists }, (_list, index) => ({
    field: 'Name',
    op: 'in',
    value: Array.from({ length: 1000 }, (_value, item) => `v${index}-${item}`),
  })),
});

function graphqlRows(server: TestServer, org: TestOrg, table: TestTable, where: unknown) {
  return server.graphql(
    ROWS_QUERY,
    { orgId: table.orgId, databaseId: table.databaseId, tableId: table.tableId, where },
    { token: org.adminKey },
  );
}

describe('filter cost budget', () => {
  let table: TestTable;
  beforeAll(async () => {
    table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
  });

  it('counts iContains as 20: 25 conditions are within the budget, 26 are not (GET rows)', async () => {
    expect(FILTER_COST_BUDGET).toBe(500);
    const within = await suite.server.request(
      'GET',
      `${table.path}/rows?limit=1&where=${encodeURIComponent(JSON.stringify(searches(25)))}`,
      { token: suite.org.adminKey },
    );
    expect(within.status, within.text).toBe(200);
    const over = await suite.server.request(
      'GET',
      `${table.path}/rows?limit=1&where=${encodeURIComponent(JSON.stringify(searches(26)))}`,
      { token: suite.org.adminKey },
    );
    expectProblems(over, [['where']]);
    expect(over.body.error.details.problems[0].message).toMatch(/^costs 520, over the budget of 500 per filter/);
  });

  it("refuses the issue's 120-condition search with 422 before any SQL runs (GET rows)", async () => {
    const response = await suite.server.request(
      'GET',
      `${table.path}/rows?limit=1&where=${encodeURIComponent(JSON.stringify({ and: [searches(60), searches(60)] }))}`,
      { token: suite.org.adminKey },
    );
    expectProblems(response, [['where']]);
  });

  it('refuses an over-budget filter on /graphql rows(where:) with VALIDATION_FAILED', async () => {
    const response = await graphqlRows(suite.server, suite.org, table, searches(26));
    expect(response.status).toBe(200);
    expect(response.body.data).toBeNull();
    expect(response.body.errors).toHaveLength(1);
    expect(response.body.errors[0].extensions).toMatchObject({
      code: 'VALIDATION_FAILED',
      details: { problems: [{ path: ['where'] }] },
    });
  });

  it('refuses a view over the budget at save time, and accepts one at the budget', async () => {
    savedView(await postView(table, { definition: definitionOf({ where: searches(25) }) }));
    const response = await postView(table, { definition: definitionOf({ where: searches(26) }) });
    expectProblems(response, [['definition', 'query', 'where']]);
  });

  it("budgets a view's filter and the request's together when reading through the view", async () => {
    const view = savedView(await postView(table, { definition: definitionOf({ where: searches(20) }) }));
    const path = `${table.path}/rows?limit=1&viewId=${view.id}`;
    expect((await suite.server.request('GET', path, { token: suite.org.adminKey })).status).toBe(200);
    const response = await suite.server.request(
      'GET',
      `${path}&where=${encodeURIComponent(JSON.stringify(searches(6)))}`,
      { token: suite.org.adminKey },
    );
    expectProblems(response, [['where']]);
  });
});

describe('bound values', () => {
  let table: TestTable;
  beforeAll(async () => {
    table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
  });

  it('refuses 70 in-lists of 1,000 values (70,000 parameters, once a 500) on /graphql with 422', async () => {
    expect(MAX_FILTER_VALUES).toBe(10_000);
    const response = await graphqlRows(suite.server, suite.org, table, inLists(70));
    expect(response.body.errors[0].extensions).toMatchObject({
      code: 'VALIDATION_FAILED',
      details: { problems: [{ path: ['where'] }] },
    });
    expect(response.body.errors[0].extensions.details.problems[0].message).toMatch(
      /^binds 70000 values, over the limit of 10000/,
    );
  });

  it('accepts 10 in-lists of 1,000 values and refuses 11', async () => {
    const within = await graphqlRows(suite.server, suite.org, table, inLists(10));
    expect(within.body.errors, JSON.stringify(within.body.errors)).toBeUndefined();
    expect(within.body.data.rows.data).toEqual([]);
    const over = await graphqlRows(suite.server, suite.org, table, inLists(11));
    expect(over.body.errors[0].extensions.code).toBe('VALIDATION_FAILED');
  });

  it('refuses a view binding 70,000 values at save time with 422, and saves nothing', async () => {
    const before = await suite.server.prisma.savedView.count({ where: { tableId: table.tableId } });
    const response = await postView(table, { definition: definitionOf({ where: inLists(70) }) });
    expectProblems(response, [['definition', 'query', 'where']]);
    expect(await suite.server.prisma.savedView.count({ where: { tableId: table.tableId } })).toBe(before);
  });
});

/**
 * The statement budget, on a server whose request budget is 300 ms and a 200,000-row table scanned by 25 iContains
 * conditions (within the cost budget; several seconds of work), so the budget, not the filter check, stops it.
 */
describe('statement budget', () => {
  let server: TestServer;
  let org: TestOrg;
  let table: TestTable;

  beforeAll(async () => {
    server = await startTestServer({ QUERY_TIMEOUT_MS: '300' });
    org = await createOrg(server.prisma);
    table = await createSlowTable(server, org);
  }, 60_000);
  afterAll(() => server?.close());

  it('answers a read that runs out of time with 503 QUERY_TIMEOUT, the envelope and Retry-After (REST)', async () => {
    const response = await server.request('GET', slowRowsPath(table), { token: org.adminKey });
    expectError(response, 503, 'QUERY_TIMEOUT');
    expect(response.headers.get('retry-after')).toBe('5');
    expect(Object.keys(response.body.error).sort()).toEqual(['code', 'message', 'requestId']);
  });

  it('answers the same read on /graphql with extensions.code QUERY_TIMEOUT', async () => {
    const response = await graphqlRows(server, org, table, searches(25));
    expect(response.body.data).toBeNull();
    expect(response.body.errors).toHaveLength(1);
    expect(response.body.errors[0].extensions).toMatchObject({ code: 'QUERY_TIMEOUT', retryAfter: 5 });
  });

  it('gives jobs their own budget: a rule whose statements take seconds is built under the 300 ms request budget', async () => {
    // 50 distinct LIKE conditions on 200,000 rows: the duplicate check and the index build each scan them all.
    const where = {
      or: Array.from({ length: 50 }, (_item, index) => ({ field: 'Name', op: 'contains', value: `zqNx${index}` })),
    };
    const { job } = await addUniqueRule(server, org.adminKey, table, { fieldIds: [table.fields.Name], where });
    expect({ state: job.state, error: job.error }).toEqual({ state: 'succeeded', error: null });
  }, 60_000);

  it('leaves the connection usable: a cheap read right after succeeds', async () => {
    const response = await server.request('GET', `${table.path}/rows?limit=1`, { token: org.adminKey });
    expect(response.status, response.text).toBe(200);
    expect(response.body.data).toHaveLength(1);
  });
});
