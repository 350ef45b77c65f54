import { describe, expect, it } from 'vitest';
import { expectError } from './helpers/expectations.ts';
import { addMember } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { definitionOf, viewClient, savedView } from './helpers/views.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/** Issue 18 §4: POST …/rows/query answers exactly as GET …/rows, with the query in the body. */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;
const views = viewClient(suite);

async function scoredTable(): Promise<TestTable> {
  const table = await createTable(suite.server, suite.org, [
    { name: 'Name', type: 'text' },
    { name: 'Score', type: 'integer' },
  ]);
  for (let index = 0; index < 7; index += 1) {
    const created = await createRow(suite.server, admin(), table, { Name: `Row ${index}`, Score: index % 3 });
    expect(created.status, created.text).toBe(201);
  }
  return table;
}

type Query = { where?: unknown; orderBy?: unknown; limit?: number; cursor?: string; viewId?: string };

function viaGet(table: TestTable, query: Query, token = admin()) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined) params.set(name, typeof value === 'object' ? JSON.stringify(value) : String(value));
  }
  return suite.server.request('GET', `${table.path}/rows?${params}`, { token });
}

const viaPost = (table: TestTable, query: Query, token = admin()) =>
  suite.server.request('POST', `${table.path}/rows/query`, { token, body: query });

/** Pages through both ways; each page must be the same, and a cursor of one serves the other. */
async function expectSamePages(table: TestTable, query: Query): Promise<number> {
  let cursor: string | undefined;
  let pages = 0;
  do {
    const got = await viaGet(table, { ...query, cursor });
    const posted = await viaPost(table, { ...query, ...(cursor === undefined ? {} : { cursor }) });
    expect(got.status, got.text).toBe(200);
    expect({ status: posted.status, body: posted.body }).toEqual({ status: 200, body: got.body });
    cursor = pages % 2 === 0 ? (posted.body.nextCursor ?? undefined) : (got.body.nextCursor ?? undefined);
    pages += 1;
  } while (cursor !== undefined);
  return pages;
}

describe('POST …/tables/{tableId}/rows/query', () => {
  it('answers as GET …/rows for a filter, an order and every cursor page', async () => {
    const table = await scoredTable();
    const query = {
      where: { field: 'Score', op: 'gte', value: 1 },
      orderBy: [{ field: 'Score', direction: 'desc' }],
      limit: 1,
    };
    expect(await expectSamePages(table, query)).toBe(4);
  });

  it('answers as GET …/rows through a saved view, for a viewer, without an Idempotency-Key', async () => {
    const table = await scoredTable();
    const view = savedView(
      await views.postView(table, {
        visibility: 'shared',
        definition: definitionOf({
          where: { field: 'Score', op: 'eq', value: 0 },
          orderBy: [{ field: 'Name', direction: 'asc' }],
        }),
      }),
    );
    expect(await expectSamePages(table, { viewId: view.id, limit: 1 })).toBe(3);
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    const asViewer = await viaPost(table, { viewId: view.id }, viewer.apiKey);
    expect({ status: asViewer.status, body: asViewer.body }).toEqual({
      status: 200,
      body: (await viaGet(table, { viewId: view.id })).body,
    });
  });

  it('takes a filter too large for a URL (which GET refuses with 431)', async () => {
    const table = await scoredTable();
    const names = [
      ...Array.from({ length: 700 }, (_, index) => `No such name ${String(index).padStart(12, '0')}`),
      'Row 4',
    ];
    const where = { field: 'Name', op: 'in', value: names };
    expectError(await viaGet(table, { where }), 431, 'HEADERS_TOO_LARGE');
    const posted = await viaPost(table, { where });
    expect(posted.status, posted.text).toBe(200);
    expect(posted.body.data.map((row: { values: Record<string, unknown> }) => row.values[table.fields.Name!])).toEqual([
      'Row 4',
    ]);
  });

  it('refuses a malformed body with 422 naming it, and an unknown member', async () => {
    const table = await scoredTable();
    const response = await viaPost(table, { limit: '2' as unknown as number });
    expectError(response, 422, 'VALIDATION_FAILED');
    expect(response.body.error.details.problems.map((problem: { path: unknown }) => problem.path)).toEqual([
      ['body', 'limit'],
    ]);
    expectError(
      await suite.server.request('POST', `${table.path}/rows/query`, { token: admin(), body: { filter: {} } }),
      422,
      'VALIDATION_FAILED',
    );
  });
});

describe('other methods on …/rows/query and …/rows/batch', () => {
  it('answers 405 with Allow: POST instead of treating the reserved segment as a row id', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    for (const [method, segment] of [
      ['GET', 'query'],
      ['PATCH', 'query'],
      ['DELETE', 'query'],
      ['GET', 'batch'],
    ] as const) {
      const response = await suite.server.request(method, `${table.path}/rows/${segment}`, {
        token: admin(),
        outsideContract: true,
      });
      expectError(response, 405, 'METHOD_NOT_ALLOWED');
      expect(response.headers.get('allow')).toBe('POST');
    }
    expect((await suite.server.request('GET', `${table.path}/rows`, { token: admin() })).status).toBe(200);
    expect((await suite.server.request('HEAD', `${table.path}/rows`, { token: admin() })).status).toBe(200);
  });
});
