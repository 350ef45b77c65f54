import { z } from 'zod';
import { pgExecutor } from '../../../db/sql.ts';
import type { CellValue, FieldDefinition } from '../../../data/field-types.ts';
import { loadTableHead, readSchema, schemaVersionConflict, type TableSchema } from '../../../catalog/table-schema.ts';
import type { JobRun } from '../../engine/handler.ts';
import { csvCell, jsonCell } from './cells.ts';
import { parseSource, type SourceRecord } from './source.ts';
import {
  checksFor,
  copyRows,
  copyStaging,
  createStaging,
  importableFields,
  indexStaging,
  analyzeStaging,
  insertProblems,
  lastLine,
  runCheck,
  type Check,
  type Problem,
  type StagedRow,
} from './staging.ts';

/**
 * Validating an import, shared by the preview and the import itself: parse the file, stage its rows with
 * their typed values and per-cell problems (batches of LOAD_BATCH records), then run each unique and foreign-key
 * check over the whole file in one set-wise statement. Each batch and check is one step: it commits with its
 * checkpoint.
 */
const LOAD_BATCH = 10_000;
/** Records staged, then sent, at a time within a batch's COPY: PostgreSQL parses one while the next is staged. */
const COPY_CHUNK = 500;

export const ImportSpec = z.object({
  orgId: z.string(),
  databaseId: z.string(),
  tableId: z.string(),
  schemaVersion: z.number().int(),
  format: z.enum(['csv', 'jsonl']),
  fileName: z.string(),
  header: z.boolean(),
  mapping: z.array(
    z.object({
      fieldId: z.string(),
      column: z.number().nullable(),
      property: z.string().nullable(),
      label: z.string(),
    }),
  ),
});
export type ImportSpec = z.infer<typeof ImportSpec>;

export type ValidationJournal = {
  phase: 'load' | 'check' | 'checked';
  loaded: number;
  check: number;
  fromLine: number;
};

/** The table at the version the import was checked against; a schema change since then fails the job (409). */
export async function schemaAt(run: JobRun<unknown, unknown>, spec: ImportSpec): Promise<TableSchema> {
  const head = await loadTableHead(pgExecutor(run.pool), {
    orgId: spec.orgId,
    databaseId: spec.databaseId,
    tableId: spec.tableId,
  });
  if (head.schemaVersion !== spec.schemaVersion) throw schemaVersionConflict(spec.schemaVersion, head.schemaVersion);
  return readSchema(run.prisma, head);
}

interface Staged {
  row: StagedRow;
  problems: Problem[];
}

function stageRecord(
  record: SourceRecord,
  spec: ImportSpec,
  schema: TableSchema,
  header: string[] | null,
  rowSizeLimit: number,
): Staged {
  const problems: Problem[] = [];
  const cells: Record<string, unknown> = {};
  const problem = (label: string | null, fieldId: string | null, code: string, message: string) =>
    problems.push({ line: record.line, label, fieldId, code, message });
  if (record.kind === 'unreadable') {
    problem(null, null, record.code, `line ${record.line} ${record.message}`);
    return { row: { line: record.line, ok: false, cells, json: '{}' }, problems };
  }
  if (record.kind === 'csv' && header && record.values.length !== header.length) {
    problem(null, null, 'RAGGED_ROW', `has ${record.values.length} cells; the header row has ${header.length}`);
  }
  for (const item of spec.mapping) {
    const field = schema.fieldsById.get(item.fieldId) as FieldDefinition;
    const validator = schema.validators.get(item.fieldId)!;
    let result;
    if (record.kind === 'csv') {
      const text = record.values[item.column!];
      if (text === undefined) {
        if (!header) problem(item.label, field.id, 'MISSING_CELL', `column ${item.column} is missing on this line`);
        result = { ok: true as const, value: null };
      } else result = csvCell(field, validator, text);
    } else {
      result = jsonCell(validator, record.object[item.property!]);
    }
    if (!result.ok) {
      problem(item.label, field.id, 'TYPE_MISMATCH', `${field.name} ${result.message}`);
      cells[field.id] = null;
    } else if (result.value === null && field.required) {
      problem(item.label, field.id, 'REQUIRED', `${field.name} is required`);
      cells[field.id] = null;
    } else cells[field.id] = result.value as CellValue;
  }
  const json = JSON.stringify(cells);
  if (Buffer.byteLength(json) > rowSizeLimit) {
    problem(null, null, 'ROW_SIZE_LIMIT', `the row is larger than ${rowSizeLimit} bytes`);
  }
  return { row: { line: record.line, ok: problems.length === 0, cells, json }, problems };
}

export interface ValidationResult {
  schema: TableSchema;
  checks: Check[];
  /** Where a structural CSV error ended the file, if one did. */
  malformed: { line: number; message: string } | null;
}

/**
 * Runs (or resumes) validation into the staging tables of `run.job.id`. Returns once every check has run; the
 * journal then says `checked`, and a later step may carry on from there (the import's inserts).
 */
export async function validateImport<J extends ValidationJournal>(
  run: JobRun<unknown, J>,
  spec: ImportSpec,
  content: string,
): Promise<ValidationResult> {
  const schema = await schemaAt(run, spec);
  const fields = importableFields(schema);
  const labels = new Map(spec.mapping.map((item) => [item.fieldId, item.label]));
  const checks = checksFor(schema, new Set(labels.keys()), (fieldId) => labels.get(fieldId) ?? fieldId);
  const jobId = run.job.id;
  const parsed = await parseSource(spec.format, content, spec.header);
  const total = parsed.records.length;
  const journal = () => run.journal as Partial<ValidationJournal>;

  if (!journal().phase) {
    await run.step(async (sql) => {
      await sql.runEach(createStaging(jobId, fields));
      return { journal: { phase: 'load', loaded: 0, check: 0, fromLine: 0 } as J, progress: { done: 0, total } };
    });
  }
  /** A batch's rows as COPY input, a chunk at a time; each chunk's problems are collected into `problems`. */
  function* copyChunks(records: readonly SourceRecord[], problems: Problem[]): Generator<string> {
    for (let offset = 0; offset < records.length; offset += COPY_CHUNK) {
      const staged = records
        .slice(offset, offset + COPY_CHUNK)
        .map((record) => stageRecord(record, spec, schema, parsed.header, run.config.ROW_SIZE_LIMIT_BYTES));
      for (const item of staged) for (const problem of item.problems) problems.push(problem);
      yield copyRows(
        fields,
        staged.map((item) => item.row),
      );
    }
  }
  while (journal().phase === 'load') {
    const loaded = journal().loaded ?? 0;
    const records = parsed.records.slice(loaded, loaded + LOAD_BATCH);
    await run.step(async (sql) => {
      if (records.length === 0) {
        if (parsed.malformed) {
          await sql.run(
            insertProblems(jobId, [
              {
                line: parsed.malformed.line,
                label: null,
                fieldId: null,
                code: 'CSV_MALFORMED',
                message: parsed.malformed.message,
              },
            ]),
          );
        }
        await sql.runEach(indexStaging(jobId, checks));
        await sql.run(analyzeStaging(jobId, checks));
        return { journal: { phase: 'check', loaded, check: 0, fromLine: 0 } as J, progress: { done: total, total } };
      }
      const problems: Problem[] = [];
      await sql.copyIn(copyStaging(jobId, fields), copyChunks(records, problems));
      if (problems.length > 0) await sql.run(insertProblems(jobId, problems));
      const done = loaded + records.length;
      return { journal: { phase: 'load', loaded: done, check: 0, fromLine: 0 } as J, progress: { done, total } };
    });
  }
  if (journal().phase === 'check') {
    const [{ last }] = (await pgExecutor(run.pool).query<{ last: number }>(lastLine(jobId).sql)) as [{ last: number }];
    while (journal().phase === 'check') {
      const { check = 0, fromLine = 0, loaded = total } = journal();
      const current = checks[check];
      await run.step(async (sql) => {
        if (!current)
          return { journal: { phase: 'checked', loaded, check, fromLine } as J, progress: { done: total, total } };
        await sql.run(runCheck(jobId, schema, current, fromLine, last + 1));
        return {
          journal: { phase: 'check', loaded, check: check + 1, fromLine: 0 } as J,
          progress: { done: total, total },
        };
      });
    }
  }
  return { schema, checks, malformed: parsed.malformed };
}
