import { z } from 'zod';
import { Id, SchemaVersion, Timestamp } from '../../../kernel/formats.ts';

/* What the backup and restore kinds answer as a job's `result` (read by the OpenAPI `Job` through src/jobs/kinds/results.ts). */

const Count = z.number().int().min(0);
const Sha256 = z.string().regex(/^[0-9a-f]{64}$/);
const TableBrief = z.strictObject({ id: Id, name: z.string() });

export const RunDatabaseBackupResult = z
  .strictObject({
    backupId: Id,
    databaseId: Id,
    createdAt: Timestamp.describe('The snapshot’s instant.'),
    sizeBytes: Count,
    sha256: Sha256.describe('Of the backup’s manifest, which holds every file’s digest.'),
    tables: Count,
    rows: Count,
    pruned: z
      .array(z.strictObject({ id: Id, createdAt: Timestamp }))
      .describe('Older backups removed by the retention rule.'),
  })
  .meta({ id: 'RunDatabaseBackupResult' });
export type RunDatabaseBackupResult = z.infer<typeof RunDatabaseBackupResult>;

export const PreviewDatabaseRestoreResult = z
  .strictObject({
    backupId: Id,
    verified: z.literal(true),
    snapshotAt: Timestamp,
    formatVersion: z.number().int(),
    files: Count,
    tablesAdded: z.array(TableBrief),
    tablesRemoved: z.array(TableBrief),
    tablesAltered: z.array(
      TableBrief.extend({ schemaVersionBefore: SchemaVersion, schemaVersionAfter: SchemaVersion }),
    ),
    rowCounts: z.array(z.strictObject({ tableId: Id, name: z.string(), before: Count, after: Count })),
  })
  .meta({ id: 'PreviewDatabaseRestoreResult' });
export type PreviewDatabaseRestoreResult = z.infer<typeof PreviewDatabaseRestoreResult>;

export const RestoreDatabaseBackupResult = z
  .strictObject({
    backupId: Id,
    target: z.enum(['replace', 'new-database']),
    databaseId: Id,
    tables: Count,
    rows: Count,
    tableIds: z
      .array(z.strictObject({ from: Id, to: Id }))
      .describe('Each table’s id in the backup and in the restored database (equal for replace).'),
  })
  .meta({ id: 'RestoreDatabaseBackupResult' });
export type RestoreDatabaseBackupResult = z.infer<typeof RestoreDatabaseBackupResult>;

export const SaveBackupScheduleResult = z
  .strictObject({ cron: z.string(), timezone: z.string(), nextRunAt: Timestamp.nullable() })
  .meta({ id: 'SaveBackupScheduleResult' });
export type SaveBackupScheduleResult = z.infer<typeof SaveBackupScheduleResult>;

export const TestBackupDestinationResult = z
  .strictObject({
    destination: z.enum(['local', 's3']),
    probeBytes: Count,
    wrote: z.literal(true),
    readBack: z.literal(true),
    deleted: z.literal(true),
  })
  .meta({ id: 'TestBackupDestinationResult' });
export type TestBackupDestinationResult = z.infer<typeof TestBackupDestinationResult>;
