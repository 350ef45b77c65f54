import { z } from 'zod';
import { pgExecutor, type SqlExecutor } from '../../../db/sql.ts';
import { DomainError } from '../../../kernel/errors.ts';
import { newId } from '../../../kernel/ids.ts';
import { schemaVersionConflict, type TableSchema } from '../../../catalog/table-schema.ts';
import type { JobHandler, JobOutcome, JobRun } from '../../engine/handler.ts';
import { succeededEvent } from '../../engine/handler.ts';
import { countRows, readUpload, writeReport } from './previewImportRows.ts';
import { ImportRowsResult } from './results.ts';
import { ImportSpec, validateImport, type ValidationJournal } from './pipeline.ts';
import {
  dropStaging,
  insertProblems,
  insertStaged,
  removeImported,
  runCheck,
  selectInsertable,
  type Problem,
} from './staging.ts';
import { insertActivity } from '../../../data/activity.ts';

/**
 * Import (append-only) of a previewed file: validates it again against the table as it is now, then inserts
 * the valid rows in batches of INSERT_BATCH, each batch one checkpointed step (valid-rows-only), or every row in
 * one transaction (all-or-nothing). Each row gets its initial cell history; the import ends with one
 * `records.changed` entry carrying `affectedRows`.
 */
const INSERT_BATCH = 1_000;

export const ImportRowsPayload = z.object({
  spec: ImportSpec,
  previewJobId: z.string(),
  mode: z.enum(['valid-rows-only', 'all-or-nothing']),
});
export type ImportRowsPayload = z.infer<typeof ImportRowsPayload>;

type ImportJournal =
  | ValidationJournal
  | { phase: 'insert'; fromLine: number; inserted: number }
  | { phase: 'done'; outcome: JobOutcome<ImportRowsResult> };

type Run = JobRun<ImportRowsPayload, ImportJournal>;

interface TableGuard {
  schema_version: number;
  row_count: string;
}

/** Holds the table's catalog row for the batch: schema changes and row creates wait, capacity is exact. */
async function lockTable(sql: SqlExecutor, schema: TableSchema, rowLimit: number): Promise<number> {
  const [row] = await sql.query<TableGuard>(
    `SELECT schema_version, row_count::text AS row_count FROM public.data_tables WHERE id = $1::bpchar AND state = 'active' FOR UPDATE`,
    [schema.tableId],
  );
  if (!row) throw new DomainError('RESOURCE_NOT_FOUND', 'The table was deleted during the import.');
  if (row.schema_version !== schema.schemaVersion)
    throw schemaVersionConflict(schema.schemaVersion, row.schema_version);
  return Math.max(rowLimit - Number(row.row_count), 0);
}

/**
 * Inserts one batch of clean lines starting at `fromLine`. Foreign keys are checked again first (a referenced row
 * may have gone since the check); lines beyond the table's row limit, and lines that meet a unique value written
 * since the check, are reported instead of inserted. Returns the next line and the rows inserted.
 */
async function insertBatch(
  sql: SqlExecutor,
  run: Run,
  schema: TableSchema,
  fromLine: number,
  limit: number,
): Promise<{ next: number | null; inserted: number }> {
  const jobId = run.job.id;
  const available = await lockTable(sql, schema, run.config.TABLE_ROW_LIMIT);
  const window = await sql.query<{ line: number }>(
    selectInsertable(jobId, fromLine, limit).sql,
    selectInsertable(jobId, fromLine, limit).params,
  );
  if (window.length === 0) return { next: null, inserted: 0 };
  const lastLine = window[window.length - 1]!.line;
  for (const key of schema.foreignKeys) {
    const check = {
      kind: 'foreignKey' as const,
      key,
      fields: key.fieldIds.map((id) => schema.fieldsById.get(id)!),
      label: '',
    };
    if (!run.payload.spec.mapping.some((item) => key.fieldIds.includes(item.fieldId))) continue;
    const statement = runCheck(jobId, schema, check, fromLine, lastLine + 1, true);
    await sql.run(statement);
  }
  const lines = (
    await sql.query<{ line: number }>(
      selectInsertable(jobId, fromLine, limit).sql,
      selectInsertable(jobId, fromLine, limit).params,
    )
  ).filter((row) => row.line <= lastLine);
  const fits = lines.slice(0, available);
  const problems: Problem[] = lines.slice(available).map((row) => ({
    line: row.line,
    label: null,
    fieldId: null,
    code: 'ROW_LIMIT_REACHED',
    message: `the table holds its maximum of ${run.config.TABLE_ROW_LIMIT} rows`,
  }));
  let inserted = 0;
  if (fits.length > 0) {
    const rows = fits.map((row) => ({ id: newId(), line: row.line }));
    const statement = insertStaged(jobId, schema, rows, jobId, run.job.actor);
    const returned = new Set((await sql.run<{ id: string }>(statement)).map((row) => row.id));
    inserted = returned.size;
    for (const row of rows) {
      if (!returned.has(row.id))
        problems.push({
          line: row.line,
          label: null,
          fieldId: null,
          code: 'UNIQUE_CONFLICT',
          message: 'a row with the same unique values was added after the check',
        });
    }
    await sql.query('UPDATE public.data_tables SET row_count = row_count + $2 WHERE id = $1::bpchar', [
      schema.tableId,
      inserted,
    ]);
  }
  if (problems.length > 0) await sql.query(insertProblems(jobId, problems).sql, insertProblems(jobId, problems).params);
  return { next: lastLine + 1, inserted };
}

async function finish(
  sql: SqlExecutor,
  run: Run,
  inserted: number,
  refusal: string | null,
): Promise<JobOutcome<ImportRowsResult>> {
  const counts = await countRows(sql, run.job.id);
  const report = await writeReport(sql, run as JobRun<unknown, unknown>);
  await sql.query(dropStaging(run.job.id).sql);
  const { spec } = run.payload;
  if (inserted > 0) {
    const event = insertActivity({
      id: newId(),
      orgId: spec.orgId,
      category: 'records',
      event: 'records.changed',
      jobId: run.job.id,
      databaseId: spec.databaseId,
      tableId: spec.tableId,
      affectedRows: inserted,
      fileName: spec.fileName,
      actor: run.job.actor,
      summary: `Imported ${inserted} rows from ${spec.fileName}`.slice(0, 500),
    });
    await sql.run(event);
  }
  const result: ImportRowsResult = {
    ...counts,
    insertedRows: inserted,
    skippedRows: counts.totalRows - inserted,
    mode: run.payload.mode,
    report,
  };
  const summary = `Import of ${spec.fileName}`;
  if (refusal) return { state: 'failed', result, summary, error: { code: 'JOB_FAILED', message: refusal } };
  return {
    state: inserted === counts.totalRows ? 'succeeded' : 'partially_completed',
    result,
    summary,
    affectedRows: inserted,
  };
}

/** all-or-nothing: every row in one transaction, or none. */
async function insertAll(run: Run, schema: TableSchema): Promise<void> {
  let refusal: string | null = null;
  let inserted = 0;
  const counts = await countRows(pgExecutor(run.pool), run.job.id);
  if (counts.invalidRows > 0)
    refusal = `${counts.invalidRows} of ${counts.totalRows} rows are invalid; nothing was imported (see the report).`;
  else {
    try {
      await run.step(async (sql) => {
        const result = await insertBatch(sql, run, schema, 0, counts.totalRows);
        const after = await countRows(sql, run.job.id);
        if (after.invalidRows > 0)
          throw new AllOrNothingRefused(
            `${after.invalidRows} rows changed validity during the import; nothing was imported.`,
          );
        inserted = result.inserted;
        const outcome = await finish(sql, run, inserted, null);
        return { journal: { phase: 'done', outcome }, progress: { done: counts.totalRows, total: counts.totalRows } };
      });
      return;
    } catch (error) {
      if (!(error instanceof AllOrNothingRefused)) throw error;
      refusal = error.message;
    }
  }
  await run.step(async (sql) => {
    const outcome = await finish(sql, run, 0, refusal);
    return { journal: { phase: 'done', outcome }, progress: { done: 0, total: counts.totalRows } };
  });
}

class AllOrNothingRefused extends Error {}

async function insertValidRows(run: Run, schema: TableSchema): Promise<void> {
  const { totalRows } = await countRows(pgExecutor(run.pool), run.job.id);
  if (run.journal.phase === 'checked') {
    await run.step(async () => ({
      journal: { phase: 'insert', fromLine: 0, inserted: 0 },
      progress: { done: 0, total: totalRows },
    }));
  }
  while (run.journal.phase === 'insert') {
    const { fromLine, inserted } = run.journal as { fromLine: number; inserted: number };
    await run.step(async (sql) => {
      const batch = await insertBatch(sql, run, schema, fromLine, INSERT_BATCH);
      const total = inserted + batch.inserted;
      if (batch.next === null) {
        const outcome = await finish(sql, run, total, null);
        return { journal: { phase: 'done', outcome }, progress: { done: totalRows, total: totalRows } };
      }
      return {
        journal: { phase: 'insert', fromLine: batch.next, inserted: total },
        progress: { done: total, total: totalRows },
      };
    });
  }
}

export const importRows: JobHandler<ImportRowsPayload, ImportJournal, ImportRowsResult> = {
  kind: 'importRows',
  payload: ImportRowsPayload,
  result: ImportRowsResult,
  successEvent: () => succeededEvent('importRows'),
  describe: (payload) => `Import of ${payload.spec.fileName}`,
  fileName: (payload) => payload.spec.fileName,
  async run(run) {
    if (run.journal.phase !== 'done') {
      const content = await readUpload(pgExecutor(run.pool), run.payload.previewJobId).catch(() => {
        throw new DomainError('ARTIFACT_EXPIRED', 'The previewed file is no longer stored; preview it again.');
      });
      const { schema } = await validateImport(run as JobRun<unknown, ValidationJournal>, run.payload.spec, content);
      if (run.payload.mode === 'all-or-nothing') await insertAll(run, schema);
      else await insertValidRows(run, schema);
    }
    return (run.journal as { outcome: JobOutcome<ImportRowsResult> }).outcome;
  },
  /**
   * valid-rows-only commits each batch as it goes: a cancelled or finally failed import takes its rows out again,
   * or a retry (which starts from the beginning) would insert them twice.
   */
  async discard(run) {
    const sql = pgExecutor(run.pool);
    await sql.query(dropStaging(run.job.id).sql);
    const { spec } = run.payload;
    const removal = removeImported(run.job.id, spec.databaseId, spec.tableId, run.job.actor);
    const [removed] = await sql.run<{ removed: number }>(removal);
    if (removed && removed.removed > 0)
      run.log.info({ removed: removed.removed }, 'removed the rows of a stopped import');
  },
};
