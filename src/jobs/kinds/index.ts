import type { ActivityCategory } from '../../formats.ts';
import type { JobHandler, RegisteredJobHandler } from '../engine/handler.ts';
import { previewImportRows } from './imports/preview.ts';
import { importRows } from './imports/rows.ts';
import { deleteDatabase } from './deleteDatabase.ts';
import { deleteTable } from './deleteTable.ts';
import { deleteUniqueRule } from './deleteUniqueRule.ts';
import { exportDatabase } from './export-database.ts';
import { exportRows, exportView } from './export-rows.ts';
import { updateTableIndexes } from './indexes.ts';

import { previewDatabaseRestore } from './backups/preview-restore.ts';
import { restoreDatabaseBackup } from './backups/restore.ts';
import { runDatabaseBackup } from './backups/run-backup.ts';
import { saveBackupSchedule } from './backups/save-schedule.ts';
import { testBackupDestination } from './backups/test-destination.ts';
import { schemaChangeHandlers } from './schema/handlers.ts';

/*
 * The one register of job kinds: adding a kind is one line in each table below. A kind's file may import types
 * from here, never values: this file imports the kinds, and that cycle would leave JOB_CATEGORIES uninitialised
 * while they load.
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

function registered(handler: JobHandler): RegisteredJobHandler {
  const category: ActivityCategory | undefined = JOB_CATEGORIES[handler.kind as JobKind];
  if (category === undefined) throw new Error(`The job kind ${handler.kind} is missing from JOB_CATEGORIES.`);
  return { ...handler, category };
}

/** Every job kind a worker runs. */
export const JOB_HANDLERS: readonly RegisteredJobHandler[] = [
  previewImportRows,
  importRows,
  ...schemaChangeHandlers,
  deleteDatabase,
  deleteTable,
  deleteUniqueRule,
  updateTableIndexes,
  exportRows,
  exportView,
  exportDatabase,

  runDatabaseBackup,
  previewDatabaseRestore,
  restoreDatabaseBackup,
  saveBackupSchedule,
  testBackupDestination,
].map(registered);
