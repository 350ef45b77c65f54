import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { columnOf, rowsTableOf } from '../src/data/identifiers.ts';
import { newId } from '../src/kernel/ids.ts';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { addForeignKey, addUniqueRule, createRow, createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Batch failures that only the database used to catch (conditional rules, key handovers, referenced rows, keys
 * taken mid-batch) are reported by operation index, and the batch still writes nothing.
 */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;

function batch(table: TestTable, operations: unknown[]) {
  return suite.server.request('POST', `${table.path}/rows/batch`, {
    token: admin(),
    idempotencyKey: idempotencyKey(),
    body: { expectedSchemaVersion: table.schemaVersion, operations },
  });
}

async function rowsOf(table: TestTable): Promise<{ id: string; version: string; values: Record<string, unknown> }[]> {
  const response = await suite.server.request('GET', `${table.path}/rows?limit=100`, { token: admin() });
  expect(response.status, response.text).toBe(200);
  return response.body.data;
}

async function created(table: TestTable, values: Record<string, unknown>) {
  const response = await createRow(suite.server, admin(), table, values);
  expect(response.status, response.text).toBe(201);
  return response.body.row as { id: string; version: string; values: Record<string, unknown> };
}

describe('POST …/rows/batch: failures reported by index', () => {
  it('checks a conditional rule inside its where, against the table and within the batch (409 by index)', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'Qty', type: 'integer' },
      { name: 'Live', type: 'boolean' },
    ]);
    const rule = await addUniqueRule(suite.server, admin(), table, {
      fieldIds: ['Qty'],
      where: { field: 'Live', op: 'eq', value: true },
    });
    expect(rule.job.state).toBe('succeeded');
    const existing = await created(rule.table, { Qty: 1, Live: true });
    const moving = await created(rule.table, { Qty: 5, Live: true });
    const response = await batch(rule.table, [
      { op: 'create', values: { Qty: 1, Live: false } },
      { op: 'create', values: { Qty: 1, Live: true } },
      { op: 'create', values: { Qty: 2, Live: true } },
      { op: 'create', values: { Qty: 2, Live: true } },
      { op: 'update', rowId: moving.id, expectedVersion: '1', values: { Qty: 6 } },
      { op: 'create', values: { Qty: 5, Live: true } },
    ]);
    expectError(response, 409, 'UNIQUE_CONFLICT');
    const details = { ruleId: rule.ruleId, fieldIds: [table.fields.Qty], fieldNames: ['Qty'] };
    expect(response.body.error.details.failures).toEqual([
      { index: 1, code: 'UNIQUE_CONFLICT', message: 'Another row already has these values in these fields.', details },
      {
        index: 3,
        code: 'UNIQUE_CONFLICT',
        message: expect.stringContaining('Operation 2'),
        details: { ...details, conflictsWith: 2 },
      },
    ]);
    expect(await rowsOf(rule.table)).toEqual([existing, moving]);
  });

  it('refuses updates that hand a key from one row to another (422 by index); a deleted row frees its key', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Code', type: 'text' }]);
    const rule = await addUniqueRule(suite.server, admin(), table, { fieldIds: ['Code'] });
    const [a, b, c] = [
      await created(rule.table, { Code: 'a' }),
      await created(rule.table, { Code: 'b' }),
      await created(rule.table, { Code: 'c' }),
    ];
    const swap = await batch(rule.table, [
      { op: 'update', rowId: a!.id, expectedVersion: '1', values: { Code: 'b' } },
      { op: 'update', rowId: b!.id, expectedVersion: '1', values: { Code: 'a' } },
    ]);
    expectError(swap, 422, 'VALIDATION_FAILED');
    expectProblemPaths(swap, [
      ['operations', 0, 'values'],
      ['operations', 1, 'values'],
    ]);
    expect(
      swap.body.error.details.failures.map((failure: { index: number; message: string }) => [
        failure.index,
        failure.message,
      ]),
    ).toEqual([
      [0, expect.stringContaining('operation 1')],
      [1, expect.stringContaining('operation 0')],
    ]);
    expect(await rowsOf(rule.table)).toEqual([a, b, c]);

    const freed = await batch(rule.table, [
      { op: 'delete', rowId: c!.id, expectedVersion: '1' },
      { op: 'update', rowId: a!.id, expectedVersion: '1', values: { Code: 'c' } },
    ]);
    expect(freed.status, freed.text).toBe(200);
  });

  it('refuses deleting a row, or changing its key, while another table references it (409 by index)', async () => {
    const parent = await createTable(suite.server, suite.org, [
      { name: 'Code', type: 'text', options: { maxLength: 20 } },
    ]);
    const rule = await addUniqueRule(suite.server, admin(), parent, { fieldIds: ['Code'] });
    const [p1, p2, p3] = [
      await created(rule.table, { Code: 'P1' }),
      await created(rule.table, { Code: 'P2' }),
      await created(rule.table, { Code: 'P3' }),
    ];
    const child = await createTable(
      suite.server,
      suite.org,
      [{ name: 'Ref', type: 'text', options: { maxLength: 20 } }],
      { databaseId: parent.databaseId, name: `Child ${newId().slice(-8)}` },
    );
    const key = await addForeignKey(suite.server, admin(), child, {
      fieldIds: ['Ref'],
      referencedTableId: parent.tableId,
      referencedRuleId: rule.ruleId,
    });
    expect(key.job.state).toBe('succeeded');
    await created(key.table, { Ref: 'P1' });
    await created(key.table, { Ref: 'P3' });

    const response = await batch(rule.table, [
      { op: 'delete', rowId: p2!.id, expectedVersion: '1' },
      { op: 'delete', rowId: p1!.id, expectedVersion: '1' },
      { op: 'update', rowId: p3!.id, expectedVersion: '1', values: { Code: 'P9' } },
    ]);
    expectError(response, 409, 'FOREIGN_KEY_CONFLICT');
    const details = {
      foreignKeyId: key.foreignKeyId,
      referencingTableId: child.tableId,
      fieldIds: [parent.fields.Code],
      fieldNames: ['Code'],
    };
    expect(response.body.error.details.failures).toEqual([
      { index: 1, code: 'FOREIGN_KEY_CONFLICT', message: expect.stringContaining('still reference'), details },
      { index: 2, code: 'FOREIGN_KEY_CONFLICT', message: expect.stringContaining('still reference'), details },
    ]);
    expect(await rowsOf(rule.table)).toEqual([p1, p2, p3]);
  });

  it('reports a key that a concurrent transaction commits between the checks and the write by its index (409)', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Code', type: 'text' }]);
    const rule = await addUniqueRule(suite.server, admin(), table, { fieldIds: ['Code'] });
    const rowsTable = rowsTableOf(table.databaseId, table.tableId);
    const other = new pg.Client({ connectionString: suite.server.database.url });
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query(
        `INSERT INTO ${rowsTable} (id, created_at, updated_at, ${columnOf(table.fields.Code!)}) VALUES ($1, now(), now(), 'k')`,
        [newId()],
      );
      const pending = batch(rule.table, [
        { op: 'create', values: { Code: 'j' } },
        { op: 'create', values: { Code: 'k' } },
      ]);
      // The batch's insert waits for this transaction's key (its statement text is longer than pg_stat_activity keeps).
      await expect
        .poll(
          async () =>
            (
              await other.query<{ n: number }>(
                `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`,
              )
            ).rows[0]!.n,
          { timeout: 30_000, interval: 25, message: 'the batch never waited on the concurrent key' },
        )
        .toBeGreaterThan(0);
      await other.query('COMMIT');
      const response = await pending;
      expectError(response, 409, 'UNIQUE_CONFLICT');
      expect(response.body.error.details.failures).toEqual([
        {
          index: 1,
          code: 'UNIQUE_CONFLICT',
          message: expect.any(String),
          details: { ruleId: rule.ruleId, fieldIds: [table.fields.Code], fieldNames: ['Code'] },
        },
      ]);
    } finally {
      await other.end();
    }
    expect((await rowsOf(rule.table)).map((row) => row.values[table.fields.Code!])).toEqual(['k']);
  });
});
