import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { FieldDefinition } from '../src/data/field-types.ts';
import { rowsTableOf } from '../src/data/identifiers.ts';
import { isSearchable, searchCondition, similarRows } from '../src/data/search.ts';
import { Params } from '../src/data/statement.ts';
import { appliedChange, schemaChangeApi } from './helpers/schema-changes.ts';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { addMember, createOrg } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { definitionOf, savedView, viewClient } from './helpers/views.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/** Issue 28: `search` on GET …/rows, POST …/rows/query and GraphQL; POST …/rows/similar. */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;
const views = viewClient(suite);

type Values = Record<string, unknown>;

async function tableWith(rows: Values[]): Promise<TestTable> {
  const table = await createTable(suite.server, suite.org, [
    { name: 'Name', type: 'text' },
    { name: 'Notes', type: 'longText' },
    { name: 'Email', type: 'email' },
    { name: 'Site', type: 'url' },
    { name: 'Kind', type: 'select', options: { choices: ['Fournisseur', 'Client'] } },
    { name: 'Tags', type: 'multiSelect', options: { choices: ['Épicerie', 'Boulangerie'] } },
    { name: 'Qty', type: 'integer' },
  ]);
  for (const values of rows) {
    const created = await createRow(suite.server, admin(), table, values);
    expect(created.status, created.text).toBe(201);
  }
  return table;
}

const SUPPLIERS: Values[] = [
  { Name: 'Crème Brûlée Café', Qty: 1 },
  { Name: 'CREME fraiche', Kind: 'Client', Qty: 2 },
  { Name: 'Dupont', Tags: ['Épicerie'], Qty: 3 },
  { Name: 'Martin', Notes: 'Livre la crème le mardi', Qty: 4 },
  { Name: 'Post', Email: 'orders@creme.example', Qty: 5 },
  { Name: 'Web', Site: 'https://cremerie.example/shop', Kind: 'Fournisseur', Qty: 6 },
  { Name: '100% pure', Qty: 7 },
];

let shared: Promise<TestTable> | undefined;
const suppliers = () => (shared ??= tableWith(SUPPLIERS));

async function searched(table: TestTable, query: Record<string, string>): Promise<string[]> {
  const response = await suite.server.request('GET', `${table.path}/rows?${new URLSearchParams(query)}`, {
    token: admin(),
  });
  expect(response.status, response.text).toBe(200);
  return response.body.data.map((row: { values: Record<string, unknown> }) => row.values[table.fields.Name!]);
}

describe('GET …/rows?search=', () => {
  it('finds a word in every text-like field, ignoring case and accents', async () => {
    const table = await suppliers();
    const found = await searched(table, { search: 'CREME' });
    expect(found.sort()).toEqual(['CREME fraiche', 'Crème Brûlée Café', 'Martin', 'Post', 'Web'].sort());
    expect(await searched(table, { search: 'épicerie' })).toEqual(['Dupont']);
    expect(await searched(table, { search: 'client' })).toEqual(['CREME fraiche']);
  });

  it('needs every word, in any of the fields', async () => {
    const table = await suppliers();
    expect(await searched(table, { search: 'creme cafe' })).toEqual(['Crème Brûlée Café']);
    expect(await searched(table, { search: 'dupont EPICERIE' })).toEqual(['Dupont']);
    expect(await searched(table, { search: 'creme nowhere' })).toEqual([]);
  });

  it('matches %, _ and \\ literally', async () => {
    const table = await suppliers();
    expect(await searched(table, { search: '100%' })).toEqual(['100% pure']);
    expect(await searched(table, { search: '_' })).toEqual([]);
  });

  it('ranks by relevance unless an order is given', async () => {
    const table = await tableWith([
      { Name: 'Acme Corporation International Holdings' },
      { Name: 'Acme' },
      { Name: 'Acme Corp' },
    ]);
    expect(await searched(table, { search: 'acme' })).toEqual([
      'Acme',
      'Acme Corp',
      'Acme Corporation International Holdings',
    ]);
    const ordered = await searched(table, {
      search: 'acme',
      orderBy: JSON.stringify([{ field: 'Name', direction: 'desc' }]),
    });
    expect(ordered).toEqual(['Acme Corporation International Holdings', 'Acme Corp', 'Acme']);
  });

  it('pages a ranked search with cursors, each row once', async () => {
    const table = await tableWith(
      Array.from({ length: 7 }, (_item, index) => ({ Name: `acme ${'x'.repeat(index % 3)}${index}` })),
    );
    const all = await searched(table, { search: 'acme' });
    const paged: string[] = [];
    let cursor: string | null = null;
    do {
      const response: { status: number; text: string; body: any } = await suite.server.request(
        'GET',
        `${table.path}/rows?${new URLSearchParams({ search: 'acme', limit: '2', ...(cursor ? { cursor } : {}) })}`,
        { token: admin() },
      );
      expect(response.status, response.text).toBe(200);
      paged.push(
        ...response.body.data.map((row: { values: Record<string, string> }) => row.values[table.fields.Name!]),
      );
      cursor = response.body.nextCursor;
    } while (cursor);
    expect({ paged, count: paged.length }).toEqual({ paged: all, count: 7 });
    const first = await suite.server.request('GET', `${table.path}/rows?search=acme&limit=2`, { token: admin() });
    const other = await suite.server.request(
      'GET',
      `${table.path}/rows?search=acm&limit=2&cursor=${first.body.nextCursor}`,
      { token: admin() },
    );
    expectError(other, 400, 'CURSOR_INVALID');
  });

  it('combines with where, a view, includeTotal and POST …/rows/query', async () => {
    const table = await suppliers();
    expect(
      await searched(table, { search: 'creme', where: JSON.stringify({ field: 'Qty', op: 'gte', value: 4 }) }),
    ).toHaveLength(3);
    const view = savedView(
      await views.postView(table, {
        visibility: 'shared',
        definition: definitionOf({ where: { field: 'Qty', op: 'lte', value: 2 } }),
      }),
    );
    expect((await searched(table, { search: 'creme', viewId: view.id })).sort()).toEqual(
      ['CREME fraiche', 'Crème Brûlée Café'].sort(),
    );
    const got = await suite.server.request('GET', `${table.path}/rows?search=creme&includeTotal=true&limit=2`, {
      token: admin(),
    });
    expect(got.body.total).toBe(5);
    const posted = await suite.server.request('POST', `${table.path}/rows/query`, {
      token: admin(),
      body: { search: 'creme', includeTotal: true, limit: 2 },
    });
    expect({ status: posted.status, body: posted.body }).toEqual({ status: 200, body: got.body });
  });

  it('counts and groups searched rows in aggregates', async () => {
    const table = await suppliers();
    const response = await suite.server.request('POST', `${table.path}/rows/aggregate`, {
      token: admin(),
      body: {
        search: 'creme',
        aggregates: [
          { fn: 'count', as: 'n' },
          { fn: 'sum', fieldId: 'Qty', as: 'qty' },
        ],
      },
    });
    expect(response.body.data).toEqual([{ group: {}, values: { n: 5, qty: 18 } }]);
  });

  it('answers rows(search:) and Table.rows(search:) on GraphQL', async () => {
    const table = await suppliers();
    const address = { orgId: table.orgId, databaseId: table.databaseId, tableId: table.tableId };
    const root = await suite.server.graphql(
      `query($orgId: ID!, $databaseId: ID!, $tableId: ID!) {
      rows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, search: "brulee", includeTotal: true) { data { id } total } }`,
      address,
      { token: admin() },
    );
    expect(root.body.data.rows).toMatchObject({ data: [{ id: expect.any(String) }], total: 1 });
    const edge = await suite.server.graphql(
      `query($orgId: ID!, $databaseId: ID!, $tableId: ID!) {
      table(orgId: $orgId, databaseId: $databaseId, tableId: $tableId) { rows(search: "brulee") { data { id } } } }`,
      address,
      { token: admin() },
    );
    expect(edge.body.data.table.rows.data).toEqual(root.body.data.rows.data);
  });

  it('refuses an empty search and one of more than 10 words with 422', async () => {
    const table = await suppliers();
    const blank = await suite.server.request('GET', `${table.path}/rows?search=${encodeURIComponent('   ')}`, {
      token: admin(),
    });
    expectError(blank, 422, 'VALIDATION_FAILED');
    expectProblemPaths(blank, [['query', 'search']]);
    const long = await suite.server.request(
      'GET',
      `${table.path}/rows?search=${encodeURIComponent('a b c d e f g h i j k')}`,
      { token: admin() },
    );
    expectError(long, 422, 'VALIDATION_FAILED');
  });
});

function similar(table: TestTable, body: Values, token = admin()) {
  return suite.server.request('POST', `${table.path}/rows/similar`, { token, body });
}

describe('POST …/rows/similar', () => {
  const companies = () =>
    tableWith([
      { Name: 'ACME Corporation' },
      { Name: 'Acme Corp' },
      { Name: 'Apex Co' },
      { Name: 'Société Générale' },
      { Name: 'Zenith Ltd' },
    ]);

  it('answers the most similar rows first, with scores, case and accents ignored', async () => {
    const table = await companies();
    const response = await similar(table, { fieldId: 'Name', value: 'Acme Corp.' });
    expect(response.status, response.text).toBe(200);
    const names = response.body.data.map(
      (entry: { row: { values: Record<string, string> } }) => entry.row.values[table.fields.Name!],
    );
    expect(names).toEqual(['Acme Corp', 'ACME Corporation']);
    const scores = response.body.data.map((entry: { score: number }) => entry.score);
    expect(scores[0]).toBe(1);
    expect(scores[1]).toBeGreaterThanOrEqual(0.3);
    expect(scores[1]).toBeLessThan(1);
    const accented = await similar(table, { fieldId: table.fields.Name!, value: 'societe generale' });
    expect(
      accented.body.data.map(
        (entry: { row: { values: Record<string, string> } }) => entry.row.values[table.fields.Name!],
      ),
    ).toEqual(['Société Générale']);
  });

  it('takes a threshold too small for a float4 (fuzz: 1.8e-245 was a 500): every row scores above it', async () => {
    const table = await companies();
    const response = await similar(table, { fieldId: 'Name', value: 'Acme Corp.', threshold: 1.8e-245 });
    expect(response.status, response.text).toBe(200);
    expect(response.body.data.length).toBeGreaterThan(2);
  });

  it('honours threshold and limit', async () => {
    const table = await companies();
    const loose = await similar(table, { fieldId: 'Name', value: 'Acme Corp.', threshold: 0.05 });
    expect(loose.body.data.length).toBeGreaterThan(2);
    const one = await similar(table, { fieldId: 'Name', value: 'Acme Corp.', limit: 1 });
    expect(one.body.data).toHaveLength(1);
    const strict = await similar(table, { fieldId: 'Name', value: 'Acme Corp.', threshold: 1 });
    expect(strict.body.data).toHaveLength(1);
  });

  it('refuses a field that is not text, an unknown field and a bad threshold with 422', async () => {
    const table = await companies();
    const numeric = await similar(table, { fieldId: 'Qty', value: '1' });
    expectError(numeric, 422, 'VALIDATION_FAILED');
    expectProblemPaths(numeric, [['fieldId']]);
    expectError(await similar(table, { fieldId: 'Nope', value: 'x' }), 422, 'VALIDATION_FAILED');
    expectError(await similar(table, { fieldId: 'Name', value: 'x', threshold: 2 }), 422, 'VALIDATION_FAILED');
  });

  it('is a read for a viewer; another org’s caller gets 404', async () => {
    const table = await companies();
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    expect((await similar(table, { fieldId: 'Name', value: 'acme' }, viewer.apiKey)).status).toBe(200);
    const stranger = await createOrg(suite.server.prisma);
    expectError(await similar(table, { fieldId: 'Name', value: 'acme' }, stranger.adminKey), 404, 'RESOURCE_NOT_FOUND');
  });
});

describe('search and trigram indexes (add_index using search | trigram)', () => {
  const api = schemaChangeApi(suite);

  async function explain(sql: string, params: unknown[]): Promise<string> {
    const client = new pg.Client({ connectionString: suite.server.database.url });
    await client.connect();
    try {
      // Only whether the index can serve the statement: on a few rows the planner would rather scan.
      await client.query('SET enable_seqscan = off');
      const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, params);
      return rows.map((row) => row['QUERY PLAN']).join('\n');
    } finally {
      await client.end();
    }
  }

  const fieldsOf = async (table: TestTable) => (await api.schemaOf(table)).fields as FieldDefinition[];

  it('builds a search index online as a job, lists it in the schema, and search statements use it', async () => {
    const table = await tableWith(SUPPLIERS);
    const indexed = await appliedChange(suite, table, { kind: 'add_index', using: 'search' });
    const schema = await api.schemaOf(indexed);
    const textFields = ['Name', 'Notes', 'Email', 'Site', 'Kind', 'Tags'].map((name) => table.fields[name]!);
    expect(schema.indexes).toEqual([
      {
        id: expect.any(String),
        keys: textFields.map((fieldId) => ({ fieldId, direction: 'asc' })),
        origin: 'explicit',
        state: 'ready',
        method: 'search',
        createdAt: expect.any(String),
      },
    ]);
    expect((await searched(indexed, { search: 'CREME' })).sort()).toEqual(
      ['CREME fraiche', 'Crème Brûlée Café', 'Martin', 'Post', 'Web'].sort(),
    );
    const fields = await fieldsOf(indexed);
    const params = new Params();
    const condition = searchCondition({ indexed: fields.filter(isSearchable), scanned: [] }, ['creme', 'cafe'], params);
    const plan = await explain(
      `SELECT r.id FROM ${rowsTableOf(table.databaseId, table.tableId)} r WHERE ${condition}`,
      params.values,
    );
    expect(plan).toContain(`Bitmap Index Scan on i_${schema.indexes[0]!.id.toLowerCase()}`);
  });

  it('builds a trigram index on one text field, which similar rows use', async () => {
    const table = await tableWith([{ Name: 'ACME Corporation' }, { Name: 'Acme Corp' }]);
    const indexed = await appliedChange(suite, table, {
      kind: 'add_index',
      using: 'trigram',
      fields: [{ field: 'Name' }],
    });
    const [index] = (await api.schemaOf(indexed)).indexes;
    expect(index).toMatchObject({
      method: 'trigram',
      keys: [{ fieldId: table.fields.Name, direction: 'asc' }],
      state: 'ready',
    });
    const fields = await fieldsOf(indexed);
    const statement = similarRows(
      { databaseId: table.databaseId, tableId: table.tableId, fields },
      {
        field: fields.find((field) => field.name === 'Name')!,
        value: 'Acme Corp.',
        threshold: 0.3,
        limit: 10,
        shown: fields,
      },
    );
    expect(await explain(statement.sql, statement.params)).toContain(
      `Bitmap Index Scan on i_${index!.id.toLowerCase()}`,
    );
    const response = await similar(indexed, { fieldId: 'Name', value: 'Acme Corp.' });
    expect(response.body.data).toHaveLength(2);
  });

  it('refuses a trigram index on a field without text, and fields on a search index, with 422', async () => {
    const table = await suppliers();
    const numeric = await api.apply(table, { kind: 'add_index', using: 'trigram', fields: [{ field: 'Qty' }] });
    expectError(numeric, 422, 'VALIDATION_FAILED');
    expectProblemPaths(numeric, [['change', 'fields', 0, 'field']]);
    expectError(
      await api.apply(table, { kind: 'add_index', using: 'search', fields: [{ field: 'Name' }] }),
      422,
      'VALIDATION_FAILED',
    );
    expectError(await api.apply(table, { kind: 'add_index', fields: [{ field: 'Name' }] }), 422, 'VALIDATION_FAILED');
  });

  it('counts text indexes against the cap of 8 per table', async () => {
    let table = await createTable(
      suite.server,
      suite.org,
      Array.from({ length: 8 }, (_item, index) => ({ name: `T${index}`, type: 'text', options: { maxLength: 100 } })),
    );
    for (let index = 0; index < 7; index += 1)
      table = await appliedChange(suite, table, {
        kind: 'add_index',
        fields: [{ field: `T${index}`, direction: 'asc' }],
      });
    table = await appliedChange(suite, table, { kind: 'add_index', using: 'search' });
    const refused = await api.apply(table, { kind: 'add_index', using: 'trigram', fields: [{ field: 'T7' }] });
    expectError(refused, 409, 'CAPACITY_LIMIT');
  });

  it('deleting an indexed field drops the search index with it', async () => {
    const table = await tableWith([{ Name: 'x' }]);
    const indexed = await appliedChange(suite, table, { kind: 'add_index', using: 'search' });
    const after = await appliedChange(suite, indexed, { kind: 'delete_field', fieldId: table.fields.Notes });
    expect((await api.schemaOf(after)).indexes).toEqual([]);
    expect(await searched(after, { search: 'x' })).toEqual(['x']);
  });
});
