import { describe, expect, it } from 'vitest';
import { ID_PATTERN, newId } from '../src/kernel/ids.ts';
import { Page } from '../src/contracts/pages.ts';
import { HistoryEntryResponse, RowDeletionResponse, RowMutationResponse, RowResponse } from '../src/contracts/rows.ts';
import { expectError } from './helpers/expectations.ts';
import { addMember, createOrg, idempotencyKey } from './helpers/factories.ts';
import { appliedChange, type ChangeBody } from './helpers/schema-changes.ts';
import { useServerWithOrg, type Suite } from './helpers/suite.ts';
import {
  addForeignKey,
  addUniqueRule,
  createDatabase,
  createRow,
  createTable,
  type TestTable,
} from './helpers/workspace.ts';

/** POST …/rows/{rowId}/restore and the restoreRow mutation (docs/decisions/lifecycle.md, "Row restore"). */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;

let database: Promise<string> | undefined;

async function peopleTable(on: Suite = suite): Promise<TestTable> {
  if (on !== suite)
    return createTable(on.server, on.org, [
      { name: 'Name', type: 'text', required: true },
      { name: 'Age', type: 'integer' },
    ]);
  database ??= createDatabase(suite.server, suite.org);
  return createTable(
    suite.server,
    suite.org,
    [
      { name: 'Name', type: 'text', required: true, options: { maxLength: 100 } },
      { name: 'Age', type: 'integer' },
      { name: 'Notes', type: 'text' },
    ],
    { databaseId: await database },
  );
}

const rowPath = (table: TestTable, rowId: string) => `${table.path}/rows/${rowId}`;

function restore(
  table: TestTable,
  rowId: string,
  body: unknown,
  options: { key?: string; token?: string; on?: Suite } = {},
) {
  const on = options.on ?? suite;
  return on.server.request('POST', `${rowPath(table, rowId)}/restore`, {
    token: options.token ?? on.org.adminKey,
    idempotencyKey: options.key ?? idempotencyKey(),
    body,
  });
}

async function createdRow(table: TestTable, values: Record<string, unknown>, on: Suite = suite) {
  const response = await createRow(on.server, on.org.adminKey, table, values);
  expect(response.status, response.text).toBe(201);
  return RowMutationResponse.parse(response.body);
}

async function deletedRow(table: TestTable, rowId: string, expectedVersion: string, on: Suite = suite) {
  const response = await on.server.request('DELETE', rowPath(table, rowId), {
    token: on.org.adminKey,
    idempotencyKey: idempotencyKey(),
    body: { expectedVersion },
  });
  expect(response.status, response.text).toBe(200);
  return RowDeletionResponse.parse(response.body);
}

async function history(table: TestTable, rowId: string) {
  const response = await suite.server.request('GET', `${rowPath(table, rowId)}/history?limit=100`, { token: admin() });
  expect(response.status, response.text).toBe(200);
  return Page(HistoryEntryResponse).parse(response.body).data;
}

async function rowIds(table: TestTable): Promise<string[]> {
  const response = await suite.server.request('GET', `${table.path}/rows`, { token: admin() });
  expect(response.status, response.text).toBe(200);
  return Page(RowResponse)
    .parse(response.body)
    .data.map((row) => row.id);
}

/** Applies a schema change that must succeed; the table at its new version with its fields re-read. */
const changed = (table: TestTable, change: ChangeBody) => appliedChange(suite, table, change);

describe('POST …/rows/{rowId}/restore', () => {
  it('brings the row back with its old id, last values and createdAt, as the version after its deletion', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Ada', Age: 36 });
    const patched = await suite.server.request('PATCH', rowPath(table, created.row.id), {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1', values: { Notes: 'first programmer' } },
    });
    expect(patched.status, patched.text).toBe(200);
    const deletion = await deletedRow(table, created.row.id, '2');
    expect(deletion.version).toBe('3');

    const response = await restore(table, created.row.id, { expectedVersion: '3' });
    expect(response.status, response.text).toBe(200);
    const { row, mutationId } = RowMutationResponse.parse(response.body);
    expect(mutationId).toMatch(ID_PATTERN);
    expect(row).toEqual({
      id: created.row.id,
      version: '4',
      createdAt: created.row.createdAt,
      updatedAt: expect.any(String),
      values: { [table.fields.Name!]: 'Ada', [table.fields.Age!]: 36, [table.fields.Notes!]: 'first programmer' },
    });
    expect(row.updatedAt > created.row.createdAt).toBe(true);
    const read = await suite.server.request('GET', rowPath(table, row.id), { token: admin() });
    expect(RowResponse.parse(read.body)).toEqual(row);

    const entries = (await history(table, row.id)).filter((entry) => entry.version === '4');
    expect(
      entries
        .map(({ operation, value, mutationId: id }) => ({ operation, value, id }))
        .sort((a, b) => String(a.value).localeCompare(String(b.value))),
    ).toEqual(
      [36, 'Ada', 'first programmer']
        .map((value) => ({ operation: 'restore', value, id: mutationId }))
        .sort((a, b) => String(a.value).localeCompare(String(b.value))),
    );
    const events = await suite.server.prisma.activityEvent.findMany({
      where: { rowId: row.id, event: 'records.changed' },
      orderBy: { id: 'asc' },
    });
    expect(events.map((event) => [event.mutationId, event.summary]).at(-1)).toEqual([mutationId, 'Restored 1 row']);
    expect(events).toHaveLength(4);
  });

  it('replays the same key and body; the same key with another body is 409 IDEMPOTENCY_CONFLICT', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Bo' });
    await deletedRow(table, created.row.id, '1');
    const key = idempotencyKey();
    const first = await restore(table, created.row.id, { expectedVersion: '2' }, { key });
    expect(first.status, first.text).toBe(200);
    const replay = await restore(table, created.row.id, { expectedVersion: '2' }, { key });
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual(first.body);
    expectError(await restore(table, created.row.id, { expectedVersion: '3' }, { key }), 409, 'IDEMPOTENCY_CONFLICT');
    expect(await rowIds(table)).toEqual([created.row.id]);
  });

  it('answers 409 ROW_VERSION_CONFLICT for a version that is not the deletion, naming it', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Cy' });
    await deletedRow(table, created.row.id, '1');
    const stale = await restore(table, created.row.id, { expectedVersion: '1' });
    expectError(stale, 409, 'ROW_VERSION_CONFLICT');
    expect(stale.body.error.details).toEqual({ expectedVersion: '1', currentVersion: '2', deleted: true });
    expectError(
      await restore(table, created.row.id, { expectedVersion: '9999999999999999999' }),
      409,
      'ROW_VERSION_CONFLICT',
    );
    expect(await rowIds(table)).toEqual([]);
  });

  it('answers 409 ROW_VERSION_CONFLICT with deleted: false for a row that is not deleted, or was restored already', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Di' });
    const live = await restore(table, created.row.id, { expectedVersion: '1' });
    expectError(live, 409, 'ROW_VERSION_CONFLICT');
    expect(live.body.error.details).toEqual({ expectedVersion: '1', currentVersion: '1', deleted: false });
    await deletedRow(table, created.row.id, '1');
    expect((await restore(table, created.row.id, { expectedVersion: '2' })).status).toBe(200);
    const again = await restore(table, created.row.id, { expectedVersion: '2' });
    expectError(again, 409, 'ROW_VERSION_CONFLICT');
    expect(again.body.error.details).toEqual({ expectedVersion: '2', currentVersion: '3', deleted: false });
  });

  it('lets exactly one of two concurrent restores of the same deletion win', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Ed' });
    await deletedRow(table, created.row.id, '1');
    const responses = await Promise.all([1, 2].map(() => restore(table, created.row.id, { expectedVersion: '2' })));
    expect(responses.map((response) => response.status).sort()).toEqual([200, 409]);
    expectError(responses.find((response) => response.status === 409)!, 409, 'ROW_VERSION_CONFLICT');
    expect((await history(table, created.row.id)).filter((entry) => entry.operation === 'restore')).toHaveLength(3);
  });

  it('answers 404 for a row that never existed and for another org’s ids; 403 for a viewer', async () => {
    const table = await peopleTable();
    expectError(await restore(table, newId(), { expectedVersion: '1' }), 404, 'RESOURCE_NOT_FOUND');
    const created = await createdRow(table, { Name: 'Fay' });
    await deletedRow(table, created.row.id, '1');
    const other = await createOrg(suite.server.prisma);
    const foreign = await suite.server.request(
      'POST',
      `/v1/orgs/${other.orgId}/databases/${table.databaseId}/tables/${table.tableId}/rows/${created.row.id}/restore`,
      {
        token: other.adminKey,
        idempotencyKey: idempotencyKey(),
        body: { expectedVersion: '2' },
      },
    );
    expectError(foreign, 404, 'RESOURCE_NOT_FOUND');
    expectError(
      await restore(table, created.row.id, { expectedVersion: '2' }, { token: other.adminKey }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    expectError(
      await restore(table, created.row.id, { expectedVersion: '2' }, { token: viewer.apiKey }),
      403,
      'FORBIDDEN',
    );
    expect(await rowIds(table)).toEqual([]);
  });

  it('answers 422 for a malformed body and 409 SCHEMA_VERSION_CONFLICT for a stale expectedSchemaVersion', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Gil' });
    await deletedRow(table, created.row.id, '1');
    expectError(await restore(table, created.row.id, { expectedVersion: 2 }), 422, 'VALIDATION_FAILED');
    expectError(await restore(table, created.row.id, { expectedVersion: '2', extra: true }), 422, 'VALIDATION_FAILED');
    expectError(
      await restore(table, created.row.id, { expectedVersion: '2', expectedSchemaVersion: table.schemaVersion + 1 }),
      409,
      'SCHEMA_VERSION_CONFLICT',
    );
  });
});

describe('restore against today’s schema', () => {
  it('gives a field added since null and drops a field deleted since', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Hal', Age: 7, Notes: 'gone soon' });
    await deletedRow(table, created.row.id, '1');
    const withField = await changed(table, { kind: 'add_field', field: { name: 'Email', type: 'text' } });
    const now = await changed(withField, { kind: 'delete_field', fieldId: table.fields.Notes });
    const response = await restore(now, created.row.id, {
      expectedVersion: '2',
      expectedSchemaVersion: now.schemaVersion,
    });
    expect(response.status, response.text).toBe(200);
    expect(RowMutationResponse.parse(response.body).row.values).toEqual({
      [table.fields.Name!]: 'Hal',
      [table.fields.Age!]: 7,
      [withField.fields.Email!]: null,
    });
  });

  it('answers 422 VALIDATION_FAILED naming the field when a conversion no longer accepts the old value', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Ivy', Notes: 'not a number' });
    await deletedRow(table, created.row.id, '1');
    const now = await changed(table, { kind: 'convert_field', fieldId: table.fields.Notes, type: 'integer' });
    const refused = await restore(now, created.row.id, { expectedVersion: '2' });
    expectError(refused, 422, 'VALIDATION_FAILED');
    expect(refused.body.error.details.problems).toEqual([
      { path: ['values', table.fields.Notes], message: expect.any(String), fieldId: table.fields.Notes },
    ]);
    expect(await rowIds(now)).toEqual([]);
    expect((await history(now, created.row.id)).some((entry) => entry.operation === 'restore')).toBe(false);
  });

  it('answers 409 UNIQUE_CONFLICT when another row took its unique value meanwhile', async () => {
    const plain = await peopleTable();
    const { table, job } = await addUniqueRule(suite.server, admin(), plain, { fieldIds: [plain.fields.Name] });
    expect(job.state, JSON.stringify(job)).toBe('succeeded');
    const created = await createdRow(table, { Name: 'Jo' });
    await deletedRow(table, created.row.id, '1');
    await createdRow(table, { Name: 'Jo' });
    const refused = await restore(table, created.row.id, { expectedVersion: '2' });
    expectError(refused, 409, 'UNIQUE_CONFLICT');
    expect(refused.body.error.details).toMatchObject({ fieldIds: [table.fields.Name] });
    expect(await rowIds(table)).toHaveLength(1);
  });

  it('answers 409 FOREIGN_KEY_CONFLICT when the row it referenced is gone', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const parentPlain = await createTable(
      suite.server,
      suite.org,
      [{ name: 'Code', type: 'text', required: true, options: { maxLength: 20 } }],
      { databaseId },
    );
    const { table: parent, ruleId } = await addUniqueRule(suite.server, admin(), parentPlain, {
      fieldIds: [parentPlain.fields.Code],
    });
    const childPlain = await createTable(
      suite.server,
      suite.org,
      [{ name: 'Parent', type: 'text', options: { maxLength: 20 } }],
      { databaseId },
    );
    const { table: child, job } = await addForeignKey(suite.server, admin(), childPlain, {
      fieldIds: [childPlain.fields.Parent],
      referencedTableId: parent.tableId,
      referencedRuleId: ruleId,
    });
    expect(job.state, JSON.stringify(job)).toBe('succeeded');
    const parentRow = await createdRow(parent, { Code: 'P1' });
    const childRow = await createdRow(child, { Parent: 'P1' });
    await deletedRow(child, childRow.row.id, '1');
    await deletedRow(parent, parentRow.row.id, '1');
    const refused = await restore(child, childRow.row.id, { expectedVersion: '2' });
    expectError(refused, 409, 'FOREIGN_KEY_CONFLICT');
    expect(refused.body.error.details).toMatchObject({
      fieldIds: [child.fields.Parent],
      referencedTableId: parent.tableId,
    });
  });
});

describe('restoreRow through POST /graphql', () => {
  const mutation = `mutation($orgId: ID!, $databaseId: ID!, $tableId: ID!, $rowId: ID!, $key: String!, $input: RestoreRowInput!) {
    restoreRow(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, rowId: $rowId, idempotencyKey: $key, input: $input) {
      row { id version values } mutationId
    }
  }`;

  it('restores with the same rules: the row, then a version conflict for a second try', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Kit' });
    await deletedRow(table, created.row.id, '1');
    const variables = {
      orgId: table.orgId,
      databaseId: table.databaseId,
      tableId: table.tableId,
      rowId: created.row.id,
      input: { expectedVersion: '2' },
    };
    const done = await suite.server.graphql(mutation, { ...variables, key: idempotencyKey() }, { token: admin() });
    expect(done.status).toBe(200);
    expect(done.body.data.restoreRow.row).toEqual({
      id: created.row.id,
      version: '3',
      values: { ...created.row.values },
    });
    const again = await suite.server.graphql(mutation, { ...variables, key: idempotencyKey() }, { token: admin() });
    expect(again.body.errors[0].extensions).toMatchObject({
      code: 'ROW_VERSION_CONFLICT',
      details: { deleted: false },
    });
  });
});

describe('with a table row limit of 1 (TABLE_ROW_LIMIT)', () => {
  const limited = useServerWithOrg({ TABLE_ROW_LIMIT: '1' });

  it('answers 409 ROW_LIMIT_REACHED when the table filled up since the delete, and restores once there is room', async () => {
    const table = await peopleTable(limited);
    const created = await createdRow(table, { Name: 'Lu' }, limited);
    await deletedRow(table, created.row.id, '1', limited);
    const other = await createdRow(table, { Name: 'Mo' }, limited);
    const refused = await restore(table, created.row.id, { expectedVersion: '2' }, { on: limited });
    expectError(refused, 409, 'ROW_LIMIT_REACHED');
    expect(refused.body.error.details).toEqual({ limit: 1 });
    await deletedRow(table, other.row.id, '1', limited);
    expect((await restore(table, created.row.id, { expectedVersion: '2' }, { on: limited })).status).toBe(200);
  });
});
