import { describe, expect, it } from 'vitest';
import { RowBatchResponse } from '../src/contracts/rows-batch.ts';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import {
  addForeignKey,
  addUniqueRule,
  createRow,
  createTable,
  type FieldSpec,
  type TestTable,
} from './helpers/workspace.ts';

/** Issue 13: POST …/rows/batch and the batchRows mutation. */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;

const FIELDS: FieldSpec[] = [
  { name: 'Code', type: 'text' },
  { name: 'Qty', type: 'integer' },
];

function batch(
  table: TestTable,
  operations: unknown[],
  key = idempotencyKey(),
  expectedSchemaVersion = table.schemaVersion,
) {
  return suite.server.request('POST', `${table.path}/rows/batch`, {
    token: admin(),
    idempotencyKey: key,
    body: { expectedSchemaVersion, operations },
  });
}

async function rowsOf(table: TestTable): Promise<{ id: string; version: string; values: Record<string, unknown> }[]> {
  const response = await suite.server.request('GET', `${table.path}/rows?limit=100`, { token: admin() });
  expect(response.status, response.text).toBe(200);
  return response.body.data;
}

const historyCount = (table: TestTable): Promise<number> =>
  suite.server.prisma
    .$queryRawUnsafe<{ n: number }[]>(
      `SELECT count(*)::int AS n FROM d_${table.databaseId.toLowerCase()}.h_${table.tableId.toLowerCase()}`,
    )
    .then(([row]) => row!.n);
const events = (table: TestTable) =>
  suite.server.prisma.activityEvent.findMany({ where: { tableId: table.tableId, event: 'records.changed' } });

/** A table with a unique rule on Code (a default text field, so a hashed rule), at its new schema version. */
async function codedTable(): Promise<{ table: TestTable; ruleId: string }> {
  const table = await createTable(suite.server, suite.org, FIELDS);
  const added = await addUniqueRule(suite.server, admin(), table, { fieldIds: ['Code'] });
  expect(added.job.state).toBe('succeeded');
  return { table: added.table, ruleId: added.ruleId };
}

describe('POST …/rows/batch', () => {
  it('applies creates, updates, deletes and upserts in request order with outcomes, history and one records.changed event', async () => {
    const { table, ruleId } = await codedTable();
    const a = (await createRow(suite.server, admin(), table, { Code: 'a', Qty: 1 })).body.row;
    const b = (await createRow(suite.server, admin(), table, { Code: 'b', Qty: 2 })).body.row;
    const c = (await createRow(suite.server, admin(), table, { Code: 'c', Qty: 3 })).body.row;
    const history = await historyCount(table);
    const response = await batch(table, [
      { op: 'create', values: { Code: 'new', Qty: 10 } },
      { op: 'update', rowId: a.id, expectedVersion: '1', values: { Qty: 11 } },
      { op: 'delete', rowId: b.id, expectedVersion: '1' },
      { op: 'upsert', matchOn: ruleId, values: { Code: 'c', Qty: 33 } },
      { op: 'upsert', matchOn: ruleId, values: { Code: 'd', Qty: 4 } },
    ]);
    expect(response.status, response.text).toBe(200);
    const body = RowBatchResponse.parse(response.body);
    expect(body.results.map((result) => result.outcome)).toEqual([
      'created',
      'updated',
      'deleted',
      'updated',
      'created',
    ]);
    expect(body.results[1]!.row).toMatchObject({
      id: a.id,
      version: '2',
      values: { [table.fields.Code!]: 'a', [table.fields.Qty!]: 11 },
    });
    expect(body.results[2]!.row).toMatchObject({ id: b.id, version: '2' });
    expect(body.results[3]!.row).toMatchObject({
      id: c.id,
      version: '2',
      values: { [table.fields.Code!]: 'c', [table.fields.Qty!]: 33 },
    });
    const rows = await rowsOf(table);
    expect(rows.map((row) => row.values[table.fields.Code!]).sort()).toEqual(['a', 'c', 'd', 'new']);
    // 2 creates × 2 cells, 2 updates × 1 changed cell, 1 delete × 2 cells.
    expect(await historyCount(table)).toBe(history + 4 + 2 + 2);
    const batchEvents = (await events(table)).filter((event) => event.mutationId === body.mutationId);
    expect(
      batchEvents.map((event) => ({ affectedRows: event.affectedRows, rowId: event.rowId, category: event.category })),
    ).toEqual([{ affectedRows: 5, rowId: null, category: 'records' }]);
  });

  it('answers unchanged (no version, no history, no event) for an update or upsert that changes nothing', async () => {
    const { table, ruleId } = await codedTable();
    const a = (await createRow(suite.server, admin(), table, { Code: 'a', Qty: 1 })).body.row;
    const before = { history: await historyCount(table), events: (await events(table)).length };
    const response = await batch(table, [{ op: 'update', rowId: a.id, expectedVersion: '1', values: { Qty: 1 } }]);
    expect(response.status, response.text).toBe(200);
    expect(response.body.results).toEqual([{ row: a, outcome: 'unchanged' }]);
    const again = await batch(table, [{ op: 'upsert', matchOn: ruleId, values: { Code: 'a' } }]);
    expect(again.body.results).toEqual([{ row: a, outcome: 'unchanged' }]);
    expect({ history: await historyCount(table), events: (await events(table)).length }).toEqual(before);
  });

  it('writes nothing when one operation is invalid, and reports every failing operation by index (422 wins over 409)', async () => {
    const { table } = await codedTable();
    const a = (await createRow(suite.server, admin(), table, { Code: 'a', Qty: 1 })).body.row;
    const before = {
      rows: await rowsOf(table),
      history: await historyCount(table),
      events: (await events(table)).length,
    };
    const response = await batch(table, [
      { op: 'create', values: { Code: 'fine', Qty: 1 } },
      { op: 'create', values: { Code: 'bad', Qty: 'many' } },
      { op: 'update', rowId: a.id, expectedVersion: '7', values: { Qty: 2 } },
      { op: 'create', values: { Nope: 1 } },
      { op: 'create', values: { Code: 'a' } },
    ]);
    expectError(response, 422, 'VALIDATION_FAILED');
    const { failures, problems } = response.body.error.details;
    expect(failures.map((failure: { index: number; code: string }) => [failure.index, failure.code])).toEqual([
      [1, 'VALIDATION_FAILED'],
      [2, 'ROW_VERSION_CONFLICT'],
      [3, 'VALIDATION_FAILED'],
      [4, 'UNIQUE_CONFLICT'],
    ]);
    expect(failures[1].details).toEqual({ expectedVersion: '7', currentVersion: '1' });
    expect(problems.map((problem: { path: unknown[] }) => problem.path)).toEqual([
      ['operations', 1, 'values', 'Qty'],
      ['operations', 3, 'values', 'Nope'],
    ]);
    expect(response.body.error.message).toBe('4 of 5 operations failed; nothing was written.');
    expect({
      rows: await rowsOf(table),
      history: await historyCount(table),
      events: (await events(table)).length,
    }).toEqual(before);
  });

  it("answers 409 with the first conflict's code when every failure is a conflict: stale and missing rows, keys taken in the table and in the batch", async () => {
    const { table, ruleId } = await codedTable();
    const a = (await createRow(suite.server, admin(), table, { Code: 'a', Qty: 1 })).body.row;
    const response = await batch(table, [
      { op: 'create', values: { Code: 'x' } },
      { op: 'create', values: { Code: 'a' } },
      { op: 'update', rowId: a.id, expectedVersion: '2', values: { Qty: 5 } },
      { op: 'delete', rowId: '01J00000000000000000000000', expectedVersion: '1' },
      { op: 'create', values: { Code: 'x' } },
    ]);
    expectError(response, 409, 'UNIQUE_CONFLICT');
    expect(response.body.error.details.failures).toEqual([
      {
        index: 1,
        code: 'UNIQUE_CONFLICT',
        message: expect.any(String),
        details: { ruleId, fieldIds: [table.fields.Code], fieldNames: ['Code'] },
      },
      {
        index: 2,
        code: 'ROW_VERSION_CONFLICT',
        message: expect.any(String),
        details: { expectedVersion: '2', currentVersion: '1' },
      },
      {
        index: 3,
        code: 'ROW_VERSION_CONFLICT',
        message: 'The row does not exist (any more).',
        details: { expectedVersion: '1', currentVersion: null },
      },
      {
        index: 4,
        code: 'UNIQUE_CONFLICT',
        message: expect.any(String),
        details: { ruleId, fieldIds: [table.fields.Code], fieldNames: ['Code'], conflictsWith: 0 },
      },
    ]);
    expect(await rowsOf(table)).toEqual([a]);
  });

  it("frees a key within the batch: a deleted row's code can be taken by a new row", async () => {
    const { table } = await codedTable();
    const a = (await createRow(suite.server, admin(), table, { Code: 'a', Qty: 1 })).body.row;
    const response = await batch(table, [
      { op: 'delete', rowId: a.id, expectedVersion: '1' },
      { op: 'create', values: { Code: 'a', Qty: 2 } },
    ]);
    expect(response.status, response.text).toBe(200);
    expect((await rowsOf(table)).map((row) => row.values[table.fields.Qty!])).toEqual([2]);
  });

  it('refuses upserts on unknown or conditional rules, without the key, or on one row twice (422 with indexes)', async () => {
    const table = await createTable(suite.server, suite.org, [...FIELDS, { name: 'Live', type: 'boolean' }]);
    const conditional = await addUniqueRule(suite.server, admin(), table, {
      fieldIds: ['Qty'],
      where: { field: 'Live', op: 'eq', value: true },
    });
    const plain = await addUniqueRule(suite.server, admin(), conditional.table, { fieldIds: ['Code'] });
    const current = plain.table;
    const response = await batch(current, [
      { op: 'upsert', matchOn: '01J00000000000000000000000', values: { Code: 'a' } },
      { op: 'upsert', matchOn: conditional.ruleId, values: { Qty: 1, Live: true } },
      { op: 'upsert', matchOn: plain.ruleId, values: { Qty: 1 } },
      { op: 'upsert', matchOn: plain.ruleId, values: { Code: 'k' } },
      { op: 'upsert', matchOn: plain.ruleId, values: { Code: 'k', Qty: 2 } },
    ]);
    expectError(response, 422, 'VALIDATION_FAILED');
    expect(response.body.error.details.problems.map((problem: { path: unknown[] }) => problem.path)).toEqual([
      ['operations', 0, 'matchOn'],
      ['operations', 1, 'matchOn'],
      ['operations', 2, 'values'],
      ['operations', 4, 'values'],
    ]);
  });

  it('lets N parallel upserts of one key make exactly one row', async () => {
    const { table, ruleId } = await codedTable();
    const responses = await Promise.all(
      Array.from({ length: 8 }, (_, index) =>
        batch(table, [{ op: 'upsert', matchOn: ruleId, values: { Code: 'same', Qty: index } }]),
      ),
    );
    expect(responses.map((response) => response.status)).toEqual(Array(8).fill(200));
    const outcomes = responses.map((response) => response.body.results[0].outcome);
    expect(outcomes.filter((outcome) => outcome === 'created')).toHaveLength(1);
    const rows = await rowsOf(table);
    expect(rows).toHaveLength(1);
    expect(new Set(responses.map((response) => response.body.results[0].row.id))).toEqual(new Set([rows[0]!.id]));
  });

  it('lets one of 6 parallel batches creating the same 50 codes in different orders commit; the others get 409, none a 5xx', async () => {
    const { table } = await codedTable();
    const codes = Array.from({ length: 50 }, (_, index) => `code ${index}`);
    const orders = Array.from({ length: 6 }, (_, turn) =>
      codes.map((_, index) => codes[(index * (turn * 2 + 1)) % codes.length]!),
    );
    const responses = await Promise.all(
      orders.map((order) =>
        batch(
          table,
          order.map((code) => ({ op: 'create', values: { Code: code } })),
        ),
      ),
    );
    const statuses = responses.map((response) => response.status).sort();
    expect(statuses, responses.map((response) => response.text.slice(0, 300)).join('\n')).toEqual([
      200, 409, 409, 409, 409, 409,
    ]);
    for (const response of responses.filter((candidate) => candidate.status === 409)) {
      expect(['UNIQUE_CONFLICT', 'ROW_VERSION_CONFLICT']).toContain(response.body.error.code);
    }
    expect(await rowsOf(table)).toHaveLength(50);
  });

  it('replays a batch for its Idempotency-Key (success and refusal alike) and refuses the key with another batch', async () => {
    const { table } = await codedTable();
    const key = idempotencyKey();
    const operations = [
      { op: 'create', values: { Code: 'one' } },
      { op: 'create', values: { Code: 'two' } },
    ];
    const first = await batch(table, operations, key);
    expect(first.status, first.text).toBe(200);
    const replay = await batch(table, operations, key);
    expect({ status: replay.status, body: replay.body }).toEqual({ status: 200, body: first.body });
    expect(await rowsOf(table)).toHaveLength(2);
    expectError(await batch(table, [operations[0]], key), 409, 'IDEMPOTENCY_CONFLICT');

    const refusalKey = idempotencyKey();
    const refused = await batch(table, [{ op: 'create', values: { Code: 'one' } }], refusalKey);
    expectError(refused, 409, 'UNIQUE_CONFLICT');
    const replayed = await batch(table, [{ op: 'create', values: { Code: 'one' } }], refusalKey);
    expect({
      status: replayed.status,
      body: { ...replayed.body, error: { ...replayed.body.error, requestId: null } },
    }).toEqual({ status: 409, body: { ...refused.body, error: { ...refused.body.error, requestId: null } } });
  });

  it('refuses a stale expectedSchemaVersion (409), more than 1,000 operations and a malformed operation (422)', async () => {
    const { table } = await codedTable();
    expectError(
      await batch(table, [{ op: 'create', values: {} }], idempotencyKey(), table.schemaVersion - 1),
      409,
      'SCHEMA_VERSION_CONFLICT',
    );
    const tooMany = await batch(
      table,
      Array.from({ length: 1001 }, () => ({ op: 'create', values: {} })),
    );
    expectError(tooMany, 422, 'VALIDATION_FAILED');
    expectProblemPaths(tooMany, [['body', 'operations']]);
    const malformed = await batch(table, [
      { op: 'create', values: {} },
      { op: 'merge', values: {} },
      { op: 'update', rowId: 'x', values: {} },
    ]);
    expectError(malformed, 422, 'VALIDATION_FAILED');
    expect(await rowsOf(table)).toEqual([]);
  });
});

describe('batches on btree rules, foreign keys and autoNumber fields', () => {
  it('upserts through a btree rule, numbers new rows, and reports a missing reference by index (409)', async () => {
    const parent = await createTable(suite.server, suite.org, [
      { name: 'Code', type: 'text', options: { maxLength: 20 } },
      { name: 'Seq', type: 'autoNumber' },
    ]);
    const rule = await addUniqueRule(suite.server, admin(), parent, { fieldIds: ['Code'] });
    const current = rule.table;
    const seeded = await batch(current, [
      { op: 'create', values: { Code: 'P1' } },
      { op: 'upsert', matchOn: rule.ruleId, values: { Code: 'P2' } },
    ]);
    expect(seeded.status, seeded.text).toBe(200);
    expect(
      seeded.body.results.map(
        (result: { row: { values: Record<string, unknown> } }) => result.row.values[parent.fields.Seq!],
      ),
    ).toEqual([1, 2]);
    const upserted = await batch(current, [
      { op: 'upsert', matchOn: rule.ruleId, values: { Code: 'P1' } },
      { op: 'upsert', matchOn: rule.ruleId, values: { Code: 'P3' } },
    ]);
    expect(upserted.body.results.map((result: { outcome: string }) => result.outcome)).toEqual([
      'unchanged',
      'created',
    ]);
    expect(upserted.body.results[0].row.id).toBe(seeded.body.results[0].row.id);

    const child = await createTable(suite.server, suite.org, [{ name: 'Ref', type: 'text' }], {
      databaseId: parent.databaseId,
    });
    const key = await addForeignKey(suite.server, admin(), child, {
      fieldIds: ['Ref'],
      referencedTableId: parent.tableId,
      referencedRuleId: rule.ruleId,
    });
    expect(key.job.state).toBe('succeeded');
    const linked = await batch(key.table, [
      { op: 'create', values: { Ref: 'P1' } },
      { op: 'create', values: { Ref: 'nope' } },
      { op: 'create', values: {} },
    ]);
    expectError(linked, 409, 'FOREIGN_KEY_CONFLICT');
    expect(linked.body.error.details.failures).toEqual([
      {
        index: 1,
        code: 'FOREIGN_KEY_CONFLICT',
        message: expect.any(String),
        details: {
          foreignKeyId: key.foreignKeyId,
          fieldIds: [child.fields.Ref],
          fieldNames: ['Ref'],
          referencedTableId: parent.tableId,
        },
      },
    ]);
    expect(await rowsOf(key.table)).toEqual([]);
  });
});

describe('batchRows (GraphQL)', () => {
  it('runs the same batch as one mutation', async () => {
    const { table } = await codedTable();
    const response = await suite.server.graphql(
      `mutation($key: String!, $org: ID!, $db: ID!, $table: ID!, $input: BatchRowsInput!) {
      batchRows(idempotencyKey: $key, orgId: $org, databaseId: $db, tableId: $table, input: $input) { results { outcome row { id version } } mutationId }
    }`,
      {
        key: idempotencyKey(),
        org: table.orgId,
        db: table.databaseId,
        table: table.tableId,
        input: {
          expectedSchemaVersion: table.schemaVersion,
          operations: [
            { op: 'create', values: { Code: 'g' } },
            { op: 'create', values: { Code: 'g' } },
          ],
        },
      },
      { token: admin() },
    );
    expect(response.body.errors[0].extensions.code).toBe('UNIQUE_CONFLICT');
    expect(
      response.body.errors[0].extensions.details.failures.map((failure: { index: number }) => failure.index),
    ).toEqual([1]);
    const ok = await suite.server.graphql(
      `mutation($key: String!, $org: ID!, $db: ID!, $table: ID!, $input: BatchRowsInput!) {
      batchRows(idempotencyKey: $key, orgId: $org, databaseId: $db, tableId: $table, input: $input) { results { outcome row { version } } }
    }`,
      {
        key: idempotencyKey(),
        org: table.orgId,
        db: table.databaseId,
        table: table.tableId,
        input: { expectedSchemaVersion: table.schemaVersion, operations: [{ op: 'create', values: { Code: 'g' } }] },
      },
      { token: admin() },
    );
    expect(ok.body).toEqual({ data: { batchRows: { results: [{ outcome: 'created', row: { version: '1' } }] } } });
  });
});
