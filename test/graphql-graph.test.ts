import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { sqlPoolOf } from '../src/db/prisma.ts';
import { sha256Hex } from '../src/identity/secrets.ts';
import type { OAuthScope } from '../src/kernel/authority.ts';
import { newId } from '../src/kernel/ids.ts';
import { addMember, createOrg, idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { definitionOf } from './helpers/views.ts';
import { createDatabase, createRow, createTable, type TestTable } from './helpers/workspace.ts';

/** Issue 17: the graph's edges, their authority, their batching, and the document limits. */
const suite = useServerWithOrg({ RUN_WORKER: 'false' });

/**
 * Counts the statements every connection of the server's pool runs while `work` runs. Prisma and the data plane
 * share this pool (src/db/prisma.ts), and each checkout emits `acquire`, so no statement escapes the count.
 */
async function countStatements(work: () => Promise<unknown>): Promise<number> {
  const pool = sqlPoolOf(suite.server.prisma);
  let count = 0;
  let counting = true;
  const wrapped = new WeakSet<pg.PoolClient>();
  const wrap = (client: pg.PoolClient) => {
    if (wrapped.has(client)) return;
    wrapped.add(client);
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      if (counting) count += 1;
      return query(...args);
    };
  };
  pool.on('acquire', wrap);
  try {
    await work();
  } finally {
    counting = false;
    pool.off('acquire', wrap);
  }
  return count;
}

async function tablesIn(databaseId: string, count: number): Promise<void> {
  for (let start = 0; start < count; start += 10) {
    await Promise.all(
      Array.from({ length: Math.min(10, count - start) }, (_, i) =>
        createTable(
          suite.server,
          suite.org,
          [
            { name: 'Name', type: 'text' },
            { name: 'Score', type: 'integer' },
          ],
          { databaseId, name: `T${start + i}` },
        ),
      ),
    );
  }
}

const PAGE_OF_TABLES = `query($orgId: ID!, $databaseId: ID!) {
  database(orgId: $orgId, databaseId: $databaseId) {
    tables(first: 50) { data { id name database { id } schema { schemaVersion fields { id name type } uniqueRules { id } foreignKeys { id } } views { data { id } } } }
  }
}`;

/** An OAuth access token of the org's admin with exactly these scopes, as /oauth/token would write it. */
async function accessToken(scopes: readonly OAuthScope[]): Promise<string> {
  const { prisma, config } = suite.server;
  const client = await prisma.oAuthClient.create({
    data: { id: newId(), name: 'Graph probe', redirectUris: ['https://probe.example/cb'] },
  });
  const token = `wdsa_${newId()}${newId()}`.slice(0, 48);
  await prisma.oAuthToken.create({
    data: {
      id: newId(),
      kind: 'access',
      tokenHash: sha256Hex(token),
      familyId: newId(),
      clientId: client.id,
      userId: suite.org.adminUserId,
      scopes: [...scopes],
      audience: config.OAUTH_AUDIENCE,
      expiresAt: new Date(Date.now() + 600_000),
    },
  });
  return token;
}

async function tableWithRows(): Promise<TestTable> {
  const table = await createTable(suite.server, suite.org, [
    { name: 'Name', type: 'text' },
    { name: 'Score', type: 'integer' },
  ]);
  for (const [name, score] of [
    ['Ada', 3],
    ['Bob', 1],
    ['Cy', 2],
  ] as const) {
    expect((await createRow(suite.server, suite.org.adminKey, table, { Name: name, Score: score })).status).toBe(201);
  }
  return table;
}

const TABLE_ROWS = `query($orgId: ID!, $databaseId: ID!, $tableId: ID!, $where: JSON, $orderBy: [RowOrderInput!], $viewId: ID, $after: String) {
  table(orgId: $orgId, databaseId: $databaseId, tableId: $tableId) {
    name
    rows(first: 2, where: $where, orderBy: $orderBy, viewId: $viewId, after: $after) {
      data { id values history { data { fieldId version operation value } } }
      nextCursor hasMore
    }
  }
}`;

describe('the graph', () => {
  it('follows org → databases → tables → schema, views and rows in one request, answering what the root queries answer', async () => {
    const table = await tableWithRows();
    const response = await suite.server.graphql(
      `query($orgId: ID!) {
      org(orgId: $orgId) { databases(first: 100) { data { id tables(first: 1) { data { id database { id } schema { fields { name } } foreignKeys { id } uniqueRules { id }
        views(first: 1) { data { id } } rows(first: 5, orderBy: [{field: "Score", direction: "desc"}]) { data { values } hasMore } } } } } }
    }`,
      { orgId: suite.org.orgId },
      { token: suite.org.adminKey },
    );
    expect(response.status, response.text).toBe(200);
    expect(response.body.errors).toBeUndefined();
    const database = response.body.data.org.databases.data.find(
      (entry: { id: string }) => entry.id === table.databaseId,
    );
    const [found] = database.tables.data;
    expect(found).toMatchObject({
      id: table.tableId,
      database: { id: table.databaseId },
      foreignKeys: [],
      uniqueRules: [],
      views: { data: [] },
    });
    expect(found.schema.fields.map((field: { name: string }) => field.name)).toEqual(['Name', 'Score']);
    expect(found.rows.data.map((row: { values: Record<string, unknown> }) => row.values[table.fields.Score!])).toEqual([
      3, 2, 1,
    ]);
    const rest = await suite.server.request(
      'GET',
      `${table.path}/rows?orderBy=${encodeURIComponent(JSON.stringify([{ field: 'Score', direction: 'desc' }]))}&limit=5`,
      { token: suite.org.adminKey },
    );
    expect(rest.body.data.map((row: { values: unknown }) => row.values)).toEqual(
      found.rows.data.map((row: { values: unknown }) => row.values),
    );
  });

  it('pages Table.rows with cursors the REST listing accepts, and follows Row.history', async () => {
    const table = await tableWithRows();
    const variables = {
      orgId: table.orgId,
      databaseId: table.databaseId,
      tableId: table.tableId,
      orderBy: [{ field: 'Name', direction: 'asc' }],
    };
    const first = await suite.server.graphql(TABLE_ROWS, variables, { token: suite.org.adminKey });
    expect(first.body.errors).toBeUndefined();
    const page = first.body.data.table.rows;
    expect(page.hasMore).toBe(true);
    expect(page.data[0].history.data).toEqual(
      expect.arrayContaining([
        { fieldId: table.fields.Name, version: '1', operation: 'create', value: 'Ada' },
        { fieldId: table.fields.Score, version: '1', operation: 'create', value: 3 },
      ]),
    );
    const order = encodeURIComponent(JSON.stringify(variables.orderBy));
    const rest = await suite.server.request(
      'GET',
      `${table.path}/rows?orderBy=${order}&limit=2&cursor=${encodeURIComponent(page.nextCursor)}`,
      { token: suite.org.adminKey },
    );
    expect(rest.status, rest.text).toBe(200);
    expect(rest.body.data.map((row: { values: Record<string, unknown> }) => row.values[table.fields.Name!])).toEqual([
      'Cy',
    ]);
    const second = await suite.server.graphql(
      TABLE_ROWS,
      { ...variables, after: page.nextCursor },
      { token: suite.org.adminKey },
    );
    expect(second.body.data.table.rows).toMatchObject({
      hasMore: false,
      nextCursor: null,
      data: [{ id: rest.body.data[0].id }],
    });
  });

  it('validates Table.rows filters as the rows query does: VALIDATION_FAILED at the edge, with the problem path', async () => {
    const table = await tableWithRows();
    const variables = {
      orgId: table.orgId,
      databaseId: table.databaseId,
      tableId: table.tableId,
      where: { field: 'Nope', op: 'eq', value: 1 },
    };
    const response = await suite.server.graphql(TABLE_ROWS, variables, { token: suite.org.adminKey });
    expect(response.status).toBe(200);
    expect(response.body.data.table).toEqual({ name: expect.any(String), rows: null });
    expect(response.body.errors).toHaveLength(1);
    expect(response.body.errors[0]).toMatchObject({
      path: ['table', 'rows'],
      extensions: { code: 'VALIDATION_FAILED' },
    });
    expect(response.body.errors[0].extensions.details.problems[0].path).toEqual(['where', 'field']);
  });

  it('reads rows through a view only for those who may see it: another member gets RESOURCE_NOT_FOUND for a personal view', async () => {
    const table = await tableWithRows();
    const created = await suite.server.request('POST', `${table.path}/views`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: {
        expectedSchemaVersion: table.schemaVersion,
        name: 'Mine',
        visibility: 'personal',
        definition: definitionOf({ where: { field: 'Score', op: 'gte', value: 2 } }),
      },
    });
    expect(created.status, created.text).toBe(201);
    const variables = {
      orgId: table.orgId,
      databaseId: table.databaseId,
      tableId: table.tableId,
      viewId: created.body.id,
    };
    const own = await suite.server.graphql(TABLE_ROWS, variables, { token: suite.org.adminKey });
    expect(own.body.errors).toBeUndefined();
    expect(
      own.body.data.table.rows.data
        .map((row: { values: Record<string, unknown> }) => row.values[table.fields.Name!])
        .sort(),
    ).toEqual(['Ada', 'Cy']);
    const member = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    const other = await suite.server.graphql(TABLE_ROWS, variables, { token: member.apiKey });
    expect(other.body.data.table.rows).toBeNull();
    expect(other.body.errors[0]).toMatchObject({ path: ['table', 'rows'], extensions: { code: 'RESOURCE_NOT_FOUND' } });
  });
});

describe('authority at every edge', () => {
  it('refuses Table.rows to a credential without rows:read (INSUFFICIENT_SCOPE at that edge) and still answers the rest', async () => {
    const table = await tableWithRows();
    const token = await accessToken(['org:read', 'databases:read', 'tables:read', 'schema:read']);
    const response = await suite.server.graphql(
      `query($orgId: ID!) {
      org(orgId: $orgId) { databases(first: 100) { data { id tables(first: 1) { data { id schema { schemaVersion } rows(first: 1) { data { id } } } } } } }
    }`,
      { orgId: table.orgId },
      { token },
    );
    expect(response.status).toBe(200);
    const database = response.body.data.org.databases.data.find(
      (entry: { id: string }) => entry.id === table.databaseId,
    );
    expect(database.tables.data[0]).toEqual({ id: table.tableId, schema: { schemaVersion: 1 }, rows: null });
    const refusals = response.body.errors.filter(
      (error: { path: (string | number)[] }) => error.path.at(-1) === 'rows',
    );
    expect(refusals.length).toBeGreaterThan(0);
    for (const error of refusals)
      expect(error.extensions).toEqual({ code: 'INSUFFICIENT_SCOPE', details: { requiredScope: 'rows:read' } });
    expect(response.body.errors.length).toBe(refusals.length);
  });

  it('refuses Org.databases without databases:read and Row.history without history:read', async () => {
    const table = await tableWithRows();
    const token = await accessToken(['org:read', 'tables:read', 'rows:read']);
    const databases = await suite.server.graphql(
      'query($orgId: ID!) { org(orgId: $orgId) { name databases { data { id } } } }',
      { orgId: table.orgId },
      { token },
    );
    expect(databases.body.data.org).toEqual({ name: expect.any(String), databases: null });
    expect(databases.body.errors).toEqual([
      expect.objectContaining({
        path: ['org', 'databases'],
        extensions: { code: 'INSUFFICIENT_SCOPE', details: { requiredScope: 'databases:read' } },
      }),
    ]);
    const history = await suite.server.graphql(
      TABLE_ROWS,
      { orgId: table.orgId, databaseId: table.databaseId, tableId: table.tableId },
      { token },
    );
    expect(history.body.data.table.rows.data[0].history).toBeNull();
    expect(history.body.errors[0]).toMatchObject({
      path: ['table', 'rows', 'data', 0, 'history'],
      extensions: { code: 'INSUFFICIENT_SCOPE', details: { requiredScope: 'history:read' } },
    });
  });

  it('answers RESOURCE_NOT_FOUND to another org’s admin for this org’s ids, with no data', async () => {
    const table = await tableWithRows();
    const stranger = await createOrg(suite.server.prisma);
    const response = await suite.server.graphql(
      TABLE_ROWS,
      { orgId: table.orgId, databaseId: table.databaseId, tableId: table.tableId },
      { token: stranger.adminKey },
    );
    expect(response.body.data).toBeNull();
    expect(response.body.errors).toEqual([
      expect.objectContaining({ path: ['table'], extensions: { code: 'RESOURCE_NOT_FOUND' } }),
    ]);
    const own = await suite.server.graphql(
      TABLE_ROWS,
      { orgId: stranger.orgId, databaseId: table.databaseId, tableId: table.tableId },
      { token: stranger.adminKey },
    );
    expect(own.body.errors).toEqual([expect.objectContaining({ extensions: { code: 'RESOURCE_NOT_FOUND' } })]);
  });
});

describe('back-edges', () => {
  const VIEWS_BACK = `query($orgId: ID!, $databaseId: ID!, $tableId: ID!) {
    table(orgId: $orgId, databaseId: $databaseId, tableId: $tableId) {
      views(first: 20) { data { id table { id name database { id org { id name } } } } }
    }
  }`;

  async function tableWithViews(count: number): Promise<TestTable> {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    for (let index = 0; index < count; index += 1) {
      const view = await suite.server.request('POST', `${table.path}/views`, {
        token: suite.org.adminKey,
        idempotencyKey: idempotencyKey(),
        body: {
          name: `V${index}`,
          visibility: 'shared',
          expectedSchemaVersion: table.schemaVersion,
          definition: definitionOf(),
        },
      });
      expect(view.status, view.text).toBe(201);
    }
    return table;
  }

  it('follows View.table → Table.database → Database.org, answering what the root queries answer, batched per page', async () => {
    const [warmUp, small, large] = [await tableWithViews(1), await tableWithViews(2), await tableWithViews(12)];
    const org = await suite.server.graphql(
      'query($orgId: ID!) { org(orgId: $orgId) { id name } }',
      { orgId: suite.org.orgId },
      { token: suite.org.adminKey },
    );
    const read = async (table: TestTable, expected: number) => {
      const response = await suite.server.graphql(
        VIEWS_BACK,
        { orgId: table.orgId, databaseId: table.databaseId, tableId: table.tableId },
        { token: suite.org.adminKey },
      );
      expect(response.body.errors).toBeUndefined();
      const views = response.body.data.table.views.data;
      expect(views).toHaveLength(expected);
      for (const view of views) {
        expect(view.table).toEqual({
          id: table.tableId,
          name: expect.any(String),
          database: { id: table.databaseId, org: org.body.data.org },
        });
      }
    };
    await read(warmUp, 1);
    const forTwo = await countStatements(() => read(small, 2));
    const forTwelve = await countStatements(() => read(large, 12));
    expect(forTwelve).toBe(forTwo);
  });

  it('checks each back-edge’s root authority: Database.org needs org:read, View.table needs tables:read', async () => {
    const table = await tableWithViews(1);
    const token = await accessToken(['databases:read', 'rows:read']);
    const database = await suite.server.graphql(
      'query($orgId: ID!, $databaseId: ID!) { database(orgId: $orgId, databaseId: $databaseId) { id org { id } } }',
      { orgId: table.orgId, databaseId: table.databaseId },
      { token },
    );
    expect(database.body.data.database).toEqual({ id: table.databaseId, org: null });
    expect(database.body.errors).toEqual([
      expect.objectContaining({
        path: ['database', 'org'],
        extensions: { code: 'INSUFFICIENT_SCOPE', details: { requiredScope: 'org:read' } },
      }),
    ]);
    const views = await suite.server.request('GET', `${table.path}/views`, { token: suite.org.adminKey });
    const viewId = views.body.data[0].id;
    const view = await suite.server.graphql(
      `query($orgId: ID!, $databaseId: ID!, $tableId: ID!, $viewId: ID!) {
      view(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, viewId: $viewId) { id table { id } }
    }`,
      { orgId: table.orgId, databaseId: table.databaseId, tableId: table.tableId, viewId },
      { token },
    );
    expect(view.body.data.view).toEqual({ id: viewId, table: null });
    expect(view.body.errors).toEqual([
      expect.objectContaining({
        path: ['view', 'table'],
        extensions: { code: 'INSUFFICIENT_SCOPE', details: { requiredScope: 'tables:read' } },
      }),
    ]);
  });
});

describe('batching', () => {
  it('runs as many statements for a page of 50 tables with schemas, views and their database as for 5', async () => {
    const [warmUp, small, large] = [
      await createDatabase(suite.server, suite.org),
      await createDatabase(suite.server, suite.org),
      await createDatabase(suite.server, suite.org),
    ];
    await tablesIn(warmUp, 1);
    await tablesIn(small, 5);
    await tablesIn(large, 50);
    const read = async (databaseId: string, expected: number) => {
      const response = await suite.server.graphql(
        PAGE_OF_TABLES,
        { orgId: suite.org.orgId, databaseId },
        { token: suite.org.adminKey },
      );
      expect(response.body.errors).toBeUndefined();
      expect(response.body.data.database.tables.data).toHaveLength(expected);
      for (const table of response.body.data.database.tables.data) expect(table.schema.fields).toHaveLength(2);
    };
    // Loads what every later request finds ready (the cursor key); neither measured page has its schemas cached.
    await read(warmUp, 1);
    const forFive = await countStatements(() => read(small, 5));
    const forFifty = await countStatements(() => read(large, 50));
    expect(forFifty).toBe(forFive);
    expect(forFive).toBeLessThanOrEqual(10);
  });
});

describe('round trips of a read', () => {
  it("reads a table-scoped activity page and its scope in one statement besides the credential's", async () => {
    const table = await tableWithRows();
    const path = `/v1/orgs/${suite.org.orgId}/activity?tableId=${table.tableId}&category=records&limit=2`;
    const read = async () => {
      const response = await suite.server.request('GET', path, { token: suite.org.adminKey });
      expect(response.status, response.text).toBe(200);
      expect(response.body.scope.table.id).toBe(table.tableId);
      expect(response.body.data).toHaveLength(2);
    };
    await read();
    expect(await countStatements(read)).toBe(2);
  });
});

describe('document limits', () => {
  it('answers a document over the cost limit with 400 QUERY_TOO_COMPLEX before anything runs', async () => {
    const response = await suite.server.graphql(
      `query($orgId: ID!) {
      org(orgId: $orgId) { databases(first: 100) { data { tables(first: 100) { data { rows(first: 100) { data { id values } } } } } } }
    }`,
      { orgId: suite.org.orgId },
      { token: suite.org.adminKey },
    );
    expect(response.status).toBe(400);
    expect(response.body.data).toBeUndefined();
    expect(response.body.errors).toHaveLength(1);
    expect(response.body.errors[0]).toEqual({
      message: expect.stringMatching(/^Query Cost limit of 200000 exceeded, found \d+/),
      extensions: { code: 'QUERY_TOO_COMPLEX', details: { limit: 'maxCost', max: 200_000 } },
    });
  });

  const NESTED_ROWS = `query($orgId: ID!, $n: Int) {
    org(orgId: $orgId) { databases(first: $n) { data { tables(first: $n) { data { rows(first: $n) { data { id values } } } } } } }
  }`;

  const expectTooCostly = (response: { status: number; body: any }) => {
    expect(response.status).toBe(400);
    expect(response.body.data).toBeUndefined();
    expect(response.body.errors).toEqual([
      {
        message: expect.stringMatching(/^Query Cost limit of 200000 exceeded, found \d+\.$/),
        extensions: { code: 'QUERY_TOO_COMPLEX', details: { limit: 'maxCost', max: 200_000 } },
      },
    ]);
  };

  it('costs an omitted `first` as the default page of 50: 50 × 50 × 50 rows is over the limit', async () => {
    expectTooCostly(
      await suite.server.graphql(
        `query($orgId: ID!) {
      org(orgId: $orgId) { databases { data { tables { data { rows { data { id values } } } } } } }
    }`,
        { orgId: suite.org.orgId },
        { token: suite.org.adminKey },
      ),
    );
  });

  it('costs `first: $n` by the variable’s value, or by the operation’s default for it', async () => {
    expectTooCostly(
      await suite.server.graphql(NESTED_ROWS, { orgId: suite.org.orgId, n: 100 }, { token: suite.org.adminKey }),
    );
    expectTooCostly(
      await suite.server.graphql(
        NESTED_ROWS.replace('$n: Int)', '$n: Int = 100)'),
        { orgId: suite.org.orgId },
        { token: suite.org.adminKey },
      ),
    );
    const small = await suite.server.graphql(
      NESTED_ROWS,
      { orgId: suite.org.orgId, n: 2 },
      { token: suite.org.adminKey },
    );
    expect(small.status, small.text).toBe(200);
    expect(small.body.errors).toBeUndefined();
  });

  it('counts a root list’s `limit` the same way: 100 databases × 100 tables × 30 rows is over the limit', async () => {
    expectTooCostly(
      await suite.server.graphql(
        `query($orgId: ID!, $limit: Int) {
      databases(orgId: $orgId, limit: $limit) { data { tables(first: 100) { data { rows(first: 30) { data { id } } } } } }
    }`,
        { orgId: suite.org.orgId, limit: 100 },
        { token: suite.org.adminKey },
      ),
    );
  });

  it('lets the documented walk through: 10 databases × 50 tables × (schema, 20 views, 20 rows)', async () => {
    await tableWithRows();
    const response = await suite.server.graphql(
      `query($orgId: ID!) {
      org(orgId: $orgId) { databases(first: 10) { data { id tables(first: 50) { data { id schema { schemaVersion fields { id name type } }
        views(first: 20) { data { id name } } rows(first: 20) { data { id values } } } } } } }
    }`,
      { orgId: suite.org.orgId },
      { token: suite.org.adminKey },
    );
    expect(response.status, response.text).toBe(200);
    expect(response.body.errors).toBeUndefined();
    expect(response.body.data.org.databases.data.length).toBeGreaterThan(0);
  });

  it('answers a document over the depth limit with 400 QUERY_TOO_COMPLEX', async () => {
    const hops = (levels: number): string =>
      levels === 0 ? 'id' : `database { tables { data { ${hops(levels - 1)} } } }`;
    const response = await suite.server.graphql(
      `query($orgId: ID!) { org(orgId: $orgId) { databases { data { tables { data { ${hops(3)} } } } } } }`,
      { orgId: suite.org.orgId },
      { token: suite.org.adminKey },
    );
    expect(response.status).toBe(400);
    expect(response.body.errors).toEqual([
      {
        message: 'Query depth limit of 12 exceeded, found 15.',
        extensions: { code: 'QUERY_TOO_COMPLEX', details: { limit: 'maxDepth', max: 12 } },
      },
    ]);
  });
});

describe('GraphiQL over HTTP', () => {
  it('answers a browser’s GET /graphql with a page whose assets the service serves itself', async () => {
    const page = await suite.server.request('GET', '/graphql', { headers: { accept: 'text/html' } });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const assets = [...page.text.matchAll(/\/graphql\/assets\/[a-z.]+\.(?:js|css)/g)].map((match) => match[0]);
    expect(new Set(assets)).toEqual(
      new Set([
        '/graphql/assets/graphiql.css',
        '/graphql/assets/graphiql.js',
        '/graphql/assets/editor.worker.js',
        '/graphql/assets/json.worker.js',
        '/graphql/assets/graphql.worker.js',
      ]),
    );
    expect(page.text).not.toMatch(/unpkg|https?:\/\/(?!www\.w3\.org)/);
    const script = await suite.server.request('GET', '/graphql/assets/graphiql.js');
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    const missing = await suite.server.request('GET', '/graphql/assets/nope.js');
    expect(missing.status).toBe(404);
    expect(missing.body.errors).toEqual([
      { message: 'No such GraphiQL asset.', extensions: { code: 'RESOURCE_NOT_FOUND', requestId: expect.any(String) } },
    ]);
  });
});
