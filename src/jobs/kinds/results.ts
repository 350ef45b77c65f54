import type { z } from 'zod';
import type { JobKind } from '../engine/kinds.ts';
import { DeleteDatabaseResult, DeleteTableResult } from './trash/results.ts';
import { ExportDatabaseResult, ExportRowsResult } from './exports/results.ts';
import { ImportRowsResult, PreviewImportRowsResult } from './imports/results.ts';
import {
  PreviewDatabaseRestoreResult,
  RestoreDatabaseBackupResult,
  RunDatabaseBackupResult,
  SaveBackupScheduleResult,
  TestBackupDestinationResult,
} from './backups/results.ts';
import {
  ApplySchemaChangeResult,
  CreateForeignKeyResult,
  CreateUniqueRuleResult,
  DeleteUniqueRuleResult,
  FieldChangeResult,
  ReorderFieldsResult,
  UpdateTableResult,
} from './schema/results.ts';

/*
 * The declared `result` of every job kind, with no handler code: the API process reads it for the OpenAPI `Job`
 * schema (one variant per kind) without loading what workers run. Each handler names the same schema as its
 * `result` (test/job-results.test.ts holds the two registers together).
 */
export const JOB_RESULTS = {
  previewImportRows: PreviewImportRowsResult,
  importRows: ImportRowsResult,
  createField: FieldChangeResult,
  updateField: FieldChangeResult,
  deleteField: FieldChangeResult,
  reorderFields: ReorderFieldsResult,
  applySchemaChange: ApplySchemaChangeResult,
  createUniqueRule: CreateUniqueRuleResult,
  createForeignKey: CreateForeignKeyResult,
  deleteDatabase: DeleteDatabaseResult,
  deleteTable: DeleteTableResult,
  deleteUniqueRule: DeleteUniqueRuleResult,
  updateTable: UpdateTableResult,
  exportRows: ExportRowsResult,
  exportView: ExportRowsResult,
  exportDatabase: ExportDatabaseResult,
  runDatabaseBackup: RunDatabaseBackupResult,
  previewDatabaseRestore: PreviewDatabaseRestoreResult,
  restoreDatabaseBackup: RestoreDatabaseBackupResult,
  saveBackupSchedule: SaveBackupScheduleResult,
  testBackupDestination: TestBackupDestinationResult,
} as const satisfies Record<JobKind, z.ZodType>;
