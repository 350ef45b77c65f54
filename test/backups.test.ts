import { readdirSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BackupResponse } from '../src/contracts/backups.ts';
import { Page } from '../src/contracts/pages.ts';
import {
  backupDir,
  backupWorkspace,
  constraintCount,
  databasePath,
  databaseVersion,
  finished,
  pictureOf,
  requestPreview,
  requestRestore,
  rowOf,
  runBackup,
} from './helpers/backups.ts';
import { expectError } from './helpers/expectations.ts';
import { addMember, idempotencyKey } from './helpers/factories.ts';
import { appliedChange, schemaChangeApi, type ChangeBody } from './helpers/schema-changes.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import {
  addUniqueRule,
  createDatabase,
  createRow,
  createTable,
  refreshSchemaVersion,
  type TestTable,
} from './helpers/workspace.ts';

/** Issue 16: run-now backups, listing, restore previews and restores of both targets, over HTTP. */
const dir = backupDir();
const suite = useServerWithOrg({ BACKUP_DIR: dir });
const admin = () => suite.org.adminKey;
const server = () => suite.server;
const orgId = () => suite.org.orgId;

const row = (table: TestTable, values: Record<string, unknown>) => rowOf(server(), admin(), table, values);
const workspace = () => backupWorkspace(suite);
const constraintsOf = (databaseId: string) => constraintCount(server(), databaseId);
const changed = (table: TestTable, change: ChangeBody) => appliedChange(suite, table, change);

describe('run now and list', () => {
  it('backs a database up as a verified set of files and lists it', async () => {
    const { databaseId } = await workspace();
    const job = await runBackup(server(), admin(), orgId(), databaseId);
    expect(job.state, JSON.stringify(job)).toBe('succeeded');
    expect(job.kind).toBe('runDatabaseBackup');
    expect(job.result).toMatchObject({ backupId: job.jobId, databaseId, tables: 2, rows: 3, pruned: [] });
    const list = await server().request('GET', `${databasePath(orgId(), databaseId)}/backups`, { token: admin() });
    expect(list.status, list.text).toBe(200);
    const page = Page(BackupResponse).parse(list.body);
    expect(page.data).toHaveLength(1);
    expect(page.data[0]).toMatchObject({
      id: job.jobId,
      databaseId,
      tables: 2,
      rows: 3,
      destination: 'local',
      scheduledFor: null,
      sha256: job.result.sha256,
    });
    const files = readdirSync(join(dir, orgId(), databaseId, job.jobId), { recursive: true })
      .map(String)
      .sort();
    expect(files).toEqual(expect.arrayContaining(['catalog.json.gz', 'manifest.json']));
    const manifest = JSON.parse(readFileSync(join(dir, orgId(), databaseId, job.jobId, 'manifest.json'), 'utf8'));
    expect(manifest).toMatchObject({ format: 'wds-backup', formatVersion: 1, backupId: job.jobId, databaseId });
    expect(manifest.files).toHaveLength(5);
  });

  it('lets a member run one, not a viewer; unknown databases are 404', async () => {
    const { databaseId } = await workspace();
    const member = await addMember(server().prisma, orgId(), 'member');
    const viewer = await addMember(server().prisma, orgId(), 'viewer');
    const byMember = await runBackup(server(), member.apiKey, orgId(), databaseId);
    expect(byMember.state).toBe('succeeded');
    const byViewer = await server().request('POST', `${databasePath(orgId(), databaseId)}/backups`, {
      token: viewer.apiKey,
      idempotencyKey: idempotencyKey(),
    });
    expectError(byViewer, 403, 'FORBIDDEN');
    const unknown = await server().request('POST', `${databasePath(orgId(), '01ARZ3NDEKTSV4RRFFQ69G5FAV')}/backups`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
    });
    expectError(unknown, 404, 'RESOURCE_NOT_FOUND');
    const preview = await requestPreview(server(), member.apiKey, orgId(), databaseId, byMember.jobId);
    expectError(preview, 403, 'FORBIDDEN');
  });
});

describe('restore', () => {
  it('restores both targets to exactly the snapshot, field by field', async () => {
    const { databaseId, customers, orders, grace } = await workspace();
    const before = await pictureOf(server(), databaseId);
    const backup = await runBackup(server(), admin(), orgId(), databaseId);
    expect(backup.state, JSON.stringify(backup)).toBe('succeeded');

    // Change and delete things: a row deleted, one added, one changed, a table added.
    const deleted = await server().request('DELETE', `${customers.path}/rows/${grace.id}`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: grace.version },
    });
    expect(deleted.status, deleted.text).toBe(200);
    await row(customers, { Name: 'Linus', Age: 50 });
    await row(orders, { Customer: 'Linus', Total: 1 });
    await createTable(server(), suite.org, [{ name: 'Note', type: 'text' }], { databaseId, name: 'Extra' });
    expect(await pictureOf(server(), databaseId)).not.toEqual(before);

    const preview = await finished(
      server(),
      admin(),
      await requestPreview(server(), admin(), orgId(), databaseId, backup.jobId),
    );
    expect(preview.state, JSON.stringify(preview)).toBe('succeeded');
    expect(preview.result).toMatchObject({
      backupId: backup.jobId,
      verified: true,
      tablesAdded: [],
      tablesAltered: [],
    });
    expect(preview.result.tablesRemoved.map((table: { name: string }) => table.name)).toEqual(['Extra']);
    expect(preview.result.rowCounts).toEqual(
      expect.arrayContaining([
        { tableId: customers.tableId, name: 'Customers', before: 2, after: 2 },
        { tableId: orders.tableId, name: 'Orders', before: 2, after: 1 },
      ]),
    );

    const copy = await finished(
      server(),
      admin(),
      await requestRestore(server(), admin(), orgId(), databaseId, backup.jobId, {
        target: 'new-database',
        name: `Copy ${databaseId}`,
      }),
    );
    expect(copy.state, JSON.stringify(copy)).toBe('succeeded');
    const copyId = copy.result.databaseId;
    expect(copyId).not.toBe(databaseId);
    expect(await pictureOf(server(), copyId)).toEqual(before);
    expect(await constraintsOf(copyId)).toBe(2);

    const version = await databaseVersion(server(), admin(), orgId(), databaseId);
    const replaced = await finished(
      server(),
      admin(),
      await requestRestore(server(), admin(), orgId(), databaseId, backup.jobId, {
        target: 'replace',
        expectedVersion: version,
      }),
    );
    expect(replaced.state, JSON.stringify(replaced)).toBe('succeeded');
    expect(await pictureOf(server(), databaseId)).toEqual(before);
    expect(await constraintsOf(databaseId)).toBe(2);
    expect(await databaseVersion(server(), admin(), orgId(), databaseId)).toBe(String(BigInt(version) + 1n));

    // The restored tables work: the autoNumber continues from the snapshot (2 rows numbered), rules and keys hold.
    const restoredCustomers = await refreshSchemaVersion(server(), admin(), customers);
    const restoredOrders = await refreshSchemaVersion(server(), admin(), orders);
    expect(restoredCustomers.schemaVersion).toBeGreaterThan(customers.schemaVersion);
    // The view, checked against the snapshot's schema, moves with it (not reported as drifted).
    const views = await server().request('GET', `${customers.path}/views`, { token: admin() });
    expect(views.status, views.text).toBe(200);
    expect(views.body.data.map((view: { schemaVersion: number }) => view.schemaVersion)).toEqual([
      restoredCustomers.schemaVersion,
    ]);
    const next = await row(restoredCustomers, { Name: 'Barbara' });
    expect(Number(next.values[customers.fields.Number!])).toBe(3);
    expectError(await createRow(server(), admin(), restoredCustomers, { Name: 'Grace' }), 409, 'UNIQUE_CONFLICT');
    expectError(
      await createRow(server(), admin(), restoredOrders, { Customer: 'Nobody' }),
      409,
      'FOREIGN_KEY_CONFLICT',
    );

    const events = await server().prisma.activityEvent.findMany({
      where: { databaseId, category: 'restores' },
      select: { event: true },
    });
    expect(events.map((event) => event.event)).toEqual(
      expect.arrayContaining(['database.restore', 'job.previewDatabaseRestore.succeeded']),
    );
  });

  it('restores a hashed unique rule (a key too wide for a btree) to both targets, still refusing duplicates', async () => {
    const databaseId = await createDatabase(server(), suite.org);
    const created = await createTable(
      server(),
      suite.org,
      [{ name: 'Text', type: 'text', options: { maxLength: 1000 } }],
      {
        databaseId,
        name: 'Notes',
      },
    );
    const rule = await addUniqueRule(server(), admin(), created, { fieldIds: ['Text'] });
    expect(rule.job.state, JSON.stringify(rule.job)).toBe('succeeded');
    const notes = rule.table;
    const wide = 'é'.repeat(1000);
    await row(notes, { Text: wide });
    const backup = await runBackup(server(), admin(), orgId(), databaseId);
    expect(backup.state, JSON.stringify(backup)).toBe('succeeded');

    const copy = await finished(
      server(),
      admin(),
      await requestRestore(server(), admin(), orgId(), databaseId, backup.jobId, {
        target: 'new-database',
        name: `Copy ${databaseId}`,
      }),
    );
    expect(copy.state, JSON.stringify(copy)).toBe('succeeded');
    const copiedTable = await server().prisma.dataTable.findFirstOrThrow({
      where: { databaseId: copy.result.databaseId },
      include: { fields: true },
    });
    const copied: TestTable = {
      ...notes,
      databaseId: copy.result.databaseId,
      tableId: copiedTable.id,
      schemaVersion: Number(copiedTable.schemaVersion),
      fields: { Text: copiedTable.fields[0]!.id },
      path: `${databasePath(orgId(), copy.result.databaseId)}/tables/${copiedTable.id}`,
    };
    expectError(await createRow(server(), admin(), copied, { Text: wide }), 409, 'UNIQUE_CONFLICT');
    expect((await createRow(server(), admin(), copied, { Text: `${wide.slice(1)}e` })).status).toBe(201);

    const version = await databaseVersion(server(), admin(), orgId(), databaseId);
    const replaced = await finished(
      server(),
      admin(),
      await requestRestore(server(), admin(), orgId(), databaseId, backup.jobId, {
        target: 'replace',
        expectedVersion: version,
      }),
    );
    expect(replaced.state, JSON.stringify(replaced)).toBe('succeeded');
    const restored = await refreshSchemaVersion(server(), admin(), notes);
    expectError(await createRow(server(), admin(), restored, { Text: wide }), 409, 'UNIQUE_CONFLICT');
    const parallel = await Promise.all(
      Array.from({ length: 4 }, () => createRow(server(), admin(), restored, { Text: 'contested' })),
    );
    expect(parallel.map((response) => response.status).sort()).toEqual([201, 409, 409, 409]);
  });

  it('moves every restored table past any schema version it had, so no process trusts a cached schema of that number', async () => {
    const databaseId = await createDatabase(server(), suite.org);
    const table = await createTable(server(), suite.org, [{ name: 'Name', type: 'text' }], {
      databaseId,
      name: 'People',
    });
    const backup = await runBackup(server(), admin(), orgId(), databaseId);
    expect(backup.state, JSON.stringify(backup)).toBe('succeeded');
    // After the backup: a field A, read once (this process now caches the schema with A at the next version).
    const withA = await changed(table, { kind: 'add_field', field: { name: 'A', type: 'text' } });
    await row(withA, { Name: 'Ada', A: 'a' });
    expect((await server().request('GET', `${table.path}/rows`, { token: admin() })).status).toBe(200);

    const version = await databaseVersion(server(), admin(), orgId(), databaseId);
    const replaced = await finished(
      server(),
      admin(),
      await requestRestore(server(), admin(), orgId(), databaseId, backup.jobId, {
        target: 'replace',
        expectedVersion: version,
      }),
    );
    expect(replaced.state, JSON.stringify(replaced)).toBe('succeeded');
    const restored = await schemaChangeApi(suite).schemaOf(table);
    expect(restored.schemaVersion).toBeGreaterThan(withA.schemaVersion);
    expect(restored.fields.map((field) => field.name)).toEqual(['Name']);

    // A different field B: the schema reaches a version number that was never A's.
    const withB = await changed(
      { ...table, schemaVersion: restored.schemaVersion },
      { kind: 'add_field', field: { name: 'B', type: 'text' } },
    );
    expect(withB.schemaVersion).not.toBe(withA.schemaVersion);
    await row(withB, { Name: 'Grace', B: 'b' });
    const page = await server().request('GET', `${table.path}/rows`, { token: admin() });
    expect(page.status, page.text).toBe(200);
    expect(page.body.data.map((entry: { values: Record<string, unknown> }) => entry.values)).toEqual([
      { [withB.fields.Name!]: 'Grace', [withB.fields.B!]: 'b' },
    ]);
  });

  it('keeps the database’s change feed through a restore in place: cursors from before go on, after the restore’s changes', async () => {
    const databaseId = await createDatabase(server(), suite.org);
    const table = await createTable(server(), suite.org, [{ name: 'Name', type: 'text' }], {
      databaseId,
      name: 'Feed',
    });
    await row(table, { Name: 'before' });
    const backup = await runBackup(server(), admin(), orgId(), databaseId);
    const feed = `${databasePath(orgId(), databaseId)}/changes`;
    const head = await server().request('GET', `${feed}/head`, { token: admin() });
    expect(head.status, head.text).toBe(200);
    const version = await databaseVersion(server(), admin(), orgId(), databaseId);
    const replaced = await finished(
      server(),
      admin(),
      await requestRestore(server(), admin(), orgId(), databaseId, backup.jobId, {
        target: 'replace',
        expectedVersion: version,
      }),
    );
    expect(replaced.state, JSON.stringify(replaced)).toBe('succeeded');
    const restored = await refreshSchemaVersion(server(), admin(), table);
    const added = await row(restored, { Name: 'after' });

    const after = await server().request('GET', `${feed}?after=${head.body.cursor}`, { token: admin() });
    expect(after.status, after.text).toBe(200);
    expect(after.body.data).toEqual([
      expect.objectContaining({ kind: 'table.created', tableId: table.tableId }),
      expect.objectContaining({
        kind: 'schema.changed',
        tableId: table.tableId,
        schemaVersion: restored.schemaVersion,
      }),
      expect.objectContaining({ kind: 'row.created', tableId: table.tableId, rowId: added.id }),
    ]);
    // The whole feed is still there: the changes from before the backup come first.
    const all = await server().request('GET', `${feed}?limit=1000`, { token: admin() });
    expect(all.body.data.slice(0, 2).map((change: { kind: string }) => change.kind)).toEqual([
      'table.created',
      'row.created',
    ]);
  });

  it('refuses a replace without the current version, before any job', async () => {
    const { databaseId } = await workspace();
    const backup = await runBackup(server(), admin(), orgId(), databaseId);
    const missing = await requestRestore(server(), admin(), orgId(), databaseId, backup.jobId, { target: 'replace' });
    expectError(missing, 422, 'VALIDATION_FAILED');
    const stale = await requestRestore(server(), admin(), orgId(), databaseId, backup.jobId, {
      target: 'replace',
      expectedVersion: '999',
    });
    expectError(stale, 409, 'ROW_VERSION_CONFLICT');
    const unknown = await requestRestore(server(), admin(), orgId(), databaseId, '01ARZ3NDEKTSV4RRFFQ69G5FAV', {
      target: 'new-database',
    });
    expectError(unknown, 404, 'RESOURCE_NOT_FOUND');
  });

  it('refuses corrupted, truncated and expired backups before anything changes', async () => {
    const { databaseId, customers } = await workspace();
    const picture = async () => pictureOf(server(), databaseId);
    const location = (backupId: string) => join(dir, orgId(), databaseId, backupId);
    const version = await databaseVersion(server(), admin(), orgId(), databaseId);

    const corrupted = await runBackup(server(), admin(), orgId(), databaseId);
    const rowsFile = join(location(corrupted.jobId), 'tables', customers.tableId, 'rows.copy.gz');
    const bytes = readFileSync(rowsFile);
    bytes[Math.floor(bytes.length / 2)]! ^= 0xff;
    writeFileSync(rowsFile, bytes);
    const truncated = await runBackup(server(), admin(), orgId(), databaseId);
    const historyFile = join(location(truncated.jobId), 'tables', customers.tableId, 'history.copy.gz');
    truncateSync(historyFile, readFileSync(historyFile).length - 7);
    const before = await picture();

    for (const backupId of [corrupted.jobId, truncated.jobId]) {
      const preview = await finished(
        server(),
        admin(),
        await requestPreview(server(), admin(), orgId(), databaseId, backupId),
      );
      expect(preview.state).toBe('failed');
      expect(preview.error.code).toBe('ARTIFACT_UNVERIFIED');
      const restore = await finished(
        server(),
        admin(),
        await requestRestore(server(), admin(), orgId(), databaseId, backupId, {
          target: 'replace',
          expectedVersion: version,
        }),
      );
      expect(restore.state).toBe('failed');
      expect(restore.error.code).toBe('ARTIFACT_UNVERIFIED');
    }
    expect(await picture()).toEqual(before);
    expect(await databaseVersion(server(), admin(), orgId(), databaseId)).toBe(version);

    const expired = await runBackup(server(), admin(), orgId(), databaseId);
    await server().prisma.backup.update({
      where: { id: expired.jobId },
      data: { expiresAt: new Date(Date.now() - 1000) },
    });
    expectError(
      await requestRestore(server(), admin(), orgId(), databaseId, expired.jobId, { target: 'new-database' }),
      410,
      'ARTIFACT_EXPIRED',
    );
    expectError(await requestPreview(server(), admin(), orgId(), databaseId, expired.jobId), 410, 'ARTIFACT_EXPIRED');
    expect(await picture()).toEqual(before);
  });
});

describe('destination test', () => {
  it('writes, reads back and deletes a probe; admin only', async () => {
    const path = `/v1/orgs/${orgId()}/backup-destination/test`;
    const job = await finished(
      server(),
      admin(),
      await server().request('POST', path, { token: admin(), idempotencyKey: idempotencyKey() }),
    );
    expect(job.state, JSON.stringify(job)).toBe('succeeded');
    expect(job.result).toEqual({ destination: 'local', probeBytes: 65536, wrote: true, readBack: true, deleted: true });
    expect(readdirSync(dir).filter((entry) => entry === 'probes')).toEqual([]);
    const member = await addMember(server().prisma, orgId(), 'member');
    expectError(
      await server().request('POST', path, { token: member.apiKey, idempotencyKey: idempotencyKey() }),
      403,
      'FORBIDDEN',
    );
  });
});
