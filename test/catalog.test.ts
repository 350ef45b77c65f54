import { cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate, MIGRATIONS_DIR } from '../src/db/migrate.ts';
import { getDatamodel } from '../src/generated/pothos-types.ts';
import { newId } from '../src/kernel/ids.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';

let server: TestServer;

beforeAll(async () => {
  // No worker: the round trip inserts a queued job row, which a worker would claim while the test reads it back.
  server = await startTestServer({ RUN_WORKER: 'false' });
});
afterAll(() => server.close());

/** schema.prisma's scalar type → the PostgreSQL types our migrations may use for it. */
const COLUMN_TYPES: Record<string, string[]> = {
  String: ['character', 'character varying', 'text'],
  Boolean: ['boolean'],
  Int: ['integer'],
  BigInt: ['bigint'],
  DateTime: ['timestamp with time zone'],
  Json: ['jsonb'],
  Bytes: ['bytea'],
};

const snake = (name: string) => name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);

const TABLE_OF_MODEL: Record<string, string> = {
  User: 'users',
  Org: 'orgs',
  Member: 'members',
  ApiKey: 'api_keys',
  Session: 'sessions',
  Preference: 'preferences',
  IdempotencyRecord: 'idempotency_records',
  ActivityEvent: 'activity_events',
  Database: 'databases',
  DataTable: 'data_tables',
  Field: 'fields',
  UniqueRule: 'unique_rules',
  TableIndex: 'table_indexes',
  ForeignKey: 'foreign_keys',
  ServiceSecret: 'service_secrets',
  SavedView: 'saved_views',
  Job: 'jobs',
  JobArtifact: 'job_artifacts',
  JobArtifactChunk: 'job_artifact_chunks',
  Invitation: 'invitations',
  OAuthClient: 'oauth_clients',
  OAuthCode: 'oauth_codes',
  OAuthToken: 'oauth_tokens',
  EmailVerification: 'email_verifications',
  Backup: 'backups',
  BackupSettings: 'backup_settings',
  BackupRun: 'backup_runs',
};

interface Column {
  table_name: string;
  column_name: string;
  data_type: string;
  udt_name: string;
  is_nullable: 'YES' | 'NO';
}

describe('the migrated catalog matches prisma/schema.prisma', () => {
  it('has a column of the right type and nullability for every scalar field of every model', async () => {
    const columns = await server.prisma.$queryRaw<Column[]>`
      SELECT table_name, column_name, data_type, udt_name, is_nullable FROM information_schema.columns WHERE table_schema = 'public'`;
    const byKey = new Map(columns.map((column) => [`${column.table_name}.${column.column_name}`, column]));
    const { models } = getDatamodel().datamodel;
    const enums = new Set(['Role', 'KeyScope', 'KeyAccess', 'JobState']);
    const checked: string[] = [];
    for (const [model, { fields }] of Object.entries(models)) {
      const table = TABLE_OF_MODEL[model];
      expect(table, `table of ${model}`).toBeDefined();
      for (const field of fields.filter((f) => f.kind === 'scalar' || f.kind === 'enum')) {
        const column = byKey.get(`${table}.${snake(field.name)}`);
        expect(column, `${model}.${field.name}`).toBeDefined();
        if (enums.has(field.type)) expect(column!.udt_name).toBe(field.type);
        else if (field.isList) expect(column!.data_type, `${model}.${field.name} is a list`).toBe('ARRAY');
        else expect(COLUMN_TYPES[field.type], `${model}.${field.name} ${field.type}`).toContain(column!.data_type);
        expect(column!.is_nullable, `${model}.${field.name} nullability`).toBe(field.isRequired ? 'NO' : 'YES');
        checked.push(`${model}.${field.name}`);
      }
    }
    const modelTables = new Set(Object.values(TABLE_OF_MODEL));
    const extra = columns.filter((column) => modelTables.has(column.table_name)).length - checked.length;
    expect(extra, 'columns that schema.prisma does not know').toBe(0);
  });

  it('round-trips every model through the Prisma client', async () => {
    const { prisma } = server;
    const user = await prisma.user.create({
      data: { id: newId(), email: `${newId()}@example.com`, name: 'Round Trip' },
    });
    const org = await prisma.org.create({ data: { id: newId(), name: 'Round Trip Org' } });
    await prisma.member.create({ data: { id: newId(), orgId: org.id, userId: user.id, role: 'viewer' } });
    await prisma.apiKey.create({
      data: {
        id: newId(),
        scope: 'personal',
        orgId: org.id,
        userId: user.id,
        createdByUserId: user.id,
        name: 'k',
        prefix: newId().slice(0, 12).toLowerCase(),
        secretHash: 'a'.repeat(64),
        access: 'read',
      },
    });
    await prisma.session.create({
      data: {
        id: newId(),
        userId: user.id,
        tokenHash: 'b'.repeat(64),
        csrfTokenHash: 'c'.repeat(64),
        expiresAt: new Date(Date.now() + 60_000),
      },
    });
    await prisma.invitation.create({
      data: {
        id: newId(),
        orgId: org.id,
        email: 'invitee@example.com',
        role: 'member',
        tokenHash: 'e'.repeat(64),
        invitedByUserId: user.id,
        expiresAt: new Date(Date.now() + 60_000),
      },
    });
    const client = await prisma.oAuthClient.create({
      data: { id: newId(), name: 'Client', redirectUris: ['https://app.example/cb'] },
    });
    await prisma.oAuthCode.create({
      data: {
        id: newId(),
        codeHash: 'f'.repeat(64),
        clientId: client.id,
        userId: user.id,
        redirectUri: 'https://app.example/cb',
        scopes: ['rows:read'],
        codeChallenge: 'x'.repeat(43),
        familyId: newId(),
        expiresAt: new Date(),
      },
    });
    await prisma.oAuthToken.create({
      data: {
        id: newId(),
        kind: 'access',
        tokenHash: '1'.repeat(64),
        familyId: newId(),
        clientId: client.id,
        userId: user.id,
        scopes: ['rows:read'],
        audience: 'a',
        expiresAt: new Date(),
      },
    });
    expect(
      await prisma.oAuthClient.findUniqueOrThrow({ where: { id: client.id }, include: { codes: true, tokens: true } }),
    ).toMatchObject({
      redirectUris: ['https://app.example/cb'],
      codes: [{ scopes: ['rows:read'] }],
      tokens: [{ kind: 'access' }],
    });
    await prisma.user.update({
      where: { id: user.id },
      data: { failedLogins: 1, lockedUntil: new Date(), totpSecret: 'JBSWY3DPEHPK3PXP', totpLastStep: 12345 },
    });
    await prisma.preference.create({
      data: {
        userId: user.id,
        timezone: 'UTC',
        locale: 'en-US',
        dateFormat: 'year-month-day',
        timeFormat: '24-hour',
        theme: 'dark',
      },
    });
    await prisma.idempotencyRecord.create({
      data: {
        actorKey: `user:${user.id}`,
        key: 'roundtrip',
        slot: 1n,
        operation: 'op',
        fingerprint: 'd'.repeat(64),
        outcome: { ok: true },
        expiresAt: new Date(),
      },
    });
    await prisma.activityEvent.create({
      data: {
        id: newId(),
        orgId: org.id,
        category: 'records',
        event: 'records.changed',
        summary: 's',
        actorId: user.id,
        actorKind: 'user',
        actorName: 'Round Trip',
        affectedRows: 1,
      },
    });
    const database = await prisma.database.create({ data: { id: newId(), orgId: org.id, name: 'Round Trip DB' } });
    const table = await prisma.dataTable.create({
      data: { id: newId(), orgId: org.id, databaseId: database.id, name: 'T' },
    });
    const field = await prisma.field.create({
      data: { id: newId(), tableId: table.id, name: 'F', type: 'text', options: { maxLength: 5 }, position: 0 },
    });
    const rule = await prisma.uniqueRule.create({ data: { id: newId(), tableId: table.id, fieldIds: [field.id] } });
    await prisma.foreignKey.create({
      data: {
        id: newId(),
        tableId: table.id,
        fieldIds: [field.id],
        referencedTableId: table.id,
        referencedRuleId: rule.id,
      },
    });
    await prisma.tableIndex.create({
      data: {
        id: newId(),
        tableId: table.id,
        keys: [{ fieldId: field.id, direction: 'asc' }],
        signature: `${field.id}:asc`,
        origin: 'explicit',
      },
    });
    const loadedTable = await prisma.dataTable.findUniqueOrThrow({
      where: { id: table.id },
      include: { fields: true, uniqueRules: true, foreignKeys: true, indexes: true },
    });
    expect([loadedTable.indexes[0]!.state, loadedTable.indexVersion]).toEqual(['building', 0]);
    expect(loadedTable.fields[0]!.options).toEqual({ maxLength: 5 });
    expect(loadedTable.uniqueRules[0]!.fieldIds).toEqual([field.id]);
    expect(loadedTable.foreignKeys[0]!.referencedRuleId).toBe(rule.id);
    expect([loadedTable.schemaVersion, loadedTable.rowCount]).toEqual([1, 0n]);
    const job = await prisma.job.create({
      data: {
        id: newId(),
        orgId: org.id,
        kind: 'previewImportRows',
        payload: { a: 1 },
        actorId: user.id,
        actorKind: 'user',
        actorName: 'Round Trip',
      },
    });
    await prisma.jobArtifact.create({
      data: {
        jobId: job.id,
        name: 'errors.jsonl',
        contentType: 'application/x-ndjson',
        content: Buffer.from('{}\n'),
        sizeBytes: 3n,
        sha256: 'e'.repeat(64),
        expiresAt: new Date(),
      },
    });
    const loadedJob = await prisma.job.findUniqueOrThrow({ where: { id: job.id }, include: { artifacts: true } });
    expect([loadedJob.state, loadedJob.journal, Buffer.from(loadedJob.artifacts[0]!.content).toString()]).toEqual([
      'queued',
      {},
      '{}\n',
    ]);
    const loaded = await prisma.user.findUniqueOrThrow({
      where: { id: user.id },
      include: {
        memberships: { include: { org: { include: { activity: true, apiKeys: true } } } },
        sessions: true,
        preference: true,
      },
    });
    expect(loaded.memberships[0]!.org.activity).toHaveLength(1);
    expect(loaded.memberships[0]!.org.apiKeys).toHaveLength(1);
    expect(await prisma.invitation.count({ where: { orgId: org.id, invitedByUserId: user.id } })).toBe(1);
    expect(loaded).toMatchObject({ failedLogins: 1, totpSecret: 'JBSWY3DPEHPK3PXP', totpLastStep: 12345 });
    expect(loaded.sessions).toHaveLength(1);
    expect(loaded.preference!.theme).toBe('dark');
    expect(loaded.memberships[0]!.version).toBe(1n);
  });
});

describe('the migration runner', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(() => database.drop());

  it('applies nothing twice and keeps Prisma’s bookkeeping', async () => {
    expect(await migrate(database.url)).toEqual([]);
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    const { rows } = await client.query('SELECT migration_name, checksum, finished_at FROM "_prisma_migrations"');
    await client.end();
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) expect(row.checksum).toMatch(/^[0-9a-f]{64}$/);
  });

  it('refuses to run when an applied migration was edited', async () => {
    const copy = mkdtempSync(path.join(tmpdir(), 'wds-migrations-'));
    cpSync(MIGRATIONS_DIR, copy, { recursive: true });
    const first = path.join(copy, '20261121000000_catalog', 'migration.sql');
    writeFileSync(first, '-- edited\n', { flag: 'a' });
    await expect(migrate(database.url, copy)).rejects.toThrow(/checksum mismatch/);
  });
});
