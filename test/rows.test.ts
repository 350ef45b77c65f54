import { describe, expect, it } from 'vitest';
import { ID_PATTERN, newId } from '../src/kernel/ids.ts';
import { Page } from '../src/contracts/pages.ts';
import { HistoryEntryResponse, RowDeletionResponse, RowMutationResponse, RowResponse } from '../src/contracts/rows.ts';
import { expectError, expectProblemPaths, expectTimestamp } from './helpers/expectations.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { addUniqueRule, createDatabase, createRow, createTable, type TestTable } from './helpers/workspace.ts';

/** The row lifecycle over REST: create (with idempotency), cell history, update, delete, and their activity events. */
const suite = useServerWithOrg();

const HistoryPage = Page(HistoryEntryResponse);
type HistoryEntry = ReturnType<typeof HistoryEntryResponse.parse>;

const admin = () => suite.org.adminKey;

let database: Promise<string> | undefined;

/** A fresh table per test (so row counts and history are the test's own), all in one database. */
async function peopleTable(): Promise<TestTable> {
  database ??= createDatabase(suite.server, suite.org);
  return createTable(
    suite.server,
    suite.org,
    [
      { name: 'Name', type: 'text', required: true },
      { name: 'Age', type: 'integer' },
      { name: 'Notes', type: 'longText' },
    ],
    { databaseId: await database },
  );
}

const rowPath = (table: TestTable, rowId: string) => `${table.path}/rows/${rowId}`;

function patchRow(table: TestTable, rowId: string, body: unknown, key = idempotencyKey()) {
  return suite.server.request('PATCH', rowPath(table, rowId), { token: admin(), idempotencyKey: key, body });
}

function deleteRow(table: TestTable, rowId: string, body: unknown) {
  return suite.server.request('DELETE', rowPath(table, rowId), {
    token: admin(),
    idempotencyKey: idempotencyKey(),
    body,
  });
}

async function createdRow(table: TestTable, values: Record<string, unknown>) {
  const response = await createRow(suite.server, admin(), table, values);
  expect(response.status, response.text).toBe(201);
  return RowMutationResponse.parse(response.body);
}

async function historyPage(table: TestTable, rowId: string, query = '') {
  const response = await suite.server.request('GET', `${rowPath(table, rowId)}/history${query}`, { token: admin() });
  expect(response.status, response.text).toBe(200);
  return HistoryPage.parse(response.body);
}

async function listRows(table: TestTable) {
  const response = await suite.server.request('GET', `${table.path}/rows`, { token: admin() });
  expect(response.status, response.text).toBe(200);
  return Page(RowResponse).parse(response.body).data;
}

const rowActivityOf = (filter: { rowId?: string; tableId?: string }) =>
  suite.server.prisma.activityEvent.findMany({
    where: { ...filter, event: 'records.changed' },
    orderBy: { id: 'asc' },
  });

describe('POST …/rows (create row, spec 4.8)', () => {
  it('answers 201 {row, mutationId}: version 1, createdAt = updatedAt, every field keyed by id, null when empty', async () => {
    const table = await peopleTable();
    const response = await createRow(suite.server, admin(), table, { Name: 'Ada', [table.fields.Age!]: 36 });
    expect(response.status, response.text).toBe(201);
    const { row, mutationId } = RowMutationResponse.parse(response.body);
    expect(row.id).toMatch(ID_PATTERN);
    expect(mutationId).toMatch(ID_PATTERN);
    expect(row.version).toBe('1');
    expectTimestamp(row.createdAt);
    expect(row.updatedAt).toBe(row.createdAt);
    expect(row.values).toEqual({ [table.fields.Name!]: 'Ada', [table.fields.Age!]: 36, [table.fields.Notes!]: null });
    const read = await suite.server.request('GET', rowPath(table, row.id), { token: admin() });
    expect(read.status).toBe(200);
    expect(RowResponse.parse(read.body)).toEqual(row);
  });

  it('replays the same key and body with the identical status and body, and creates one row only', async () => {
    const table = await peopleTable();
    const key = idempotencyKey();
    const first = await createRow(suite.server, admin(), table, { Name: 'Once' }, key);
    expect(first.status, first.text).toBe(201);
    const replay = await createRow(suite.server, admin(), table, { Name: 'Once' }, key);
    expect(replay.status).toBe(201);
    expect(replay.text).toBe(first.text);
    expect((await listRows(table)).map((row) => row.id)).toEqual([first.body.row.id]);
  });

  it('applies a key sent eight times at once exactly once: the others replay it or are told it is in progress', async () => {
    const table = await peopleTable();
    const key = idempotencyKey();
    const responses = await Promise.all(
      Array.from({ length: 8 }, () => createRow(suite.server, admin(), table, { Name: 'Burst' }, key)),
    );
    const created = responses.filter((response) => response.status === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    expect(new Set(created.map((response) => response.text)).size).toBe(1);
    for (const response of responses.filter((candidate) => candidate.status !== 201)) {
      expectError(response, 409, 'IDEMPOTENCY_IN_PROGRESS');
      expect(response.headers.get('retry-after')).toBe('1');
    }
    expect((await listRows(table)).map((row) => row.id)).toEqual([created[0]!.body.row.id]);
    expect(await rowActivityOf({ tableId: table.tableId })).toHaveLength(1);
  });

  it('records a 4xx outcome and replays it for the same key and body', async () => {
    const table = await peopleTable();
    const key = idempotencyKey();
    const stale = { expectedSchemaVersion: table.schemaVersion + 1, values: { Name: 'Later' } };
    const first = await suite.server.request('POST', `${table.path}/rows`, {
      token: admin(),
      idempotencyKey: key,
      body: stale,
    });
    expectError(first, 409, 'SCHEMA_VERSION_CONFLICT');
    const again = await suite.server.request('POST', `${table.path}/rows`, {
      token: admin(),
      idempotencyKey: key,
      body: stale,
    });
    expect({ status: again.status, error: again.body.error.code, details: again.body.error.details }).toEqual({
      status: 409,
      error: 'SCHEMA_VERSION_CONFLICT',
      details: first.body.error.details,
    });
    expect(await listRows(table)).toHaveLength(0);
  });

  it('answers 409 IDEMPOTENCY_CONFLICT when the key comes back with a different body, and writes nothing', async () => {
    const table = await peopleTable();
    const key = idempotencyKey();
    expect((await createRow(suite.server, admin(), table, { Name: 'First' }, key)).status).toBe(201);
    expectError(await createRow(suite.server, admin(), table, { Name: 'Second' }, key), 409, 'IDEMPOTENCY_CONFLICT');
    expect(await listRows(table)).toHaveLength(1);
  });

  it('applies a key again once its record has expired, and records the new outcome in its place', async () => {
    const table = await peopleTable();
    const key = idempotencyKey();
    const first = await createRow(suite.server, admin(), table, { Name: 'Again' }, key);
    expect(first.status, first.text).toBe(201);
    const { count } = await suite.server.prisma.idempotencyRecord.updateMany({
      where: { key },
      data: { expiresAt: new Date(Date.now() - 1_000) },
    });
    expect(count).toBe(1);
    const second = await createRow(suite.server, admin(), table, { Name: 'Again' }, key);
    expect(second.status, second.text).toBe(201);
    expect(second.body.row.id).not.toBe(first.body.row.id);
    const replay = await createRow(suite.server, admin(), table, { Name: 'Again' }, key);
    expect(replay.text).toBe(second.text);
    expect((await listRows(table)).map((row) => row.id).sort()).toEqual([first.body.row.id, second.body.row.id].sort());
  });

  it('answers 400 BAD_REQUEST without an Idempotency-Key', async () => {
    const table = await peopleTable();
    const response = await suite.server.request('POST', `${table.path}/rows`, {
      token: admin(),
      body: { expectedSchemaVersion: table.schemaVersion, values: { Name: 'Keyless' } },
    });
    expectError(response, 400, 'BAD_REQUEST');
    expect(await listRows(table)).toHaveLength(0);
  });

  it('answers 409 SCHEMA_VERSION_CONFLICT when a unique rule moved the schema on since the client read it', async () => {
    const table = await peopleTable();
    const rule = await addUniqueRule(suite.server, admin(), table, { fieldIds: [table.fields.Age] });
    expect(rule.job, JSON.stringify(rule.job)).toMatchObject({ state: 'succeeded', result: { schemaVersion: 2 } });
    const stale = await createRow(suite.server, admin(), table, { Name: 'Late' });
    expectError(stale, 409, 'SCHEMA_VERSION_CONFLICT');
    expect(stale.body.error.details).toEqual({ expectedSchemaVersion: 1, currentSchemaVersion: 2 });
    expect(await listRows(table)).toHaveLength(0);
  });

  it('answers 409 SCHEMA_VERSION_CONFLICT for a version the table has not reached', async () => {
    const table = await peopleTable();
    const ahead = await createRow(
      suite.server,
      admin(),
      { ...table, schemaVersion: table.schemaVersion + 1 },
      { Name: 'Early' },
    );
    expectError(ahead, 409, 'SCHEMA_VERSION_CONFLICT');
    expect(ahead.body.error.details).toEqual({ expectedSchemaVersion: 2, currentSchemaVersion: 1 });
  });

  it('reports the same conflict through POST /graphql', async () => {
    const table = await peopleTable();
    const response = await suite.server.graphql(
      `mutation($orgId: ID!, $databaseId: ID!, $tableId: ID!, $key: String!, $input: CreateRowInput!) {
        createRow(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, idempotencyKey: $key, input: $input) { mutationId }
      }`,
      {
        orgId: table.orgId,
        databaseId: table.databaseId,
        tableId: table.tableId,
        key: idempotencyKey(),
        input: { expectedSchemaVersion: table.schemaVersion + 1, values: { Name: 'Graph' } },
      },
      { token: admin() },
    );
    expect(response.status).toBe(200);
    expect(response.body.data).toBeNull();
    expect(response.body.errors[0].extensions).toMatchObject({
      code: 'SCHEMA_VERSION_CONFLICT',
      details: { expectedSchemaVersion: 2, currentSchemaVersion: 1 },
    });
  });
});

describe('GET …/rows/{rowId}/history (cell history)', () => {
  it('starts with one create entry per field, attributed to the caller and the create mutation', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Ada', Age: 36 });
    const page = await historyPage(table, created.row.id);
    expect(page.hasMore).toBe(false);
    expect(page.nextCursor).toBeNull();
    const actor = { id: suite.org.adminUserId, kind: 'user', name: 'Ada Admin' };
    expect(page.data.map(({ changedAt: _changedAt, ...entry }) => entry)).toEqual(
      expect.arrayContaining([
        {
          rowId: created.row.id,
          fieldId: table.fields.Name,
          version: '1',
          operation: 'create',
          value: 'Ada',
          mutationId: created.mutationId,
          actor,
        },
        {
          rowId: created.row.id,
          fieldId: table.fields.Age,
          version: '1',
          operation: 'create',
          value: 36,
          mutationId: created.mutationId,
          actor,
        },
        {
          rowId: created.row.id,
          fieldId: table.fields.Notes,
          version: '1',
          operation: 'create',
          value: null,
          mutationId: created.mutationId,
          actor,
        },
      ]),
    );
    expect(page.data).toHaveLength(3);
    for (const entry of page.data) expect(entry.changedAt).toBe(created.row.createdAt);
  });

  it('adds exactly one update entry for the one cell that changed, newest first', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Ada', Age: 36 });
    // Name is sent with its unchanged value: it must not appear in the history as a change.
    const patched = await patchRow(table, created.row.id, { expectedVersion: '1', values: { Name: 'Ada', Age: 37 } });
    expect(patched.status, patched.text).toBe(200);
    const page = await historyPage(table, created.row.id);
    expect(page.data).toHaveLength(4);
    expect(page.data[0]).toMatchObject({
      fieldId: table.fields.Age,
      version: '2',
      operation: 'update',
      value: 37,
      mutationId: patched.body.mutationId,
    });
    expect(page.data.slice(1).map((entry) => entry.version)).toEqual(['1', '1', '1']);
  });

  it('pages with limit=2 through every entry once, in order, and stays readable after the row is deleted', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Ada' });
    expect(
      (await patchRow(table, created.row.id, { expectedVersion: '1', values: { Notes: 'first note' } })).status,
    ).toBe(200);
    const deleted = await deleteRow(table, created.row.id, { expectedVersion: '2' });
    expect(deleted.status, deleted.text).toBe(200);

    const full = await historyPage(table, created.row.id, '?limit=100');
    expect(full.data).toHaveLength(3 + 1 + 3);
    const deletions = full.data.slice(0, 3);
    expect(
      deletions.map(({ operation, version, value, mutationId }) => ({ operation, version, value, mutationId })),
    ).toEqual(Array(3).fill({ operation: 'delete', version: '3', value: null, mutationId: deleted.body.mutationId }));

    const walked: HistoryEntry[] = [];
    let cursor: string | null = null;
    do {
      const page = await historyPage(
        table,
        created.row.id,
        `?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      expect(page.data.length).toBeLessThanOrEqual(2);
      expect(page.hasMore).toBe(page.nextCursor !== null);
      walked.push(...page.data);
      cursor = page.nextCursor;
    } while (cursor);
    expect(walked).toEqual(full.data);

    expectError(
      await suite.server.request('GET', rowPath(table, created.row.id), { token: admin() }),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });

  it('answers 404 RESOURCE_NOT_FOUND for a row that never existed', async () => {
    const table = await peopleTable();
    const response = await suite.server.request('GET', `${rowPath(table, newId())}/history`, { token: admin() });
    expectError(response, 404, 'RESOURCE_NOT_FOUND');
  });
});

describe('PATCH …/rows/{rowId}', () => {
  it('answers 200 {row, mutationId} with version 2, the changed cell and the others kept', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Ada', Age: 36 });
    const response = await patchRow(table, created.row.id, {
      expectedVersion: '1',
      values: { [table.fields.Notes!]: 'Likes engines' },
    });
    expect(response.status, response.text).toBe(200);
    const { row, mutationId } = RowMutationResponse.parse(response.body);
    expect(mutationId).not.toBe(created.mutationId);
    expect(row).toMatchObject({ id: created.row.id, version: '2', createdAt: created.row.createdAt });
    expect(row.updatedAt >= row.createdAt).toBe(true);
    expect(row.values).toEqual({
      [table.fields.Name!]: 'Ada',
      [table.fields.Age!]: 36,
      [table.fields.Notes!]: 'Likes engines',
    });
  });

  it('answers 409 ROW_VERSION_CONFLICT for a stale expectedVersion, naming both versions', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Ada' });
    expect((await patchRow(table, created.row.id, { expectedVersion: '1', values: { Age: 1 } })).status).toBe(200);
    const stale = await patchRow(table, created.row.id, { expectedVersion: '1', values: { Age: 2 } });
    expectError(stale, 409, 'ROW_VERSION_CONFLICT');
    expect(stale.body.error.details).toEqual({ expectedVersion: '1', currentVersion: '2' });
  });

  it('answers 409 for a well-formed 19-digit version beyond any stored one', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Ada' });
    const response = await patchRow(table, created.row.id, {
      expectedVersion: '9999999999999999999',
      values: { Age: 2 },
    });
    expectError(response, 409, 'ROW_VERSION_CONFLICT');
    expect(response.body.error.details).toEqual({ expectedVersion: '9999999999999999999', currentVersion: '1' });
  });

  it.each([
    ['a leading zero in expectedVersion', { expectedVersion: '01', values: { Age: 2 } }, ['body', 'expectedVersion']],
    ['no values to change', { expectedVersion: '1', values: {} }, ['values']],
  ])('answers 422 VALIDATION_FAILED for %s', async (_name, body, path) => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Ada' });
    const response = await patchRow(table, created.row.id, body);
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [path]);
  });

  it('answers 404 RESOURCE_NOT_FOUND for an unknown row', async () => {
    const table = await peopleTable();
    expectError(
      await patchRow(table, newId(), { expectedVersion: '1', values: { Age: 2 } }),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });

  it('lets exactly one of two concurrent updates from the same version win (no lost update)', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Ada' });
    const responses = await Promise.all(
      [30, 40].map((age) => patchRow(table, created.row.id, { expectedVersion: '1', values: { Age: age } })),
    );
    expect(responses.map((response) => response.status).sort()).toEqual([200, 409]);
    const winner = responses.find((response) => response.status === 200)!;
    expectError(responses.find((response) => response.status === 409)!, 409, 'ROW_VERSION_CONFLICT');
    const read = await suite.server.request('GET', rowPath(table, created.row.id), { token: admin() });
    expect(read.body).toEqual(winner.body.row);
    expect(read.body.version).toBe('2');
  });
});

describe('DELETE …/rows/{rowId}', () => {
  it('answers 200 {id, deleted, version, mutationId} and removes the row from the table', async () => {
    const table = await peopleTable();
    const kept = await createdRow(table, { Name: 'Kept' });
    const created = await createdRow(table, { Name: 'Gone' });
    const response = await deleteRow(table, created.row.id, { expectedVersion: '1' });
    expect(response.status, response.text).toBe(200);
    const deletion = RowDeletionResponse.parse(response.body);
    expect(deletion).toEqual({
      id: created.row.id,
      deleted: true,
      version: '2',
      mutationId: expect.stringMatching(ID_PATTERN),
    });
    expect((await listRows(table)).map((row) => row.id)).toEqual([kept.row.id]);
  });

  it('answers 409 ROW_VERSION_CONFLICT for a stale expectedVersion and keeps the row', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Ada' });
    expect((await patchRow(table, created.row.id, { expectedVersion: '1', values: { Age: 5 } })).status).toBe(200);
    const stale = await deleteRow(table, created.row.id, { expectedVersion: '1' });
    expectError(stale, 409, 'ROW_VERSION_CONFLICT');
    expect(stale.body.error.details).toEqual({ expectedVersion: '1', currentVersion: '2' });
    expect(await listRows(table)).toHaveLength(1);
  });
});

describe('records.changed activity', () => {
  it('records one event per create, update and delete, carrying the row and the mutation id', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Ada' });
    const updated = await patchRow(table, created.row.id, { expectedVersion: '1', values: { Age: 9 } });
    const deleted = await deleteRow(table, created.row.id, { expectedVersion: '2' });
    const events = await rowActivityOf({ rowId: created.row.id });
    expect(
      events.map(({ event, category, rowId, tableId, databaseId, affectedRows, mutationId, actorId, orgId }) => ({
        event,
        category,
        rowId,
        tableId,
        databaseId,
        affectedRows,
        mutationId,
        actorId,
        orgId,
      })),
    ).toEqual(
      [created.mutationId, updated.body.mutationId, deleted.body.mutationId].map((mutationId) => ({
        event: 'records.changed',
        category: 'records',
        rowId: created.row.id,
        tableId: table.tableId,
        databaseId: table.databaseId,
        affectedRows: 1,
        mutationId,
        actorId: suite.org.adminUserId,
        orgId: suite.org.orgId,
      })),
    );
  });

  it('records nothing for a write that failed validation or a version check', async () => {
    const table = await peopleTable();
    const created = await createdRow(table, { Name: 'Ada' });
    expectError(await createRow(suite.server, admin(), table, { Name: 'Ada', Age: 'old' }), 422, 'VALIDATION_FAILED');
    expectError(
      await patchRow(table, created.row.id, { expectedVersion: '7', values: { Age: 1 } }),
      409,
      'ROW_VERSION_CONFLICT',
    );
    expectError(await deleteRow(table, created.row.id, { expectedVersion: '7' }), 409, 'ROW_VERSION_CONFLICT');
    expectError(
      await createRow(suite.server, admin(), { ...table, schemaVersion: 9 }, { Name: 'Bo' }),
      409,
      'SCHEMA_VERSION_CONFLICT',
    );
    expect((await rowActivityOf({ tableId: table.tableId })).map((event) => event.mutationId)).toEqual([
      created.mutationId,
    ]);
  });
});
