import { z } from 'zod';
import { PreviewBackupScheduleBody } from '../../../graph/backups/schedule-preview.ts';
import { RestoreBackupBody } from '../../../graph/backups/backups.ts';
import { BackupPolicyBody, SaveBackupScheduleBody } from '../../../graph/backups/schedule.ts';
import { Id, Timestamp } from '../../../kernel/formats.ts';
import {
  DeleteBackupScheduleDocument,
  GetBackupScheduleDocument,
  ListBackupsDocument,
  PreviewBackupScheduleDocument,
  PreviewDatabaseRestoreDocument,
  RestoreDatabaseBackupDocument,
  RunDatabaseBackupDocument,
  SaveBackupScheduleDocument,
  TestBackupDestinationDocument,
  UpdateBackupPolicyDocument,
} from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';
import { JobHandleResponse } from './jobs.ts';
import { Page, PageQuery } from '../../../contracts/pages.ts';

/** Spec 2.9: exactly the next three runs, ascending. */
export const BackupSchedulePreviewResponse = z.strictObject({
  nextRuns: z.array(Timestamp).length(3),
});

export const BackupScheduleResponse = z.strictObject({
  databaseId: Id,
  schedule: z.strictObject({ cron: z.string(), timezone: z.string() }).nullable(),
  policy: z.strictObject({ keepLast: z.number().int().nullable(), keepDays: z.number().int().nullable() }),
  nextRuns: z.array(Timestamp).max(3),
  lastSuccessAt: Timestamp.nullable(),
  overdueSince: Timestamp.nullable(),
  failedJobId: Id.nullable(),
  version: z.string(),
});

export const BackupResponse = z.strictObject({
  id: Id,
  databaseId: Id,
  createdAt: Timestamp,
  size: z.number().int().min(0),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  tables: z.number().int().min(0),
  rows: z.number().int().min(0),
  expiresAt: Timestamp.nullable(),
  scheduledFor: Timestamp.nullable(),
  destination: z.enum(['local', 's3']),
});

const DatabasePath = z.strictObject({ orgId: Id, databaseId: Id });
const BackupPath = z.strictObject({ orgId: Id, databaseId: Id, backupId: Id });
const DATABASE = '/v1/orgs/{orgId}/databases/{databaseId}';
const none = z.strictObject({});

export const backupRoutes = [
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/backup-schedule/preview',
    summary: 'Preview backup schedule (endpoint 7): the next three runs of a cron expression in a timezone',
    tags: ['backups'],
    operation: PreviewBackupScheduleDocument,
    params: z.strictObject({ orgId: Id, databaseId: Id }),
    query: z.strictObject({}),
    body: PreviewBackupScheduleBody,
    // A preview changes nothing, so spec 4.1 exempts it from Idempotency-Key.
    idempotent: false,
    successStatus: 200,
    response: BackupSchedulePreviewResponse,
  }),
  defineRoute({
    method: 'GET',
    path: `${DATABASE}/backup-schedule`,
    summary: 'A database’s backup schedule, retention policy, next three runs and last success',
    tags: ['backups'],
    operation: GetBackupScheduleDocument,
    params: DatabasePath,
    query: none,
    idempotent: false,
    successStatus: 200,
    response: BackupScheduleResponse,
  }),
  defineRoute({
    method: 'PUT',
    path: `${DATABASE}/backup-schedule`,
    summary: 'Set the backup schedule (job saveBackupSchedule)',
    tags: ['backups'],
    operation: SaveBackupScheduleDocument,
    params: DatabasePath,
    query: none,
    body: SaveBackupScheduleBody,
    idempotent: true,
    successStatus: 202,
    response: JobHandleResponse,
  }),
  defineRoute({
    method: 'DELETE',
    path: `${DATABASE}/backup-schedule`,
    summary: 'Stop scheduled backups',
    tags: ['backups'],
    operation: DeleteBackupScheduleDocument,
    params: DatabasePath,
    query: none,
    idempotent: true,
    successStatus: 200,
    response: BackupScheduleResponse,
  }),
  defineRoute({
    method: 'PUT',
    path: `${DATABASE}/backup-policy`,
    summary: 'Set the backup retention policy',
    tags: ['backups'],
    operation: UpdateBackupPolicyDocument,
    params: DatabasePath,
    query: none,
    body: BackupPolicyBody,
    idempotent: true,
    successStatus: 200,
    response: BackupScheduleResponse,
  }),
  defineRoute({
    method: 'POST',
    path: `${DATABASE}/backups`,
    summary: 'Back the database up now (job runDatabaseBackup)',
    tags: ['backups'],
    operation: RunDatabaseBackupDocument,
    params: DatabasePath,
    query: none,
    idempotent: true,
    successStatus: 202,
    response: JobHandleResponse,
  }),
  defineRoute({
    method: 'GET',
    path: `${DATABASE}/backups`,
    summary: 'A database’s backups, newest first',
    tags: ['backups'],
    operation: ListBackupsDocument,
    params: DatabasePath,
    query: PageQuery,
    idempotent: false,
    successStatus: 200,
    response: Page(BackupResponse),
  }),
  defineRoute({
    method: 'POST',
    path: `${DATABASE}/backups/{backupId}/restore-preview`,
    summary: 'Verify a backup and report what a restore would change (job previewDatabaseRestore)',
    tags: ['backups'],
    operation: PreviewDatabaseRestoreDocument,
    params: BackupPath,
    query: none,
    idempotent: true,
    successStatus: 202,
    response: JobHandleResponse,
    errorStatuses: [410],
  }),
  defineRoute({
    method: 'POST',
    path: `${DATABASE}/backups/{backupId}/restore`,
    summary: 'Restore a backup as a new database or over this one (job restoreDatabaseBackup)',
    tags: ['backups'],
    operation: RestoreDatabaseBackupDocument,
    params: BackupPath,
    query: none,
    body: RestoreBackupBody,
    idempotent: true,
    successStatus: 202,
    response: JobHandleResponse,
    errorStatuses: [410],
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/backup-destination/test',
    summary: 'Write, read back and delete a probe at the backup destination (job testBackupDestination)',
    tags: ['backups'],
    operation: TestBackupDestinationDocument,
    params: z.strictObject({ orgId: Id }),
    query: none,
    idempotent: true,
    successStatus: 202,
    response: JobHandleResponse,
  }),
];
