import { beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/kernel/ids.ts';
import { Page } from '../src/contracts/pages.ts';
import { RowResponse } from '../src/contracts/rows.ts';
import { SavedViewResponse } from '../src/contracts/views.ts';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { addMember, idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/** Reading rows through a saved view (`GET …/rows?viewId=`), and views whose table changed after they were saved. */
const suite = useServerWithOrg();

const RowPage = Page(RowResponse);
type Row = ReturnType<typeof RowResponse.parse>;
type View = ReturnType<typeof SavedViewResponse.parse>;

const admin = () => suite.org.adminKey;
const definition = (overrides: Record<string, unknown> = {}) => ({
  columnOrder: [],
  columnWidths: {},
  frozenColumns: 0,
  hiddenColumns: [],
  query: {},
  ...overrides,
});

async function createView(on: TestTable, body: Record<string, unknown>, token = admin()): Promise<View> {
  const response = await suite.server.request('POST', `${on.path}/views`, {
    token,
    idempotencyKey: idempotencyKey(),
    body: {
      expectedSchemaVersion: on.schemaVersion,
      name: 'View',
      visibility: 'personal',
      definition: definition(),
      ...body,
    },
  });
  expect(response.status, response.text).toBe(201);
  return SavedViewResponse.parse(response.body);
}

const query = (parameters: Record<string, string | number>) =>
  `?${Object.entries(parameters)
    .map(([key, value]) => `${key}=${encodeURIComponent(String(value))}`)
    .join('&')}`;
const listRows = (on: TestTable, parameters: Record<string, string | number>, token = admin()) =>
  suite.server.request('GET', `${on.path}/rows${query(parameters)}`, { token });

async function page(on: TestTable, parameters: Record<string, string | number>) {
  const response = await listRows(on, parameters);
  expect(response.status, response.text).toBe(200);
  return RowPage.parse(response.body);
}

async function insertRows(on: TestTable, values: Record<string, unknown>[]): Promise<Row[]> {
  const rows: Row[] = [];
  for (const cells of values) {
    const response = await createRow(suite.server, admin(), on, cells);
    expect(response.status, response.text).toBe(201);
    rows.push(response.body.row);
  }
  return rows;
}

describe('GET …/rows?viewId=', () => {
  let table: TestTable;
  let rows: Record<string, Row>;
  let view: View;

  // Score has a tie (a, d) and a NULL (b) so that the view's order and filter are both visible in the result.
  beforeAll(async () => {
    table = await createTable(suite.server, suite.org, [
      { name: 'Name', type: 'text', options: { maxLength: 40 } },
      { name: 'Score', type: 'number' },
      { name: 'Note', type: 'text' },
    ]);
    const created = await insertRows(table, [
      { Name: 'a', Score: 3, Note: 'secret a' },
      { Name: 'b', Score: null, Note: 'secret b' },
      { Name: 'c', Score: 1, Note: 'secret c' },
      { Name: 'd', Score: 3, Note: 'secret d' },
      { Name: 'e', Score: 5, Note: 'secret e' },
    ]);
    rows = Object.fromEntries(created.map((row) => [row.values[table.fields.Name!] as string, row]));
    view = await createView(table, {
      definition: definition({
        hiddenColumns: [table.fields.Note],
        query: { where: { field: 'Score', op: 'gte', value: 2 }, orderBy: [{ field: 'Score', direction: 'desc' }] },
      }),
    });
  });

  /** A row as the view shows it: without the Note column. */
  const seen = (name: string): Row => {
    const { [table.fields.Note!]: _hidden, ...values } = rows[name]!.values;
    return { ...rows[name]!, values };
  };
  const names = (data: Row[]) => data.map((row) => row.values[table.fields.Name!]);

  it('applies the view’s filter and order and leaves its hidden columns out of values', async () => {
    const result = await page(table, { viewId: view.id });
    expect(result).toEqual({ data: [seen('e'), seen('a'), seen('d')], nextCursor: null, hasMore: false });
    for (const row of result.data)
      expect(Object.keys(row.values).sort()).toEqual([table.fields.Name, table.fields.Score].sort());
  });

  it('ANDs the request’s where with the view’s', async () => {
    const result = await page(table, {
      viewId: view.id,
      where: JSON.stringify({ field: 'Name', op: 'ne', value: 'a' }),
    });
    expect(result.data).toEqual([seen('e'), seen('d')]);
  });

  it('orders by the request’s orderBy instead of the view’s when one is given', async () => {
    const result = await page(table, {
      viewId: view.id,
      orderBy: JSON.stringify([{ field: 'Name', direction: 'asc' }]),
    });
    expect(names(result.data)).toEqual(['a', 'd', 'e']);
  });

  it('walks every matching row once with limit=1 pages', async () => {
    const walked: Row[] = [];
    let cursor: string | null = null;
    do {
      const current = await page(table, { viewId: view.id, limit: 1, ...(cursor ? { cursor } : {}) });
      expect(current.data.length).toBeLessThanOrEqual(1);
      expect(current.hasMore).toBe(current.nextCursor !== null);
      walked.push(...current.data);
      cursor = current.nextCursor;
    } while (cursor);
    expect(walked).toEqual([seen('e'), seen('a'), seen('d')]);
  });

  it('answers 400 CURSOR_INVALID for a cursor minted before the view changed', async () => {
    const changing = await createView(table, {
      definition: definition({ query: { where: { field: 'Score', op: 'isNotNull' } } }),
    });
    const first = await page(table, { viewId: changing.id, limit: 1 });
    expect(first.nextCursor).not.toBeNull();
    const renamed = await suite.server.request('PATCH', `${table.path}/views/${changing.id}`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1', name: 'Renamed' },
    });
    expect(renamed.status, renamed.text).toBe(200);
    expectError(
      await listRows(table, { viewId: changing.id, limit: 1, cursor: first.nextCursor! }),
      400,
      'CURSOR_INVALID',
    );
  });

  it('answers 404 RESOURCE_NOT_FOUND for another user’s personal view, and for no view at all', async () => {
    const member = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    expectError(await listRows(table, { viewId: view.id }, member.apiKey), 404, 'RESOURCE_NOT_FOUND');
    expectError(await listRows(table, { viewId: newId() }), 404, 'RESOURCE_NOT_FOUND');
  });
});

describe('a view whose table changed after it was saved', () => {
  let table: TestTable;
  let rows: Row[];
  let gone: string;
  let filtered: View;
  let hiding: View;
  let toFix: View;

  /**
   * There is no field-delete API yet (issue 5): remove a field the way it will — catalog entry and column gone,
   * schema version bumped.
   */
  async function removeField(fieldId: string) {
    const { prisma } = suite.server;
    await prisma.$executeRawUnsafe(
      `ALTER TABLE "d_${table.databaseId.toLowerCase()}"."t_${table.tableId.toLowerCase()}" DROP COLUMN "f_${fieldId.toLowerCase()}"`,
    );
    await prisma.field.delete({ where: { id: fieldId } });
    await prisma.dataTable.update({ where: { id: table.tableId }, data: { schemaVersion: { increment: 1 } } });
  }

  // Views saved while Gone and Memo existed; then both fields are removed (two schema versions later).
  beforeAll(async () => {
    table = await createTable(suite.server, suite.org, [
      { name: 'Name', type: 'text', options: { maxLength: 40 } },
      { name: 'Score', type: 'number' },
      { name: 'Gone', type: 'number' },
      { name: 'Memo', type: 'text' },
    ]);
    rows = await insertRows(table, [
      { Name: 'x', Score: 1, Gone: 7, Memo: 'm' },
      { Name: 'y', Score: -1, Gone: 8, Memo: 'n' },
    ]);
    gone = table.fields.Gone!;
    const filtersOnGone = definition({
      columnOrder: [table.fields.Name, gone],
      query: { where: { field: gone, op: 'gt', value: 1 } },
    });
    filtered = await createView(table, { name: 'Filters on Gone', definition: filtersOnGone });
    toFix = await createView(table, { name: 'To fix', definition: filtersOnGone });
    hiding = await createView(table, {
      name: 'Hides Memo',
      definition: definition({
        hiddenColumns: [table.fields.Memo],
        query: { where: { field: 'Score', op: 'gte', value: 0 } },
      }),
    });
    await removeField(gone);
    await removeField(table.fields.Memo!);
  });

  const getView = (id: string) => suite.server.request('GET', `${table.path}/views/${id}`, { token: admin() });

  it('still loads, listing what no longer fits in validationErrors', async () => {
    const read = await getView(filtered.id);
    expect(read.status, read.text).toBe(200);
    expect(SavedViewResponse.parse(read.body)).toEqual({
      ...filtered,
      validationErrors: [
        'definition.columnOrder[1]: is not a field of this table',
        `definition.query.where.field: must be the id or name of a field of this table; "${gone}" is neither`,
      ],
    });
  });

  it('answers 422 VALIDATION_FAILED for rows read through a view whose query no longer fits', async () => {
    const broken = await listRows(table, { viewId: filtered.id });
    expectError(broken, 422, 'VALIDATION_FAILED');
    expectProblemPaths(broken, [['definition', 'query', 'where', 'field']]);
  });

  it('reads rows through a view whose only problem is a removed hidden column', async () => {
    const read = await getView(hiding.id);
    expect(read.status, read.text).toBe(200);
    expect(SavedViewResponse.parse(read.body).validationErrors).toEqual([
      'definition.hiddenColumns[0]: is not a field of this table',
    ]);
    const result = await page(table, { viewId: hiding.id });
    expect(result.data.map((row) => row.values)).toEqual([{ [table.fields.Name!]: 'x', [table.fields.Score!]: 1 }]);
    expect(result.data[0]!.id).toBe(rows[0]!.id);
  });

  it('is fixed by a PATCH against the current schema version, after which it lists no problems', async () => {
    const current = table.schemaVersion + 2;
    const fixed = await suite.server.request('PATCH', `${table.path}/views/${toFix.id}`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: {
        expectedVersion: '1',
        expectedSchemaVersion: current,
        definition: definition({ query: { where: { field: 'Score', op: 'lt', value: 0 } } }),
      },
    });
    expect(fixed.status, fixed.text).toBe(200);
    expect(SavedViewResponse.parse(fixed.body)).toMatchObject({
      version: '2',
      schemaVersion: current,
      validationErrors: [],
    });
    expect((await page(table, { viewId: toFix.id })).data.map((row) => row.id)).toEqual([rows[1]!.id]);
  });
});
