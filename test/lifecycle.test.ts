import { describe, expect, it } from 'vitest';
import { newId } from '../src/kernel/ids.ts';
import { DatabaseResponse } from '../src/contracts/databases.ts';
import { TableResponse } from '../src/contracts/tables.ts';
import { RestoredResponse, TrashEntryResponse } from '../src/contracts/trash.ts';
import { expectError } from './helpers/expectations.ts';
import { addMember, createOrg, idempotencyKey } from './helpers/factories.ts';
import { controlJob, waitForJob } from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { definitionOf } from './helpers/views.ts';
import {
  addForeignKey,
  addUniqueRule,
  createDatabase,
  createRow,
  createTable,
  type TestTable,
} from './helpers/workspace.ts';

/** Issue 13: rename, trash, restore and purge of databases and tables. */
const suite = useServerWithOrg();

const orgPath = () => `/v1/orgs/${suite.org.orgId}`;
const databasePath = (databaseId: string, orgId = suite.org.orgId) => `/v1/orgs/${orgId}/databases/${databaseId}`;
const get = (path: string, token = suite.org.adminKey) => suite.server.request('GET', path, { token });
const send = (method: string, path: string, body?: unknown, token = suite.org.adminKey, key = idempotencyKey()) =>
  suite.server.request(method, path, { token, idempotencyKey: key, ...(body === undefined ? {} : { body }) });
const restore = (id: string, token = suite.org.adminKey, orgId = suite.org.orgId) =>
  send('POST', `/v1/orgs/${orgId}/trash/${id}/restore`, undefined, token);
const unique = (prefix: string) => `${prefix} ${newId().slice(-10)}`;

async function versionOf(path: string): Promise<string> {
  const response = await get(path);
  expect(response.status, response.text).toBe(200);
  return response.body.version;
}

async function trashIds(): Promise<string[]> {
  const response = await get(`${orgPath()}/trash?limit=100`);
  expect(response.status, response.text).toBe(200);
  return response.body.data.map((entry: { id: string }) => TrashEntryResponse.parse(entry).id);
}

async function events(event: string, where: { databaseId?: string; tableId?: string }) {
  return suite.server.prisma.activityEvent.findMany({
    where: { orgId: suite.org.orgId, event, ...where },
    orderBy: { id: 'asc' },
  });
}

/** The workspace tables' physical tables in the database's schema (its change feed's tables stay with the schema). */
async function physicalTables(databaseId: string): Promise<string[]> {
  const rows = await suite.server.prisma.$queryRaw<{ name: string }[]>`
    SELECT table_name::text AS name FROM information_schema.tables WHERE table_schema = ${`d_${databaseId.toLowerCase()}`}
       AND table_name NOT IN ('changes', 'change_commits', 'change_feed', 'change_arm') ORDER BY 1`;
  return rows.map((row) => row.name);
}

/** Makes a scheduled purge due now: the job's run-at is the test clock (no sleeping through the retention). */
async function purgeNow(jobId: string): Promise<any> {
  await suite.server.prisma.job.update({ where: { id: jobId }, data: { runAt: new Date() } });
  return waitForJob(suite.server, suite.org.adminKey, `${orgPath()}/jobs/${jobId}`);
}

async function customers(databaseId?: string): Promise<TestTable> {
  return createTable(
    suite.server,
    suite.org,
    [
      { name: 'Code', type: 'text', required: true, options: { maxLength: 100 } },
      { name: 'Amount', type: 'integer' },
    ],
    databaseId ? { databaseId } : {},
  );
}

/** Everything a restore must bring back, read through the API. */
async function snapshot(table: TestTable, rowIds: string[]) {
  const read = async (path: string) => {
    const response = await get(path);
    expect(response.status, `${path}: ${response.text}`).toBe(200);
    return response.body;
  };
  return {
    table: await read(table.path),
    schema: await read(`${table.path}/schema`),
    rows: await read(`${table.path}/rows?limit=100`),
    history: await Promise.all(rowIds.map((rowId) => read(`${table.path}/rows/${rowId}/history`))),
    views: await read(`${table.path}/views`),
  };
}

describe('PATCH /v1/orgs/{orgId}/databases/{databaseId}', () => {
  it('renames at the expected version, bumps the version and records database.update', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const name = unique('Renamed');
    const response = await send('PATCH', databasePath(databaseId), { expectedVersion: '1', name });
    expect(response.status, response.text).toBe(200);
    expect(DatabaseResponse.parse(response.body)).toMatchObject({
      id: databaseId,
      name,
      version: '2',
      state: 'active',
    });
    expect((await events('database.update', { databaseId })).map((event) => event.summary)).toEqual([
      expect.stringContaining(name),
    ]);
  });

  it('refuses a stale version with 409 ROW_VERSION_CONFLICT and a taken name with 409 UNIQUE_CONFLICT', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const taken = unique('Taken');
    await createDatabase(suite.server, suite.org, taken);
    const stale = await send('PATCH', databasePath(databaseId), { expectedVersion: '7', name: unique('Other') });
    expectError(stale, 409, 'ROW_VERSION_CONFLICT');
    expect(stale.body.error.details).toEqual({ expectedVersion: '7', currentVersion: '1' });
    expectError(
      await send('PATCH', databasePath(databaseId), { expectedVersion: '1', name: taken.toUpperCase() }),
      409,
      'UNIQUE_CONFLICT',
    );
    expect(await versionOf(databasePath(databaseId))).toBe('1');
  });

  it('validates the body (422), needs manage authority (403) and hides other orgs (404)', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    expectError(
      await send('PATCH', databasePath(databaseId), { expectedVersion: '1', name: '' }),
      422,
      'VALIDATION_FAILED',
    );
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    expectError(
      await send('PATCH', databasePath(databaseId), { expectedVersion: '1', name: unique('No') }, viewer.apiKey),
      403,
      'FORBIDDEN',
    );
    const other = await createOrg(suite.server.prisma);
    expectError(
      await send(
        'PATCH',
        databasePath(databaseId, other.orgId),
        { expectedVersion: '1', name: unique('No') },
        other.adminKey,
      ),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });
});

describe('PATCH …/tables/{tableId}', () => {
  it('renames at once without touching schemaVersion, records table.update, refuses stale versions', async () => {
    const table = await customers();
    const name = unique('Clients');
    const response = await send('PATCH', table.path, { expectedVersion: '1', name });
    expect(response.status, response.text).toBe(200);
    expect(TableResponse.parse(response.body)).toMatchObject({
      id: table.tableId,
      name,
      version: '2',
      schemaVersion: table.schemaVersion,
    });
    expect(await events('table.update', { tableId: table.tableId })).toHaveLength(1);
    const stale = await send('PATCH', table.path, { expectedVersion: '1', name: unique('Again') });
    expectError(stale, 409, 'ROW_VERSION_CONFLICT');
    expect(stale.body.error.details).toEqual({ expectedVersion: '1', currentVersion: '2' });
    const member = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    expect(
      (await send('PATCH', table.path, { expectedVersion: '2', name: unique('By member') }, member.apiKey)).status,
    ).toBe(200);
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    expectError(
      await send('PATCH', table.path, { expectedVersion: '3', name: unique('No') }, viewer.apiKey),
      403,
      'FORBIDDEN',
    );
  });
});

describe('DELETE …/tables/{tableId} and restore', () => {
  it('moves the table to the trash: every read and write path answers 404 until it is restored exactly', async () => {
    const table = await customers();
    const rule = await addUniqueRule(suite.server, suite.org.adminKey, table, { fieldIds: ['Code'] });
    expect(rule.job.state).toBe('succeeded');
    const current = rule.table;
    const created = [
      await createRow(suite.server, suite.org.adminKey, current, { Code: 'A', Amount: 1 }),
      await createRow(suite.server, suite.org.adminKey, current, { Code: 'B' }),
    ];
    const rowIds = created.map((response) => {
      expect(response.status, response.text).toBe(201);
      return response.body.row.id as string;
    });
    const edited = await send('PATCH', `${table.path}/rows/${rowIds[0]}`, {
      expectedVersion: '1',
      values: { Amount: 2 },
    });
    expect(edited.status, edited.text).toBe(200);
    const view = await send('POST', `${table.path}/views`, {
      name: 'Big',
      visibility: 'shared',
      expectedSchemaVersion: current.schemaVersion,
      definition: definitionOf(),
    });
    expect(view.status, view.text).toBe(201);
    const before = await snapshot(table, rowIds);
    const version = before.table.version as string;

    const deleted = await send('DELETE', table.path, { expectedVersion: version });
    expect(deleted.status, deleted.text).toBe(200);
    const entry = TrashEntryResponse.parse(deleted.body);
    expect(entry).toMatchObject({
      id: table.tableId,
      kind: 'table',
      databaseId: table.databaseId,
      deletedBy: { id: suite.org.adminUserId, name: 'Ada Admin' },
    });
    const retention = Date.parse(entry.purgeAfter) - Date.parse(entry.deletedAt);
    expect(retention).toBeGreaterThan(7 * 86_400_000 - 60_000);
    expect(retention).toBeLessThan(7 * 86_400_000 + 60_000);
    expect(await events('table.delete', { tableId: table.tableId })).toHaveLength(1);
    const purge = await get(entry.purgeJobUrl);
    expect(purge.body).toMatchObject({ kind: 'deleteTable', state: 'queued' });

    for (const path of [
      table.path,
      `${table.path}/schema`,
      `${table.path}/rows`,
      `${table.path}/rows/${rowIds[0]}`,
      `${table.path}/rows/${rowIds[0]}/history`,
      `${table.path}/views`,
    ]) {
      expectError(await get(path), 404, 'RESOURCE_NOT_FOUND');
    }
    const tables = await get(`${databasePath(table.databaseId)}/tables`);
    expect(tables.body.data.map((item: { id: string }) => item.id)).not.toContain(table.tableId);
    expectError(await createRow(suite.server, suite.org.adminKey, current, { Code: 'C' }), 404, 'RESOURCE_NOT_FOUND');
    expectError(
      await send('POST', `${table.path}/imports/preview`, {
        expectedSchemaVersion: current.schemaVersion,
        format: 'csv',
        content: 'Code\nX\n',
        fileName: 'x.csv',
        mapping: [{ source: 'Code', fieldId: table.fields.Code }],
      }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(await send('POST', `${table.path}/unique-rules`, { fieldIds: ['Amount'] }), 404, 'RESOURCE_NOT_FOUND');
    expectError(
      await send('PATCH', table.path, { expectedVersion: entry.version, name: unique('No') }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(await send('DELETE', table.path, { expectedVersion: entry.version }), 404, 'RESOURCE_NOT_FOUND');
    expectError(await get(`${table.path}/views/${view.body.id}`), 404, 'RESOURCE_NOT_FOUND');
    expect(await trashIds()).toContain(table.tableId);

    const restored = await restore(table.tableId);
    expect(restored.status, restored.text).toBe(200);
    expect(RestoredResponse.parse(restored.body)).toMatchObject({
      id: table.tableId,
      kind: 'table',
      restoredTables: 1,
    });
    const after = await snapshot(table, rowIds);
    expect({ ...after, table: { ...after.table, version: undefined, updatedAt: undefined } }).toEqual({
      ...before,
      table: { ...before.table, version: undefined, updatedAt: undefined },
    });
    expect(after.table.schemaVersion).toBe(before.table.schemaVersion);
    expect(await trashIds()).not.toContain(table.tableId);
    expect((await get(entry.purgeJobUrl)).body.state).toBe('cancelled');
    const restoreEvents = await events('table.update', { tableId: table.tableId });
    expect(restoreEvents.map((event) => event.summary)).toEqual([expect.stringContaining('Restored table')]);
    expect((await createRow(suite.server, suite.org.adminKey, current, { Code: 'C' })).status).toBe(201);
    expectError(await createRow(suite.server, suite.org.adminKey, current, { Code: 'A' }), 409, 'UNIQUE_CONFLICT');
    expectError(await restore(table.tableId), 404, 'RESOURCE_NOT_FOUND');
  });

  it('refuses a stale version (409) and a table that another table’s foreign key references (409 FOREIGN_KEY_CONFLICT)', async () => {
    const parent = await customers();
    const rule = await addUniqueRule(suite.server, suite.org.adminKey, parent, { fieldIds: ['Code'] });
    const child = await createTable(
      suite.server,
      suite.org,
      [{ name: 'Customer', type: 'text', options: { maxLength: 100 } }],
      { databaseId: parent.databaseId },
    );
    const key = await addForeignKey(suite.server, suite.org.adminKey, child, {
      fieldIds: ['Customer'],
      referencedTableId: parent.tableId,
      referencedRuleId: rule.ruleId,
    });
    expect(key.job.state).toBe('succeeded');
    const version = await versionOf(parent.path);
    expectError(await send('DELETE', parent.path, { expectedVersion: '99' }), 409, 'ROW_VERSION_CONFLICT');
    const refused = await send('DELETE', parent.path, { expectedVersion: version });
    expectError(refused, 409, 'FOREIGN_KEY_CONFLICT');
    expect(refused.body.error.details).toEqual({
      foreignKeys: [{ id: key.foreignKeyId, tableId: child.tableId, tableName: expect.any(String), trashed: false }],
    });
    expect((await get(parent.path)).status).toBe(200);
    // The referencing table itself can go; its key goes with it.
    const childDeleted = await send('DELETE', child.path, { expectedVersion: await versionOf(child.path) });
    expect(childDeleted.status, childDeleted.text).toBe(200);
  });

  it('frees the name while trashed, and refuses a restore whose name was taken meanwhile (409 UNIQUE_CONFLICT)', async () => {
    const name = unique('Orders');
    const databaseId = await createDatabase(suite.server, suite.org);
    const table = await createTable(suite.server, suite.org, [{ name: 'Code', type: 'text' }], { databaseId, name });
    expect((await send('DELETE', table.path, { expectedVersion: '1' })).status).toBe(200);
    await createTable(suite.server, suite.org, [{ name: 'Code', type: 'text' }], { databaseId, name });
    const refused = await restore(table.tableId);
    expectError(refused, 409, 'UNIQUE_CONFLICT');
    expect(await trashIds()).toContain(table.tableId);
  });

  it('needs manage authority to delete and restore, lets a viewer read the trash, hides other orgs (404)', async () => {
    const table = await customers();
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    expectError(await send('DELETE', table.path, { expectedVersion: '1' }, viewer.apiKey), 403, 'FORBIDDEN');
    const other = await createOrg(suite.server.prisma);
    expectError(
      await send('DELETE', table.path.replace(suite.org.orgId, other.orgId), { expectedVersion: '1' }, other.adminKey),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expect((await send('DELETE', table.path, { expectedVersion: '1' })).status).toBe(200);
    const listed = await get(`${orgPath()}/trash`, viewer.apiKey);
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((entry: { id: string }) => entry.id)).toContain(table.tableId);
    expectError(await restore(table.tableId, viewer.apiKey), 403, 'FORBIDDEN');
    expectError(await restore(table.tableId, other.adminKey, other.orgId), 404, 'RESOURCE_NOT_FOUND');
    const otherTrash = await get(`/v1/orgs/${other.orgId}/trash`, other.adminKey);
    expect(otherTrash.body).toEqual({ data: [], nextCursor: null, hasMore: false });
    expectError(await restore(newId()), 404, 'RESOURCE_NOT_FOUND');
    expect((await restore(table.tableId)).status).toBe(200);
  });

  it('purges after the retention: data and catalog gone, job succeeded with table.delete, restore 404', async () => {
    const table = await customers();
    expect((await createRow(suite.server, suite.org.adminKey, table, { Code: 'A' })).status).toBe(201);
    const entry = TrashEntryResponse.parse((await send('DELETE', table.path, { expectedVersion: '1' })).body);
    const job = await purgeNow(entry.purgeJobId);
    expect(job).toMatchObject({ state: 'succeeded', result: { purged: true, tableId: table.tableId } });
    expect(await physicalTables(table.databaseId)).toEqual([]);
    expect(await suite.server.prisma.dataTable.findUnique({ where: { id: table.tableId } })).toBeNull();
    expect(await suite.server.prisma.field.count({ where: { tableId: table.tableId } })).toBe(0);
    expect((await events('table.delete', { tableId: table.tableId })).map((event) => event.jobId)).toEqual([
      null,
      entry.purgeJobId,
    ]);
    expect(await trashIds()).not.toContain(table.tableId);
    expectError(await restore(table.tableId), 404, 'RESOURCE_NOT_FOUND');
  });

  it('purges a table’s hashed unique rules with it: no key type or lock function stays in the schema', async () => {
    const created = await createTable(suite.server, suite.org, [
      { name: 'Note', type: 'text', options: { maxLength: 1000 } },
    ]);
    const rule = await addUniqueRule(suite.server, suite.org.adminKey, created, { fieldIds: ['Note'] });
    expect(rule.job.state, JSON.stringify(rule.job)).toBe('succeeded');
    const leftovers = async () =>
      (
        await suite.server.prisma.$queryRaw<{ name: string }[]>`
      SELECT typname::text AS name FROM pg_type WHERE typnamespace = to_regnamespace(${`d_${created.databaseId.toLowerCase()}`}) AND typname LIKE 'r\_%'
      UNION ALL SELECT proname::text FROM pg_proc WHERE pronamespace = to_regnamespace(${`d_${created.databaseId.toLowerCase()}`})`
      )
        .map((row) => row.name)
        .sort();
    expect(await leftovers()).toEqual([`l_${rule.ruleId.toLowerCase()}`, `r_${rule.ruleId.toLowerCase()}`]);
    const entry = TrashEntryResponse.parse(
      (await send('DELETE', created.path, { expectedVersion: await versionOf(created.path) })).body,
    );
    const job = await purgeNow(entry.purgeJobId);
    expect(job).toMatchObject({ state: 'succeeded', result: { purged: true, tableId: created.tableId } });
    expect(await physicalTables(created.databaseId)).toEqual([]);
    expect(await leftovers()).toEqual([]);
  });
});

describe('DELETE /v1/orgs/{orgId}/databases/{databaseId} and restore', () => {
  it('trashes the database with its tables, lists only the database, and restores them together', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const kept = await customers(databaseId);
    const trashedAlone = await customers(databaseId);
    expect((await createRow(suite.server, suite.org.adminKey, kept, { Code: 'K' })).status).toBe(201);
    expect((await send('DELETE', trashedAlone.path, { expectedVersion: '1' })).status).toBe(200);
    const before = await snapshot(kept, []);

    expectError(await send('DELETE', databasePath(databaseId), { expectedVersion: '5' }), 409, 'ROW_VERSION_CONFLICT');
    const deleted = await send('DELETE', databasePath(databaseId), { expectedVersion: '1' });
    expect(deleted.status, deleted.text).toBe(200);
    expect(TrashEntryResponse.parse(deleted.body)).toMatchObject({
      id: databaseId,
      kind: 'database',
      databaseId: null,
      version: '2',
    });
    expectError(await get(databasePath(databaseId)), 404, 'RESOURCE_NOT_FOUND');
    expectError(await get(`${databasePath(databaseId)}/tables`), 404, 'RESOURCE_NOT_FOUND');
    expectError(await get(kept.path), 404, 'RESOURCE_NOT_FOUND');
    expectError(await get(`${kept.path}/rows`), 404, 'RESOURCE_NOT_FOUND');
    expectError(await createRow(suite.server, suite.org.adminKey, kept, { Code: 'L' }), 404, 'RESOURCE_NOT_FOUND');
    const databases = await get(`${orgPath()}/databases?limit=100`);
    expect(databases.body.data.map((item: { id: string }) => item.id)).not.toContain(databaseId);
    const listed = await trashIds();
    expect(listed).toContain(databaseId);
    expect(listed).not.toContain(kept.tableId);
    expect(listed).not.toContain(trashedAlone.tableId);
    expectError(await restore(trashedAlone.tableId), 404, 'RESOURCE_NOT_FOUND');
    expect(await events('database.delete', { databaseId })).toHaveLength(1);

    const restored = await restore(databaseId);
    expect(restored.status, restored.text).toBe(200);
    expect(RestoredResponse.parse(restored.body)).toMatchObject({
      id: databaseId,
      kind: 'database',
      restoredTables: 1,
      version: '3',
    });
    const after = await snapshot(kept, []);
    expect(after).toEqual(before);
    expect(await trashIds()).toContain(trashedAlone.tableId);
    expect(await events('database.restore', { databaseId })).toHaveLength(1);
  });

  it('purges the database: every table, the schema and the catalog; restore after the purge is 404', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const table = await customers(databaseId);
    const alone = await customers(databaseId);
    const aloneEntry = TrashEntryResponse.parse((await send('DELETE', alone.path, { expectedVersion: '1' })).body);
    expect((await createRow(suite.server, suite.org.adminKey, table, { Code: 'A' })).status).toBe(201);
    const entry = TrashEntryResponse.parse(
      (await send('DELETE', databasePath(databaseId), { expectedVersion: '1' })).body,
    );
    const job = await purgeNow(entry.purgeJobId);
    expect(job).toMatchObject({ state: 'succeeded', result: { purged: true, databaseId, tables: 2 } });
    const [schema] = await suite.server.prisma.$queryRaw<{ count: number }[]>`
      SELECT count(*)::int AS count FROM information_schema.schemata WHERE schema_name = ${`d_${databaseId.toLowerCase()}`}`;
    expect(schema!.count).toBe(0);
    expect(await suite.server.prisma.database.findUnique({ where: { id: databaseId } })).toBeNull();
    expect(await suite.server.prisma.dataTable.count({ where: { databaseId } })).toBe(0);
    expect((await get(aloneEntry.purgeJobUrl)).body.state).toBe('cancelled');
    expectError(await restore(databaseId), 404, 'RESOURCE_NOT_FOUND');
    expect(await trashIds()).not.toContain(databaseId);
    expect((await events('database.delete', { databaseId })).map((event) => event.jobId)).toEqual([
      null,
      entry.purgeJobId,
    ]);
  });

  it('a purge that comes due after a restore does nothing and ends cancelled', async () => {
    const table = await customers();
    const entry = TrashEntryResponse.parse((await send('DELETE', table.path, { expectedVersion: '1' })).body);
    expect((await restore(table.tableId)).status).toBe(200);
    // A purge a worker claimed just before the restore: it must find nothing to purge.
    await suite.server.prisma.job.update({
      where: { id: entry.purgeJobId },
      data: { state: 'queued', finishedAt: null },
    });
    const job = await purgeNow(entry.purgeJobId);
    expect(job.state).toBe('cancelled');
    expect((await get(table.path)).status).toBe(200);
    expect(await physicalTables(table.databaseId)).toHaveLength(2);
  });

  it('refuses to cancel or retry a purge (409 JOB_STATE_CONFLICT): the purge still runs, a restore still stops it', async () => {
    const table = await customers();
    const databaseId = await createDatabase(suite.server, suite.org);
    const tableEntry = TrashEntryResponse.parse((await send('DELETE', table.path, { expectedVersion: '1' })).body);
    const databaseEntry = TrashEntryResponse.parse(
      (await send('DELETE', databasePath(databaseId), { expectedVersion: '1' })).body,
    );
    for (const entry of [tableEntry, databaseEntry]) {
      for (const action of ['cancel', 'retry'] as const) {
        const refused = await controlJob(suite.server, suite.org.adminKey, suite.org.orgId, entry.purgeJobId, action);
        expectError(refused, 409, 'JOB_STATE_CONFLICT');
        expect(refused.body.error.details).toEqual({
          state: 'queued',
          kind: entry.kind === 'table' ? 'deleteTable' : 'deleteDatabase',
        });
      }
      expect((await get(entry.purgeJobUrl)).body.state).toBe('queued');
    }
    expect(await events(`job.deleteTable.cancelled`, { tableId: table.tableId })).toEqual([]);

    expect((await purgeNow(tableEntry.purgeJobId)).state).toBe('succeeded');
    expect(await suite.server.prisma.dataTable.count({ where: { id: table.tableId } })).toBe(0);
    expect((await restore(databaseId)).status).toBe(200);
    expect((await get(databaseEntry.purgeJobUrl)).body.state).toBe('cancelled');
    expectError(
      await controlJob(suite.server, suite.org.adminKey, suite.org.orgId, databaseEntry.purgeJobId, 'retry'),
      409,
      'JOB_STATE_CONFLICT',
    );
  });
});

describe('GET /v1/orgs/{orgId}/trash', () => {
  it('pages newest deletion first with a cursor bound to the org', async () => {
    const org = await createOrg(suite.server.prisma);
    const ids: string[] = [];
    for (let index = 0; index < 3; index += 1) {
      const databaseId = await createDatabase(suite.server, org);
      const response = await suite.server.request('DELETE', databasePath(databaseId, org.orgId), {
        token: org.adminKey,
        idempotencyKey: idempotencyKey(),
        body: { expectedVersion: '1' },
      });
      expect(response.status, response.text).toBe(200);
      ids.push(databaseId);
    }
    const first = await suite.server.request('GET', `/v1/orgs/${org.orgId}/trash?limit=2`, { token: org.adminKey });
    expect(first.status, first.text).toBe(200);
    expect(first.body.hasMore).toBe(true);
    const second = await suite.server.request(
      'GET',
      `/v1/orgs/${org.orgId}/trash?limit=2&cursor=${encodeURIComponent(first.body.nextCursor)}`,
      { token: org.adminKey },
    );
    expect(second.body).toMatchObject({ hasMore: false, nextCursor: null });
    const order = [...first.body.data, ...second.body.data].map((entry: { id: string }) => entry.id);
    expect(order).toEqual([...ids].reverse());
    expectError(
      await get(`${orgPath()}/trash?cursor=${encodeURIComponent(first.body.nextCursor)}`),
      400,
      'CURSOR_INVALID',
    );
  });
});

describe('DELETE …/tables/{tableId}/unique-rules/{ruleId}', () => {
  it('drops the rule online as a deleteUniqueRule job: rule.delete, schemaVersion bumped, duplicates accepted after', async () => {
    const table = await customers();
    const rule = await addUniqueRule(suite.server, suite.org.adminKey, table, { fieldIds: ['Code'] });
    expect((await createRow(suite.server, suite.org.adminKey, rule.table, { Code: 'A' })).status).toBe(201);
    const accepted = await send('DELETE', `${table.path}/unique-rules/${rule.ruleId}`);
    expect(accepted.status, accepted.text).toBe(202);
    expect(accepted.body).toEqual({
      jobId: expect.any(String),
      state: 'queued',
      statusUrl: `${orgPath()}/jobs/${accepted.body.jobId}`,
    });
    const job = await waitForJob(suite.server, suite.org.adminKey, accepted.body.statusUrl);
    expect(job).toMatchObject({
      kind: 'deleteUniqueRule',
      state: 'succeeded',
      result: { ruleId: rule.ruleId, deleted: true, schemaVersion: rule.table.schemaVersion + 1 },
    });
    const schema = await get(`${table.path}/schema`);
    expect(schema.body).toMatchObject({ schemaVersion: rule.table.schemaVersion + 1, uniqueRules: [] });
    const [index] = await suite.server.prisma.$queryRaw<{ count: number }[]>`
      SELECT count(*)::int AS count FROM pg_indexes WHERE indexname = ${`u_${rule.ruleId.toLowerCase()}`}`;
    expect(index!.count).toBe(0);
    expect(
      (
        await createRow(
          suite.server,
          suite.org.adminKey,
          { ...table, schemaVersion: schema.body.schemaVersion },
          { Code: 'A' },
        )
      ).status,
    ).toBe(201);
    expect((await events('rule.delete', { tableId: table.tableId })).map((event) => event.jobId)).toEqual([
      accepted.body.jobId,
    ]);
    expectError(await send('DELETE', `${table.path}/unique-rules/${rule.ruleId}`), 404, 'RESOURCE_NOT_FOUND');
  });

  it('refuses while a foreign key references the rule (409), needs manage authority (403), hides other orgs (404)', async () => {
    const parent = await customers();
    const rule = await addUniqueRule(suite.server, suite.org.adminKey, parent, { fieldIds: ['Code'] });
    const child = await createTable(
      suite.server,
      suite.org,
      [{ name: 'Customer', type: 'text', options: { maxLength: 100 } }],
      { databaseId: parent.databaseId },
    );
    const key = await addForeignKey(suite.server, suite.org.adminKey, child, {
      fieldIds: ['Customer'],
      referencedTableId: parent.tableId,
      referencedRuleId: rule.ruleId,
    });
    const path = `${parent.path}/unique-rules/${rule.ruleId}`;
    const refused = await send('DELETE', path);
    expectError(refused, 409, 'FOREIGN_KEY_CONFLICT');
    expect(refused.body.error.details).toEqual({
      foreignKeys: [{ id: key.foreignKeyId, tableId: child.tableId, tableName: expect.any(String) }],
    });
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    expectError(await send('DELETE', path, undefined, viewer.apiKey), 403, 'FORBIDDEN');
    const other = await createOrg(suite.server.prisma);
    expectError(
      await send('DELETE', path.replace(suite.org.orgId, other.orgId), undefined, other.adminKey),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(await send('DELETE', `${parent.path}/unique-rules/${newId()}`), 404, 'RESOURCE_NOT_FOUND');
    expect((await get(`${parent.path}/schema`)).body.uniqueRules).toHaveLength(1);
  });
});
