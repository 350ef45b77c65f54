import { PLAIN_EVENTS } from '../../catalog/activity.ts';
import type { ActivityCategory } from '../../kernel/formats.ts';

/*
 * The vocabulary of job kinds, with no handler code: the API process reads it (job filters, activity categories)
 * without loading what workers run (src/jobs/kinds/registry.ts holds the handlers).
 */

/** Every kind of durable job and the activity category its events go to (spec §6 operation names). */
export const JOB_CATEGORIES = {
  previewImportRows: 'imports',
  importRows: 'imports',
  createField: 'schema',
  updateField: 'schema',
  deleteField: 'schema',
  reorderFields: 'schema',
  applySchemaChange: 'schema',
  createUniqueRule: 'schema',
  createForeignKey: 'schema',
  deleteDatabase: 'schema',
  deleteTable: 'schema',
  deleteUniqueRule: 'schema',
  updateTable: 'schema',
  exportRows: 'exports',
  exportView: 'exports',
  exportDatabase: 'exports',

  runDatabaseBackup: 'backups',
  previewDatabaseRestore: 'restores',
  restoreDatabaseBackup: 'restores',
  saveBackupSchedule: 'backups',
  testBackupDestination: 'backups',
} as const satisfies Record<string, ActivityCategory>;

export type JobKind = keyof typeof JOB_CATEGORIES;
export const JOB_KINDS = Object.keys(JOB_CATEGORIES) as JobKind[];

/** Kinds whose success is recorded as `job.<kind>.succeeded`; the others record a domain event (`field.create`, …). */
const SUCCESS_AS_JOB_EVENT: ReadonlySet<JobKind> = new Set<JobKind>([
  'previewImportRows',
  'importRows',
  'exportRows',
  'exportView',
  'exportDatabase',
  'runDatabaseBackup',
  'previewDatabaseRestore',
  'testBackupDestination',
]);

/** Operations whose job events spec §6 names, done here without a job: still valid filter values. */
const OPERATIONS_WITHOUT_JOB = ['createTable', 'deleteForeignKey'] as const;

const JOB_EVENT_SUFFIXES = ['cancelled', 'failed', 'partially_completed', 'queued'] as const;

/** Every event kind of spec §6: the plain kinds and `job.<operation>.<suffix>`. */
export const ACTIVITY_EVENTS: readonly string[] = [
  ...PLAIN_EVENTS,
  ...[...JOB_KINDS, ...OPERATIONS_WITHOUT_JOB].flatMap((kind) => [
    ...(SUCCESS_AS_JOB_EVENT.has(kind as JobKind) ? [`job.${kind}.succeeded`] : []),
    ...JOB_EVENT_SUFFIXES.map((suffix) => `job.${kind}.${suffix}`),
  ]),
];

/**
 * The serial key of a table's schema jobs: the queue runs at most one unfinished job per key, so schema changes,
 * rule deletions and restores of one table never overlap, and writes that would race a cutover can be refused.
 */
export function schemaSerialKey(tableId: string): string {
  return `schema:${tableId}`;
}
