import type { ActivityCategory } from '../../kernel/formats.ts';
import { JOB_CATEGORIES, type JobKind } from '../engine/kinds.ts';
import type { JobHandler, RegisteredJobHandler } from '../engine/handler.ts';
import { previewImportRows } from './imports/previewImportRows.ts';
import { importRows } from './imports/importRows.ts';
import { deleteDatabase } from './trash/deleteDatabase.ts';
import { deleteTable } from './trash/deleteTable.ts';
import { deleteUniqueRule } from './schema/deleteUniqueRule.ts';
import { exportDatabase } from './exports/exportDatabase.ts';
import { exportRows, exportView } from './exports/exportRows.ts';
import { updateTable } from './schema/updateTable.ts';

import { previewDatabaseRestore } from './backups/previewDatabaseRestore.ts';
import { restoreDatabaseBackup } from './backups/restoreDatabaseBackup.ts';
import { runDatabaseBackup } from './backups/runDatabaseBackup.ts';
import { saveBackupSchedule } from './backups/saveBackupSchedule.ts';
import { testBackupDestination } from './backups/testBackupDestination.ts';
import { createField } from './schema/createField.ts';
import { updateField } from './schema/updateField.ts';
import { deleteField } from './schema/deleteField.ts';
import { reorderFields } from './schema/reorderFields.ts';
import { applySchemaChange } from './schema/applySchemaChange.ts';
import { createUniqueRule } from './schema/createUniqueRule.ts';
import { createForeignKey } from './schema/createForeignKey.ts';

/*
 * The one register of job handlers: adding a kind is one line here and one in JOB_CATEGORIES
 * (src/jobs/engine/kinds.ts). Kind files import the kind vocabulary from there, never from here.
 */

function registered(handler: JobHandler): RegisteredJobHandler {
  const category: ActivityCategory | undefined = JOB_CATEGORIES[handler.kind as JobKind];
  if (category === undefined) throw new Error(`The job kind ${handler.kind} is missing from JOB_CATEGORIES.`);
  return { ...handler, category };
}

/** Every job kind a worker runs. */
export const JOB_HANDLERS: readonly RegisteredJobHandler[] = [
  previewImportRows,
  importRows,
  createField,
  updateField,
  deleteField,
  reorderFields,
  applySchemaChange,
  createUniqueRule,
  createForeignKey,
  deleteDatabase,
  deleteTable,
  deleteUniqueRule,
  updateTable,
  exportRows,
  exportView,
  exportDatabase,

  runDatabaseBackup,
  previewDatabaseRestore,
  restoreDatabaseBackup,
  saveBackupSchedule,
  testBackupDestination,
].map(registered);
