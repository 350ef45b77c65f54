import { pgExecutor, type SqlExecutor } from '../../../db/sql.ts';
import { inlineLiterals, quoteLiterals } from '../../../data/ddl.ts';
import { typeSpecOf, type FieldDefinition } from '../../../data/field-types.ts';
import { DomainError } from '../../../kernel/errors.ts';
import type { TableSchema } from '../../../catalog/table-schema.ts';
import { saveArtifact, sha256Of } from '../../engine/artifacts.ts';
import type { JobOutcome } from '../../engine/handler.ts';
import { conversionSql } from './conversions.ts';
import * as ddl from './change-statements.ts';
import { ApplySchemaChangeResult, type UnconvertibleReport } from './results.ts';
import { bump, lockVersion } from './steps.ts';
import {
  changeOf,
  fieldIn,
  schemaChangeHandler,
  type ChangeDone,
  type ChangeOf,
  type SchemaChangeRun,
} from './schema-change.ts';
import { abandonIndexChange, rebuildFieldIndexes, runIndexChange, type IndexChangeJournal } from './index-changes.ts';

/**
 * applySchemaChange: the changes that take more than one transaction and keep the table writable meanwhile.
 * convert_field first builds a shadow column: a trigger converts every write from the start, a checkpointed backfill
 * converts existing rows in id order, a verification lists values that cannot convert, and only then the cutover
 * swaps the columns (DESIGN §1, issue 5). add_index and drop_index build and drop concurrently
 * (src/jobs/kinds/schema/index-changes.ts).
 */
type ConvertJournal =
  | { phase: 'backfill'; afterId: string; done: number; total: number }
  | { phase: 'cutover'; total: number };
type Journal = ConvertJournal | IndexChangeJournal | ChangeDone<ApplySchemaChangeResult>;
type Run = SchemaChangeRun<Journal>;

const BACKFILL_BATCH = 5_000;
export const UNCONVERTIBLE_ARTIFACT = 'unconvertible.jsonl';
const MAX_REPORTED = 100_000;

/**
 * The conversion expression over the trigger's NEW column, with the server-quoted choice literals inlined last (a
 * choice's text is never rewritten after it is quoted).
 */
async function conversionOf(
  sql: SqlExecutor,
  source: FieldDefinition,
  change: ChangeOf<'convert_field'>,
): Promise<string> {
  const conversion = conversionSql(
    source,
    { type: change.type, options: change.options },
    ddl.triggerSourceOf(source.id),
  );
  if (!conversion)
    throw new DomainError('VALIDATION_FAILED', `A ${source.type} field cannot be converted to ${change.type}.`);
  if (conversion.literals.length === 0) return conversion.sql;
  const quote = quoteLiterals(conversion.literals);
  const [row] = await sql.run<{ literals: string[] }>(quote);
  return inlineLiterals(conversion.sql, row!.literals);
}

async function writeUnconvertibleReport(
  sql: SqlExecutor,
  run: Run,
  source: FieldDefinition,
): Promise<{ count: number; report: UnconvertibleReport }> {
  const { databaseId, tableId } = run.payload;
  const [counted] = await sql.query<{ count: number }>(
    ddl.countUnconvertible(databaseId, tableId, run.job.id, source.id).sql,
  );
  const rows = await sql.query<{ id: string; value: string }>(
    ddl.selectUnconvertible(databaseId, tableId, run.job.id, source, MAX_REPORTED).sql,
  );
  const content = Buffer.from(
    rows
      .map(
        (row) =>
          `${JSON.stringify({
            rowId: row.id,
            fieldId: source.id,
            value: typeSpecOf(source.type).fromText(row.value),
            code: 'UNCONVERTIBLE',
            message: `cannot be converted to the new type without changing it`,
          })}\n`,
      )
      .join(''),
    'utf8',
  );
  await saveArtifact(sql, {
    jobId: run.job.id,
    name: UNCONVERTIBLE_ARTIFACT,
    contentType: 'application/x-ndjson',
    content,
    listed: true,
    ttlHours: run.config.ARTIFACT_TTL_HOURS,
  });
  return {
    count: counted!.count,
    report: {
      name: UNCONVERTIBLE_ARTIFACT,
      size: content.length,
      sha256: sha256Of(content),
      rows: rows.length,
      truncated: counted!.count > rows.length,
    },
  };
}

async function convert(run: Run, schema: TableSchema, change: ChangeOf<'convert_field'>): Promise<void> {
  const { databaseId, tableId } = run.payload;
  const source = fieldIn(schema, change.fieldId);
  if (!run.journal.phase) {
    await run.step(async (sql) => {
      await lockVersion(sql, run.payload);
      const conversion = await conversionOf(sql, source, change);
      await sql.runEach(
        ddl.startConversion(
          databaseId,
          tableId,
          run.job.id,
          source,
          typeSpecOf(change.type).column(change.options),
          conversion,
        ),
      );
      const [rows] = await sql.query<{ count: number }>(ddl.countRows(databaseId, tableId).sql);
      return {
        journal: { phase: 'backfill', afterId: '', done: 0, total: rows!.count },
        progress: { done: 0, total: rows!.count },
      };
    });
  }
  while (run.journal.phase === 'backfill') {
    const { afterId, done, total } = run.journal as Extract<ConvertJournal, { phase: 'backfill' }>;
    await run.step(async (sql) => {
      const statement = ddl.backfillBatch(databaseId, tableId, source.id, afterId, BACKFILL_BATCH);
      const batch = await sql.run<{ id: string }>(statement);
      const converted = done + batch.length;
      const progress = { done: Math.min(converted, Math.max(total, converted)), total: Math.max(total, converted) };
      if (batch.length < BACKFILL_BATCH) return { journal: { phase: 'cutover', total: progress.total }, progress };
      // biome-ignore lint/complexity/useMathMinMax: row ids are ULID strings; Math.max would answer NaN
      const last = batch.reduce((max, row) => (row.id > max ? row.id : max), afterId);
      return { journal: { phase: 'backfill', afterId: last, done: converted, total }, progress };
    });
  }
  if (run.journal.phase === 'cutover') {
    const { total } = run.journal as Extract<ConvertJournal, { phase: 'cutover' }>;
    await run.step(async (sql) => {
      await lockVersion(sql, run.payload);
      // Writes wait from here to the swap, so the verification cannot go stale; it is small (only rows that ever
      // failed to convert are looked at), so the cutover is short.
      await sql.run(ddl.blockWrites(databaseId, tableId));
      const { count, report } = await writeUnconvertibleReport(sql, run, source);
      if (count > 0 && change.onUnconvertible === 'fail') {
        await sql.runEach(ddl.abandonConversion(databaseId, tableId, run.job.id));
        const outcome: JobOutcome<ApplySchemaChangeResult> = {
          state: 'failed',
          summary: run.payload.summary,
          result: { unconvertible: count, report },
          error: {
            code: 'VALIDATION_FAILED',
            message: `${count} values cannot be converted to ${change.type}; see ${UNCONVERTIBLE_ARTIFACT}. Nothing was changed.`,
            details: { unconvertible: count },
          },
        };
        return { journal: { phase: 'done', outcome }, progress: { done: total, total } };
      }
      await sql.runEach(ddl.swapColumns(databaseId, tableId, run.job.id, source.id));
      // An autoNumber converted away leaves its sequence unused: the old column's default was its only user.
      if (typeSpecOf(source.type).generated) await sql.run(ddl.dropSequence(databaseId, source.id));
      await sql.run(ddl.updateFieldSettings(source.id, change.type, source.required, change.options));
      if (source.required) await sql.run(ddl.setRequired(databaseId, tableId, source.id, true));
      const converted = schema.fields.map((field) =>
        field.id === source.id ? { ...field, type: change.type, options: change.options } : field,
      );
      await rebuildFieldIndexes(sql, run, converted, source.id);
      const schemaVersion = await bump(sql, tableId);
      const result: ApplySchemaChangeResult = {
        fieldId: source.id,
        schemaVersion,
        converted: total - count,
        emptied: count,
        report,
      };
      const outcome: JobOutcome<ApplySchemaChangeResult> = {
        state: count > 0 ? 'partially_completed' : 'succeeded',
        result,
        summary: run.payload.summary,
      };
      return { journal: { phase: 'done', outcome }, progress: { done: total, total } };
    });
  }
}

export const applySchemaChange = schemaChangeHandler<Journal, ApplySchemaChangeResult>({
  kind: 'applySchemaChange',
  result: ApplySchemaChangeResult,
  async change(run, schema) {
    const change = changeOf(run.payload, 'convert_field', 'add_index', 'drop_index');
    if (change.kind === 'convert_field') await convert(run, schema, change);
    else await runIndexChange(run as never, schema);
  },
  async discard(run) {
    const { change, databaseId, tableId } = run.payload;
    if (change.kind === 'add_index') return abandonIndexChange(run as never);
    if (change.kind === 'convert_field')
      await pgExecutor(run.pool).runEach(ddl.abandonConversion(databaseId, tableId, run.job.id));
  },
});
