import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AggregateRowsResponse } from '../src/contracts/rows-aggregate.ts';
import { columnOf, rowsTableOf } from '../src/data/identifiers.ts';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { addMember, createOrg, type TestOrg } from './helpers/factories.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { createSlowTable, textSearches } from './helpers/slow-table.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { definitionOf, savedView, viewClient } from './helpers/views.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/** Issue 28: POST …/rows/aggregate, `aggregateRows` / `Table.aggregate`, and `includeTotal` on GET …/rows. */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;
const views = viewClient(suite);

type Body = Record<string, unknown>;

function aggregate(table: TestTable, body: Body, token = admin()) {
  return suite.server.request('POST', `${table.path}/rows/aggregate`, { token, body });
}

async function groups(table: TestTable, body: Body) {
  const response = await aggregate(table, body);
  expect(response.status, response.text).toBe(200);
  return AggregateRowsResponse.parse(response.body);
}

const STOCK_FIELDS = [
  { name: 'Name', type: 'text' },
  { name: 'Warehouse', type: 'select', options: { choices: ['A', 'B', 'C'] } },
  { name: 'Tags', type: 'multiSelect', options: { choices: ['x', 'y', 'z'] } },
  { name: 'Qty', type: 'integer' },
  { name: 'Price', type: 'number', options: { precision: 15, scale: 2 } },
  { name: 'Active', type: 'boolean' },
  { name: 'Day', type: 'date' },
  { name: 'At', type: 'datetime' },
  { name: 'Notes', type: 'longText' },
  { name: 'Doc', type: 'json' },
];

const STOCK_ROWS = [
  {
    Name: 'Apple',
    Warehouse: 'A',
    Tags: ['x', 'y'],
    Qty: 10,
    Price: 1.5,
    Active: true,
    Day: '2026-01-15',
    At: '2026-01-31T23:30:00.000Z',
  },
  {
    Name: 'Banana',
    Warehouse: 'A',
    Tags: ['x'],
    Qty: 5,
    Price: 0.25,
    Active: false,
    Day: '2026-02-01',
    At: '2026-02-01T00:30:00.000Z',
  },
  {
    Name: 'Cherry',
    Warehouse: 'B',
    Tags: [],
    Qty: 7,
    Price: 2,
    Active: true,
    Day: '2026-04-10',
    At: '2026-03-31T22:00:00.000Z',
  },
  { Name: 'Date', Warehouse: 'B', Tags: ['y', 'z'] },
  { Name: 'Elder', Qty: 3, Price: 10.1, Active: true, Day: '2026-12-31', At: '2026-12-31T23:59:59.999Z' },
];

async function stockTable(): Promise<TestTable> {
  const table = await createTable(suite.server, suite.org, STOCK_FIELDS);
  for (const values of STOCK_ROWS) {
    const created = await createRow(suite.server, admin(), table, values);
    expect(created.status, created.text).toBe(201);
  }
  return table;
}

let shared: Promise<TestTable> | undefined;
const stock = () => (shared ??= stockTable());

/** `{value of the grouped field: count}` pairs in answer order. */
async function countsBy(table: TestTable, groupBy: unknown, extra: Body = {}) {
  const field = typeof groupBy === 'string' ? groupBy : (groupBy as { fieldId: string }).fieldId;
  const page = await groups(table, { groupBy: [groupBy], aggregates: [{ fn: 'count', as: 'n' }], ...extra });
  return page.data.map((entry) => [entry.group[table.fields[field] ?? field], entry.values.n]);
}

describe('POST …/rows/aggregate: functions', () => {
  it('answers the totals of every function in one entry without groupBy', async () => {
    const table = await stock();
    const page = await groups(table, {
      aggregates: [
        { fn: 'count', as: 'rows' },
        { fn: 'countDistinct', fieldId: 'Warehouse', as: 'warehouses' },
        { fn: 'countEmpty', fieldId: 'Warehouse', as: 'noWarehouse' },
        { fn: 'countNotEmpty', fieldId: 'Qty', as: 'withQty' },
        { fn: 'countEmpty', fieldId: 'Tags', as: 'untagged' },
        { fn: 'sum', fieldId: 'Qty', as: 'qty' },
        { fn: 'avg', fieldId: 'Qty', as: 'meanQty' },
        { fn: 'min', fieldId: 'Qty', as: 'minQty' },
        { fn: 'max', fieldId: 'Qty', as: 'maxQty' },
        { fn: 'sum', fieldId: 'Price', as: 'price' },
        { fn: 'percentile', fieldId: 'Qty', fraction: 0.5, as: 'medianQty' },
        { fn: 'min', fieldId: 'Day', as: 'firstDay' },
        { fn: 'max', fieldId: 'At', as: 'lastAt' },
        { fn: 'min', fieldId: table.fields.Name!, as: 'firstName' },
        { fn: 'max', fieldId: 'Name', as: 'lastName' },
      ],
    });
    expect(page).toEqual({
      data: [
        {
          group: {},
          values: {
            rows: 5,
            warehouses: 2,
            noWarehouse: 1,
            withQty: 4,
            untagged: 2,
            qty: 25,
            meanQty: 6.25,
            minQty: 3,
            maxQty: 10,
            price: 13.85,
            medianQty: 6,
            firstDay: '2026-01-15',
            lastAt: '2026-12-31T23:59:59.999Z',
            firstName: 'Apple',
            lastName: 'Elder',
          },
        },
      ],
      nextCursor: null,
      hasMore: false,
    });
  });

  it('answers null for sum, avg, min and max over no values, and 0 for counts', async () => {
    const table = await stock();
    const page = await groups(table, {
      where: { field: 'Name', op: 'eq', value: 'nobody' },
      aggregates: [
        { fn: 'count', as: 'n' },
        { fn: 'sum', fieldId: 'Qty', as: 's' },
        { fn: 'avg', fieldId: 'Qty', as: 'a' },
        { fn: 'max', fieldId: 'Day', as: 'm' },
      ],
    });
    expect(page.data).toEqual([{ group: {}, values: { n: 0, s: null, a: null, m: null } }]);
  });

  it('sums exactly: a JSON number when its text is the exact sum, else a decimal string', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'N', type: 'integer' },
      { name: 'P', type: 'number', options: { precision: 15, scale: 2 } },
    ]);
    for (const values of [
      { N: Number.MAX_SAFE_INTEGER, P: 0.1 },
      { N: 2, P: 0.2 },
      { P: 9_999_999_999_999.99 },
      { P: 9_999_999_999_999.99 },
    ]) {
      expect((await createRow(suite.server, admin(), table, values)).status).toBe(201);
    }
    const page = await groups(table, {
      aggregates: [
        { fn: 'sum', fieldId: 'N', as: 'n' },
        { fn: 'sum', fieldId: 'P', as: 'p' },
        { fn: 'max', fieldId: 'N', as: 'top' },
      ],
    });
    // 2^53 + 1 has no double: its exact decimal comes as a string. 19,999,999,999,999.98 + 0.3 has one.
    expect(page.data[0]!.values).toEqual({
      n: '9007199254740993',
      p: 20_000_000_000_000.28,
      top: Number.MAX_SAFE_INTEGER,
    });
    const small = await groups(table, {
      where: { field: 'N', op: 'isNotNull' },
      aggregates: [{ fn: 'sum', fieldId: 'P', as: 'p' }],
    });
    // In doubles 0.1 + 0.2 is 0.30000000000000004; the exact sum is 0.3.
    expect(small.data[0]!.values).toEqual({ p: 0.3 });
  });
});

describe('POST …/rows/aggregate: grouping', () => {
  it('groups by a select field: one group per value, empty last', async () => {
    expect(await countsBy(await stock(), 'Warehouse')).toEqual([
      ['A', 2],
      ['B', 2],
      [null, 1],
    ]);
  });

  it('groups by a multiSelect field: one group per choice, rows without choices in the empty group', async () => {
    expect(await countsBy(await stock(), 'Tags')).toEqual([
      ['x', 2],
      ['y', 2],
      ['z', 1],
      [null, 2],
    ]);
  });

  it('groups by a boolean field', async () => {
    expect(await countsBy(await stock(), 'Active')).toEqual([
      [false, 1],
      [true, 3],
      [null, 1],
    ]);
  });

  it('groups by a text field', async () => {
    expect(await countsBy(await stock(), 'Name')).toEqual([
      ['Apple', 1],
      ['Banana', 1],
      ['Cherry', 1],
      ['Date', 1],
      ['Elder', 1],
    ]);
  });

  it('groups dates by day (the default), week (Monday), month, quarter and year, answered as the period’s first day', async () => {
    const table = await stock();
    expect(await countsBy(table, 'Day')).toEqual([
      ['2026-01-15', 1],
      ['2026-02-01', 1],
      ['2026-04-10', 1],
      ['2026-12-31', 1],
      [null, 1],
    ]);
    expect(await countsBy(table, { fieldId: 'Day', granularity: 'week' })).toEqual([
      ['2026-01-12', 1],
      ['2026-01-26', 1],
      ['2026-04-06', 1],
      ['2026-12-28', 1],
      [null, 1],
    ]);
    expect(await countsBy(table, { fieldId: 'Day', granularity: 'month' })).toEqual([
      ['2026-01-01', 1],
      ['2026-02-01', 1],
      ['2026-04-01', 1],
      ['2026-12-01', 1],
      [null, 1],
    ]);
    expect(await countsBy(table, { fieldId: 'Day', granularity: 'quarter' })).toEqual([
      ['2026-01-01', 2],
      ['2026-04-01', 1],
      ['2026-10-01', 1],
      [null, 1],
    ]);
    expect(await countsBy(table, { fieldId: 'Day', granularity: 'year' })).toEqual([
      ['2026-01-01', 4],
      [null, 1],
    ]);
  });

  it('groups datetimes in the time zone given (UTC by default)', async () => {
    const table = await stock();
    expect(await countsBy(table, { fieldId: 'At', granularity: 'month' })).toEqual([
      ['2026-01-01', 1],
      ['2026-02-01', 1],
      ['2026-03-01', 1],
      ['2026-12-01', 1],
      [null, 1],
    ]);
    expect(await countsBy(table, { fieldId: 'At', granularity: 'month', timeZone: 'Europe/Paris' })).toEqual([
      ['2026-02-01', 2],
      ['2026-04-01', 1],
      ['2027-01-01', 1],
      [null, 1],
    ]);
    expect(await countsBy(table, { fieldId: 'At', timeZone: 'Asia/Tokyo' })).toEqual([
      ['2026-02-01', 2],
      ['2026-04-01', 1],
      ['2027-01-01', 1],
      [null, 1],
    ]);
  });

  it('groups by up to three fields, keyed by field id', async () => {
    const table = await stock();
    const page = await groups(table, {
      groupBy: ['Warehouse', 'Active'],
      aggregates: [{ fn: 'sum', fieldId: 'Qty', as: 'qty' }],
      where: { field: 'Warehouse', op: 'isNotNull' },
    });
    const { Warehouse, Active } = table.fields;
    expect(page.data).toEqual([
      { group: { [Warehouse!]: 'A', [Active!]: false }, values: { qty: 5 } },
      { group: { [Warehouse!]: 'A', [Active!]: true }, values: { qty: 10 } },
      { group: { [Warehouse!]: 'B', [Active!]: true }, values: { qty: 7 } },
      { group: { [Warehouse!]: 'B', [Active!]: null }, values: { qty: null } },
    ]);
  });

  it('filters groups with having, on counts and on a min of dates', async () => {
    const table = await stock();
    expect(await countsBy(table, 'Warehouse', { having: { aggregate: 'n', op: 'gte', value: 2 } })).toEqual([
      ['A', 2],
      ['B', 2],
    ]);
    const page = await groups(table, {
      groupBy: ['Warehouse'],
      aggregates: [{ fn: 'min', fieldId: 'Day', as: 'first' }],
      having: {
        or: [
          { aggregate: 'first', op: 'lt', value: '2026-02-01' },
          { aggregate: 'first', op: 'gt', value: '2026-12-01' },
        ],
      },
    });
    expect(page.data.map((entry) => entry.group[table.fields.Warehouse!])).toEqual(['A', null]);
  });

  it('orders groups by an aggregate, then by the group keys', async () => {
    const table = await stock();
    expect(await countsBy(table, 'Tags', { orderBy: [{ aggregate: 'n', direction: 'desc' }] })).toEqual([
      ['x', 2],
      ['y', 2],
      [null, 2],
      ['z', 1],
    ]);
    expect(await countsBy(table, 'Warehouse', { orderBy: [{ fieldId: 'Warehouse', direction: 'desc' }] })).toEqual([
      [null, 1],
      ['B', 2],
      ['A', 2],
    ]);
  });

  it('pages groups with limit and an opaque cursor bound to the query', async () => {
    const table = await stock();
    const body = { groupBy: ['Name'], aggregates: [{ fn: 'count', as: 'n' }], limit: 2 };
    const names: unknown[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: ReturnType<typeof AggregateRowsResponse.parse> = await groups(table, {
        ...body,
        ...(cursor ? { cursor } : {}),
      });
      names.push(...page.data.map((entry) => entry.group[table.fields.Name!]));
      expect(page.hasMore).toBe(page.nextCursor !== null);
      cursor = page.nextCursor;
      pages += 1;
    } while (cursor);
    expect({ pages, names }).toEqual({ pages: 3, names: ['Apple', 'Banana', 'Cherry', 'Date', 'Elder'] });
    const first = await groups(table, body);
    expectError(await aggregate(table, { ...body, limit: 3, cursor: first.nextCursor }), 400, 'CURSOR_INVALID');
    expectError(await aggregate(table, { ...body, cursor: `${first.nextCursor}x` }), 400, 'CURSOR_INVALID');
  });

  it('aggregates the rows of a view (its filter, and where on top)', async () => {
    const table = await stock();
    const view = savedView(
      await views.postView(table, {
        visibility: 'shared',
        definition: definitionOf({ where: { field: 'Warehouse', op: 'eq', value: 'A' } }),
      }),
    );
    const counted = async (body: Body) =>
      (await groups(table, { aggregates: [{ fn: 'count', as: 'n' }], ...body })).data[0]!.values.n;
    expect(await counted({ viewId: view.id })).toBe(2);
    expect(await counted({ viewId: view.id, where: { field: 'Qty', op: 'gt', value: 5 } })).toBe(1);
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    const asViewer = await aggregate(table, { viewId: view.id, aggregates: [{ fn: 'count', as: 'n' }] }, viewer.apiKey);
    expect({ status: asViewer.status, n: asViewer.body.data?.[0]?.values.n }).toEqual({ status: 200, n: 2 });
  });
});

describe('POST …/rows/aggregate: refusals', () => {
  const refusal = async (body: Body, paths: (string | number)[][]) => {
    const response = await aggregate(await stock(), body);
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, paths);
    expect(response.body.error.details.problems).toHaveLength(paths.length);
  };
  const count = { fn: 'count', as: 'n' };

  it('refuses sum and avg of anything but numbers, naming the aggregate by index', async () => {
    await refusal(
      {
        aggregates: [
          count,
          { fn: 'sum', fieldId: 'Name', as: 's' },
          { fn: 'avg', fieldId: 'Active', as: 'a' },
          { fn: 'percentile', fieldId: 'Day', fraction: 0.5, as: 'p' },
        ],
      },
      [
        ['aggregates', 1, 'fieldId'],
        ['aggregates', 2, 'fieldId'],
        ['aggregates', 3, 'fieldId'],
      ],
    );
  });

  it('refuses min and max of booleans, multiSelects and json', async () => {
    await refusal(
      {
        aggregates: [
          { fn: 'min', fieldId: 'Active', as: 'a' },
          { fn: 'max', fieldId: 'Tags', as: 'b' },
          { fn: 'max', fieldId: 'Doc', as: 'c' },
        ],
      },
      [
        ['aggregates', 0, 'fieldId'],
        ['aggregates', 1, 'fieldId'],
        ['aggregates', 2, 'fieldId'],
      ],
    );
  });

  it('refuses count with a field, other functions without one, unknown fields, and misplaced fractions', async () => {
    await refusal(
      {
        aggregates: [
          { fn: 'count', fieldId: 'Qty', as: 'a' },
          { fn: 'countDistinct', as: 'b' },
          { fn: 'sum', fieldId: 'Nope', as: 'c' },
          { fn: 'percentile', fieldId: 'Qty', as: 'd' },
          { fn: 'sum', fieldId: 'Qty', fraction: 0.5, as: 'e' },
        ],
      },
      [
        ['aggregates', 0, 'fieldId'],
        ['aggregates', 1, 'fieldId'],
        ['aggregates', 2, 'fieldId'],
        ['aggregates', 3, 'fraction'],
        ['aggregates', 4, 'fraction'],
      ],
    );
  });

  it('refuses a repeated name, and shapes the body refuses before the schema is read', async () => {
    await refusal({ aggregates: [count, { fn: 'sum', fieldId: 'Qty', as: 'n' }] }, [['aggregates', 1, 'as']]);
    await refusal({ aggregates: [] }, [['body', 'aggregates']]);
    await refusal({ aggregates: [{ fn: 'median', fieldId: 'Qty', as: 'm' }] }, [['body', 'aggregates', 0, 'fn']]);
    await refusal({ aggregates: [count], groupBy: ['Name', 'Qty', 'Day', 'Active'] }, [['body', 'groupBy']]);
    await refusal({ aggregates: [count], limit: 1001 }, [['body', 'limit']]);
  });

  it('refuses grouping by json, longText, a field twice, and granularity on other types', async () => {
    await refusal({ aggregates: [count], groupBy: ['Doc', 'Notes', { fieldId: 'Name', granularity: 'month' }] }, [
      ['groupBy', 0],
      ['groupBy', 1],
      ['groupBy', 2, 'fieldId'],
    ]);
    await refusal({ aggregates: [count], groupBy: ['Name', 'Name'] }, [['groupBy', 1]]);
    await refusal({ aggregates: [count], groupBy: [{ fieldId: 'At', timeZone: 'Mars/Olympus' }] }, [
      ['body', 'groupBy', 0, 'timeZone'],
    ]);
  });

  it('refuses having and orderBy that name no aggregate or an ungrouped field, and operands of the wrong type', async () => {
    await refusal({ aggregates: [count], groupBy: ['Name'], having: { aggregate: 'm', op: 'gt', value: 1 } }, [
      ['having', 'aggregate'],
    ]);
    await refusal(
      {
        aggregates: [count],
        groupBy: ['Name'],
        having: {
          and: [
            { aggregate: 'n', op: 'gt', value: 'x' },
            { aggregate: 'n', op: 'gt' },
          ],
        },
      },
      [
        ['having', 'and', 0, 'value'],
        ['having', 'and', 1, 'value'],
      ],
    );
    await refusal(
      {
        aggregates: [count],
        groupBy: ['Name'],
        orderBy: [
          { fieldId: 'Qty', direction: 'asc' },
          { aggregate: 'x', direction: 'asc' },
        ],
      },
      [
        ['orderBy', 0, 'fieldId'],
        ['orderBy', 1, 'aggregate'],
      ],
    );
  });

  it('applies the filter cost budget to the view’s filter and where together', async () => {
    const response = await aggregate(await stock(), { where: textSearches(26), aggregates: [count] });
    expectError(response, 422, 'VALIDATION_FAILED');
    expect(response.body.error.details.problems[0].path).toEqual(['where']);
  });

  it('answers 413 beyond 10,000 groups, and 10,000 groups in pages', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Code', type: 'text' }]);
    const client = new pg.Client({ connectionString: suite.server.database.url });
    await client.connect();
    try {
      await client.query(`INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)} (id, version, created_at, updated_at, ${columnOf(table.fields.Code!)})
        SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), 'code ' || g FROM generate_series(1, 10001) AS g`);
    } finally {
      await client.end();
    }
    const body = { groupBy: ['Code'], aggregates: [{ fn: 'count', as: 'n' }] };
    const response = await aggregate(table, body);
    expectError(response, 413, 'PAYLOAD_TOO_LARGE');
    expect(response.body.error.details).toEqual({ limit: 10_000 });
    const fits = await groups(table, { ...body, where: { field: 'Code', op: 'ne', value: 'code 1' }, limit: 1000 });
    expect({ groups: fits.data.length, hasMore: fits.hasMore }).toEqual({ groups: 1000, hasMore: true });
  });
});

describe('POST …/rows/aggregate: authority and addresses', () => {
  it('is a read: a viewer and a read-only team key may aggregate, without an Idempotency-Key', async () => {
    const table = await stock();
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    const response = await aggregate(table, { aggregates: [{ fn: 'count', as: 'n' }] }, viewer.apiKey);
    expect(response.status, response.text).toBe(200);
  });

  it('answers 404 for another org’s table, an unknown table and an unknown view; 401 without a credential', async () => {
    const table = await stock();
    const stranger = await createOrg(suite.server.prisma);
    expectError(
      await aggregate(table, { aggregates: [{ fn: 'count', as: 'n' }] }, stranger.adminKey),
      404,
      'RESOURCE_NOT_FOUND',
    );
    const missing = { ...table, path: table.path.replace(table.tableId, '01ARZ3NDEKTSV4RRFFQ69G5FAV') };
    expectError(await aggregate(missing, { aggregates: [{ fn: 'count', as: 'n' }] }), 404, 'RESOURCE_NOT_FOUND');
    expectError(
      await aggregate(table, { viewId: '01ARZ3NDEKTSV4RRFFQ69G5FAV', aggregates: [{ fn: 'count', as: 'n' }] }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    const anonymous = await suite.server.request('POST', `${table.path}/rows/aggregate`, {
      body: { aggregates: [{ fn: 'count', as: 'n' }] },
    });
    expectError(anonymous, 401, 'UNAUTHENTICATED');
  });
});

describe('GraphQL aggregateRows and Table.aggregate', () => {
  it('answers as REST, on the root query and on the table edge', async () => {
    const table = await stock();
    const input = { groupBy: ['Warehouse'], aggregates: [{ fn: 'sum', fieldId: 'Qty', as: 'qty' }] };
    const rest = await groups(table, input);
    const address = { orgId: table.orgId, databaseId: table.databaseId, tableId: table.tableId };
    const root = await suite.server.graphql(
      `query($orgId: ID!, $databaseId: ID!, $tableId: ID!, $input: AggregateRowsInput!) {
      aggregateRows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, input: $input) { data { group values } nextCursor hasMore } }`,
      { ...address, input },
      { token: admin() },
    );
    expect(root.body).toEqual({ data: { aggregateRows: rest } });
    const edge = await suite.server.graphql(
      `query($orgId: ID!, $databaseId: ID!, $tableId: ID!, $input: AggregateRowsInput!) {
      table(orgId: $orgId, databaseId: $databaseId, tableId: $tableId) { aggregate(input: $input) { data { group values } } } }`,
      { ...address, input },
      { token: admin() },
    );
    expect(edge.body).toEqual({ data: { table: { aggregate: { data: rest.data } } } });
  });

  it('names the aggregate by index in a GraphQL validation error', async () => {
    const table = await stock();
    const response = await suite.server.graphql(
      `query($orgId: ID!, $databaseId: ID!, $tableId: ID!, $input: AggregateRowsInput!) {
      aggregateRows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, input: $input) { hasMore } }`,
      {
        orgId: table.orgId,
        databaseId: table.databaseId,
        tableId: table.tableId,
        input: {
          aggregates: [
            { fn: 'count', as: 'n' },
            { fn: 'sum', fieldId: 'Name', as: 's' },
          ],
        },
      },
      { token: admin() },
    );
    expect(response.body.errors[0].extensions.code).toBe('VALIDATION_FAILED');
    expect(response.body.errors[0].extensions.details.problems[0].path).toEqual(['aggregates', 1, 'fieldId']);
  });
});

describe('GET …/rows?includeTotal=true', () => {
  it('answers total, the count of all matches, on the first page only', async () => {
    const table = await stock();
    const where = encodeURIComponent(JSON.stringify({ field: 'Qty', op: 'isNotNull' }));
    const first = await suite.server.request('GET', `${table.path}/rows?limit=2&includeTotal=true&where=${where}`, {
      token: admin(),
    });
    expect(first.status, first.text).toBe(200);
    expect({ total: first.body.total, rows: first.body.data.length }).toEqual({ total: 4, rows: 2 });
    const next = await suite.server.request(
      'GET',
      `${table.path}/rows?limit=2&includeTotal=true&where=${where}&cursor=${first.body.nextCursor}`,
      { token: admin() },
    );
    expect(next.status, next.text).toBe(200);
    expect(next.body.total).toBeNull();
    const plain = await suite.server.request('GET', `${table.path}/rows?limit=2`, { token: admin() });
    expect(Object.keys(plain.body).sort()).toEqual(['data', 'hasMore', 'nextCursor']);
    const posted = await suite.server.request('POST', `${table.path}/rows/query`, {
      token: admin(),
      body: { includeTotal: true, limit: 1 },
    });
    expect(posted.body.total).toBe(5);
  });
});

describe('budgets', () => {
  let server: TestServer;
  let org: TestOrg;
  let table: TestTable;
  beforeAll(async () => {
    server = await startTestServer({ QUERY_TIMEOUT_MS: '300' });
    org = await createOrg(server.prisma);
    table = await createSlowTable(server, org);
  }, 60_000);
  afterAll(() => server?.close());

  it('answers an aggregate that runs out of time with 503 QUERY_TIMEOUT and Retry-After', async () => {
    const response = await server.request('POST', `${table.path}/rows/aggregate`, {
      token: org.adminKey,
      body: { where: textSearches(25), groupBy: ['Name'], aggregates: [{ fn: 'count', as: 'n' }] },
    });
    expectError(response, 503, 'QUERY_TIMEOUT');
    expect(response.headers.get('retry-after')).toBe('5');
  });
});
