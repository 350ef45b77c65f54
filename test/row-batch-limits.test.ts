import { describe, expect, it } from 'vitest';
import { expectError } from './helpers/expectations.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createTable, type TestTable } from './helpers/workspace.ts';

/** Issue 13: the row limit, the row size limit and the body limit apply to a batch as a whole. */
const ROW_LIMIT = 5;
const SIZE_LIMIT = 2048;
const BODY_LIMIT = 64 * 1024;
const suite = useServerWithOrg({
  TABLE_ROW_LIMIT: String(ROW_LIMIT),
  ROW_SIZE_LIMIT_BYTES: String(SIZE_LIMIT),
  BODY_LIMIT_BYTES: String(BODY_LIMIT),
});
const admin = () => suite.org.adminKey;

const notesTable = () => createTable(suite.server, suite.org, [{ name: 'Notes', type: 'longText' }]);
const creates = (count: number, prefix = 'row') =>
  Array.from({ length: count }, (_, index) => ({ op: 'create', values: { Notes: `${prefix} ${index}` } }));

function batch(table: TestTable, operations: unknown[]) {
  return suite.server.request('POST', `${table.path}/rows/batch`, {
    token: admin(),
    idempotencyKey: idempotencyKey(),
    body: { expectedSchemaVersion: table.schemaVersion, operations },
  });
}

async function rowsOf(table: TestTable): Promise<{ id: string; version: string }[]> {
  const response = await suite.server.request('GET', `${table.path}/rows?limit=100`, { token: admin() });
  expect(response.status, response.text).toBe(200);
  return response.body.data;
}

describe('a batch against the limits', () => {
  it('refuses a batch whose new rows pass the row limit (409 ROW_LIMIT_REACHED), writing none of them', async () => {
    const table = await notesTable();
    expect((await batch(table, creates(3))).status).toBe(200);
    const over = await batch(table, creates(3, 'more'));
    expectError(over, 409, 'ROW_LIMIT_REACHED');
    expect(over.body.error.details).toEqual({ limit: ROW_LIMIT });
    expect(await rowsOf(table)).toHaveLength(3);
    expect((await batch(table, creates(2, 'fits'))).status).toBe(200);
    expect(await rowsOf(table)).toHaveLength(ROW_LIMIT);
  });

  it('counts the net change: deletes in the batch make room for its creates', async () => {
    const table = await notesTable();
    expect((await batch(table, creates(ROW_LIMIT))).status).toBe(200);
    const [first, second] = await rowsOf(table);
    const swap = await batch(table, [
      { op: 'delete', rowId: first!.id, expectedVersion: '1' },
      { op: 'delete', rowId: second!.id, expectedVersion: '1' },
      ...creates(2, 'new'),
    ]);
    expect(swap.status, swap.text).toBe(200);
    expect(await rowsOf(table)).toHaveLength(ROW_LIMIT);
    expectError(await batch(table, creates(1, 'extra')), 409, 'ROW_LIMIT_REACHED');
  });

  it('refuses rows over the size limit with 413 ROW_SIZE_LIMIT naming each by index, on create and on the row an update leaves', async () => {
    const table = await notesTable();
    expect((await batch(table, creates(1))).status).toBe(200);
    const [row] = await rowsOf(table);
    const big = 'x'.repeat(SIZE_LIMIT);
    const response = await batch(table, [
      { op: 'create', values: { Notes: 'small' } },
      { op: 'create', values: { Notes: big } },
      { op: 'update', rowId: row!.id, expectedVersion: '1', values: { Notes: big } },
    ]);
    expectError(response, 413, 'ROW_SIZE_LIMIT');
    expect(
      response.body.error.details.failures.map((failure: { index: number; code: string }) => [
        failure.index,
        failure.code,
      ]),
    ).toEqual([
      [1, 'ROW_SIZE_LIMIT'],
      [2, 'ROW_SIZE_LIMIT'],
    ]);
    expect(await rowsOf(table)).toHaveLength(1);
  });

  it('refuses a body over the body limit with 413 PAYLOAD_TOO_LARGE', async () => {
    const table = await notesTable();
    const response = await batch(table, creates(1000, 'y'.repeat(100)));
    expectError(response, 413, 'PAYLOAD_TOO_LARGE');
    expect(await rowsOf(table)).toEqual([]);
  });
});
