import { pageById } from '../server/paged.ts';
import type { TransactionClient } from '../../db/prisma.ts';
import { DomainError, notFound } from '../../kernel/errors.ts';
import { Id } from '../../kernel/formats.ts';
import { requireCaller } from '../server/guards.ts';
import { builder } from '../server/builder.ts';
import type { Context } from '../server/context.ts';
import { Cursor, PageLimit } from '../../catalog/cursor.ts';
import { idempotent } from '../../idempotency/run.ts';
import { enqueueJob, JobHandle } from '../jobs/enqueue.ts';
import { startScopes } from '../jobs/start-authority.ts';
import { pageRef } from '../shared/pages.ts';
import { requireDatabase } from '../tables/tables.ts';
import { RestoreBackupBody } from '../../contracts/backups.ts';

/**
 * Backups of a database (issue 16): run one now, list them, preview a restore, restore. The work is done by the
 * job kinds in src/jobs/kinds/backups; here are the rules of who may ask and what a request must hold.
 */
export type BackupShape = {
  id: string;
  databaseId: string;
  createdAt: string;
  size: number;
  sha256: string;
  tables: number;
  rows: number;
  expiresAt: string | null;
  scheduledFor: string | null;
  destination: string;
};

const Backup = builder.objectRef<BackupShape>('Backup').implement({
  description:
    'One backup of a database: a consistent snapshot, compressed, with a manifest of sha256 checksums (docs/backup-format.md).',
  fields: (t) => ({
    id: t.exposeID('id'),
    databaseId: t.exposeID('databaseId'),
    createdAt: t.field({
      type: 'Timestamp',
      description: 'The instant of the snapshot.',
      resolve: (backup) => backup.createdAt,
    }),
    size: t.exposeFloat('size', { description: 'Bytes stored, all objects together.' }),
    sha256: t.exposeString('sha256', {
      description: 'Hex sha256 of the manifest, which holds the sha256 of every other object.',
    }),
    tables: t.exposeInt('tables'),
    rows: t.exposeFloat('rows'),
    expiresAt: t.field({ type: 'Timestamp', nullable: true, resolve: (backup) => backup.expiresAt }),
    scheduledFor: t.field({
      type: 'Timestamp',
      nullable: true,
      description: 'The due instant of a scheduled run; null when run on request.',
      resolve: (backup) => backup.scheduledFor,
    }),
    destination: t.exposeString('destination', { description: '`local` or `s3`.' }),
  }),
});

const BackupPage = pageRef('BackupPage', Backup, 'A page of a database’s backups, newest first.');

interface BackupRow {
  id: string;
  databaseId: string;
  createdAt: Date;
  sizeBytes: bigint;
  sha256: string;
  tables: number;
  rows: bigint;
  expiresAt: Date | null;
  scheduledFor: Date | null;
  destination: string;
}

function toBackupShape(row: BackupRow): BackupShape {
  return {
    id: row.id,
    databaseId: row.databaseId,
    createdAt: row.createdAt.toISOString(),
    size: Number(row.sizeBytes),
    sha256: row.sha256,
    tables: row.tables,
    rows: Number(row.rows),
    expiresAt: row.expiresAt?.toISOString() ?? null,
    scheduledFor: row.scheduledFor?.toISOString() ?? null,
    destination: row.destination,
  };
}

/** The database a backup field addresses. */
const databaseArgs = builder.args((t) => ({
  orgId: t.id({ required: true, validate: Id }),
  databaseId: t.id({ required: true, validate: Id }),
}));

const RestoreBackupInput = builder
  .inputType('RestoreBackupInput', {
    fields: (t) => ({
      target: t.string({
        required: true,
        description: '`new-database` (a copy beside the original) or `replace` (swapped in atomically).',
      }),
      expectedVersion: t.string({ description: 'Required for `replace`: the database’s current version.' }),
      name: t.string({
        description: 'For `new-database`: the copy’s name (default: "<name> (restored <snapshot time>)").',
      }),
    }),
  })
  .validate(RestoreBackupBody);

/** A backup of this database that can still be read: unknown → 404, expired or pruned → 410 before any job. */
async function requireUsableBackup(
  tx: TransactionClient,
  orgId: string,
  databaseId: string,
  backupId: string,
): Promise<void> {
  const backup = await tx.backup.findFirst({
    where: { id: backupId, orgId, databaseId },
    select: { expiresAt: true, prunedAt: true },
  });
  if (!backup) throw notFound('backup');
  if (backup.prunedAt || (backup.expiresAt && backup.expiresAt.getTime() <= Date.now())) {
    throw new DomainError('ARTIFACT_EXPIRED', 'The backup has expired; it can no longer be restored.', {
      details: { backupId },
    });
  }
}

async function requireDatabaseVersion(
  tx: TransactionClient,
  orgId: string,
  databaseId: string,
  expectedVersion: string,
): Promise<void> {
  const database = await tx.database.findFirst({
    where: { id: databaseId, orgId, state: 'active' },
    select: { version: true },
  });
  if (!database) throw notFound('database');
  if (database.version.toString() !== expectedVersion) {
    throw new DomainError(
      'ROW_VERSION_CONFLICT',
      `The database is at version ${database.version}, not ${expectedVersion}.`,
      {
        details: { currentVersion: database.version.toString() },
      },
    );
  }
}

const queueLimit = (context: Context) => context.config.JOB_QUEUE_LIMIT_PER_ORG;

builder.queryFields((t) => ({
  backups: t.field({
    type: BackupPage,
    description: 'A database’s backups that can still be restored, newest first.',
    args: {
      ...databaseArgs,
      limit: t.arg.int({ validate: PageLimit.optional() }),
      cursor: t.arg.string({ validate: Cursor.optional() }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'write' }, oauth: 'backups:read' }),
    resolve: async (_root, args, context) => {
      const [orgId, databaseId] = [String(args.orgId), String(args.databaseId)];
      await requireDatabase(context.prisma, orgId, databaseId);
      return pageById(context, args, {
        scope: `backups:${databaseId}`,
        fetch: ({ after, limit }) =>
          context.prisma.backup.findMany({
            where: { orgId, databaseId, prunedAt: null, ...(after ? { id: { lt: after } } : {}) },
            orderBy: { id: 'desc' },
            take: limit + 1,
          }),
        toItem: toBackupShape,
      });
    },
  }),
}));

builder.mutationFields((t) => ({
  testBackupDestination: t.field({
    type: JobHandle,
    description:
      'Writes, reads back and deletes a probe object at the backup destination (job `testBackupDestination`).',
    args: { idempotencyKey: t.arg.string({ required: true }), orgId: t.arg.id({ required: true, validate: Id }) },
    authScopes: (_root, { orgId }) => startScopes('testBackupDestination', orgId),
    resolve: (_root, args, context) => {
      const orgId = String(args.orgId);
      return idempotent(
        context,
        { operation: 'testBackupDestination', key: args.idempotencyKey, input: { orgId } },
        (tx) =>
          enqueueJob(tx, requireCaller(context), {
            kind: 'testBackupDestination',
            category: 'backups',
            orgId,
            payload: {},
            summary: 'Queued a backup destination test',
            queueLimit: queueLimit(context),
          }),
      );
    },
  }),
  runDatabaseBackup: t.field({
    type: JobHandle,
    description:
      'Backs the database up now (job `runDatabaseBackup`; the backup’s id is the job’s). Needs write authority.',
    args: { idempotencyKey: t.arg.string({ required: true }), ...databaseArgs },
    authScopes: (_root, { orgId }) => startScopes('runDatabaseBackup', orgId),
    resolve: (_root, args, context) => {
      const [orgId, databaseId] = [String(args.orgId), String(args.databaseId)];
      return idempotent(
        context,
        { operation: 'runDatabaseBackup', key: args.idempotencyKey, input: { orgId, databaseId } },
        async (tx) => {
          await requireDatabase(tx, orgId, databaseId);
          return enqueueJob(tx, requireCaller(context), {
            kind: 'runDatabaseBackup',
            category: 'backups',
            orgId,
            databaseId,
            payload: { scheduledFor: null },
            summary: 'Queued a backup',
            queueLimit: queueLimit(context),
          });
        },
      );
    },
  }),
  previewDatabaseRestore: t.field({
    type: JobHandle,
    description:
      'Verifies a backup’s checksums and reports what restoring it would change (job `previewDatabaseRestore`).',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...databaseArgs,
      backupId: t.arg.id({ required: true, validate: Id }),
    },
    authScopes: (_root, { orgId }) => startScopes('previewDatabaseRestore', orgId),
    resolve: (_root, args, context) => {
      const [orgId, databaseId, backupId] = [String(args.orgId), String(args.databaseId), String(args.backupId)];
      return idempotent(
        context,
        { operation: 'previewDatabaseRestore', key: args.idempotencyKey, input: { orgId, databaseId, backupId } },
        async (tx) => {
          await requireDatabase(tx, orgId, databaseId);
          await requireUsableBackup(tx, orgId, databaseId, backupId);
          return enqueueJob(tx, requireCaller(context), {
            kind: 'previewDatabaseRestore',
            category: 'restores',
            orgId,
            databaseId,
            payload: { backupId },
            summary: `Queued a restore preview of backup ${backupId}`,
            queueLimit: queueLimit(context),
          });
        },
      );
    },
  }),
  restoreDatabaseBackup: t.field({
    type: JobHandle,
    description:
      'Restores a backup as a new database or over this one (job `restoreDatabaseBackup`, event `database.restore`).',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...databaseArgs,
      backupId: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: RestoreBackupInput, required: true }),
    },
    authScopes: (_root, { orgId }) => startScopes('restoreDatabaseBackup', orgId),
    resolve: (_root, args, context) => {
      const [orgId, databaseId, backupId] = [String(args.orgId), String(args.databaseId), String(args.backupId)];
      const body = args.input;
      return idempotent(
        context,
        {
          operation: 'restoreDatabaseBackup',
          key: args.idempotencyKey,
          input: { orgId, databaseId, backupId, ...body },
        },
        async (tx) => {
          await requireDatabase(tx, orgId, databaseId);
          await requireUsableBackup(tx, orgId, databaseId, backupId);
          if (body.target === 'replace') await requireDatabaseVersion(tx, orgId, databaseId, body.expectedVersion!);
          return enqueueJob(tx, requireCaller(context), {
            kind: 'restoreDatabaseBackup',
            category: 'restores',
            orgId,
            databaseId,
            payload: {
              backupId,
              target: body.target,
              expectedVersion: body.expectedVersion ?? null,
              name: body.name ?? null,
            },
            // One restore of a database at a time: two replace restores racing would each swap the other's work away.
            serialKey: `restore:${databaseId}`,
            serialConflict: () =>
              new DomainError(
                'SCHEMA_MAINTENANCE',
                'Another restore of this database is queued or running; retry when it has finished.',
                { retryAfter: 5 },
              ),
            summary: `Queued a ${body.target} restore of backup ${backupId}`,
            queueLimit: queueLimit(context),
          });
        },
      );
    },
  }),
}));
