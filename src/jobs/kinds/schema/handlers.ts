import { z } from 'zod';
import { pgExecutor, type SqlExecutor } from '../../../db/sql.ts';
import { inlineLiterals, quoteLiterals } from '../../../data/ddl.ts';
import { typeSpecOf, type FieldDefinition } from '../../../data/field-types.ts';
import { DomainError, validationFailed } from '../../../kernel/errors.ts';
import { loadTableHead, readSchema, schemaVersionConflict, type TableSchema } from '../../../catalog/table-schema.ts';
import { saveArtifact, sha256Of } from '../../engine/artifacts.ts';
import type { JobHandler, JobOutcome, JobRun } from '../../engine/handler.ts';
import type { JobKind } from '../../engine/kinds.ts';
import { CHANGE_JOBS, keysThatNoLongerFit, PlannedChange, renamedInWhere } from './plan.ts';
import { conversionSql } from './conversions.ts';
import * as ddl from './change-statements.ts';
import { bump, lockVersion } from './steps.ts';
import { abandonConstraint, buildConstraint } from './constraints.ts';
import { abandonIndexChange, forgetFieldIndexes, rebuildFieldIndexes, runIndexChange } from './updateTableIndexes.ts';

/**
 * Schema changes as durable jobs (endpoint 5). Every change ends in one short transaction that holds the table's
 * catalog row, re-checks the expected schema version, applies the change and bumps `schemaVersion`. A conversion
 * first builds a shadow column: a trigger converts every write from the start, a checkpointed backfill converts
 * existing rows in id order, a verification lists values that cannot convert, and only then the cutover swaps the
 * columns (DESIGN §1, issue 5).
 */
export const SchemaChangePayload = z.object({
  orgId: z.string(),
  databaseId: z.string(),
  tableId: z.string(),
  expectedSchemaVersion: z.number().int(),
  change: PlannedChange,
  summary: z.string(),
});
type SchemaChangePayload = z.infer<typeof SchemaChangePayload>;

type ConvertJournal =
  | { phase: 'backfill'; afterId: string; done: number; total: number }
  | { phase: 'cutover'; total: number };
type SchemaJournal = ConvertJournal | { phase: 'done'; outcome: JobOutcome };
type Run = JobRun<SchemaChangePayload, SchemaJournal>;

const BACKFILL_BATCH = 5_000;
export const UNCONVERTIBLE_ARTIFACT = 'unconvertible.jsonl';
const MAX_REPORTED = 100_000;

async function schemaOf(run: Run): Promise<TableSchema> {
  const { orgId, databaseId, tableId, expectedSchemaVersion } = run.payload;
  const head = await loadTableHead(pgExecutor(run.pool), { orgId, databaseId, tableId });
  if (head.schemaVersion !== expectedSchemaVersion)
    throw schemaVersionConflict(expectedSchemaVersion, head.schemaVersion);
  return readSchema(run.prisma, head);
}

function fieldIn(schema: TableSchema, fieldId: string): FieldDefinition {
  const field = schema.fieldsById.get(fieldId);
  if (!field) throw new DomainError('RESOURCE_NOT_FOUND', 'The field no longer exists.');
  return field;
}

/** The changes that are one transaction: add, rename, update settings, delete, reorder. */
async function applyDirectly(sql: SqlExecutor, run: Run, schema: TableSchema): Promise<JobOutcome> {
  const { change, databaseId, tableId } = run.payload;
  await lockVersion(sql, run.payload);
  const result: Record<string, unknown> = {};
  switch (change.kind) {
    case 'add_field': {
      if (change.field.required && !typeSpecOf(change.field.type).generated) {
        await sql.run(ddl.blockWrites(databaseId, tableId));
        const [rows] = await sql.query<{ present: boolean }>(ddl.hasRows(databaseId, tableId).sql);
        if (rows!.present) {
          throw new DomainError(
            'VALIDATION_FAILED',
            'A required field can be added only to an empty table: add it optional, fill it, then make it required with update_field.',
          );
        }
      }
      await sql.runEach([ddl.insertField(tableId, change.field), ...ddl.addColumn(databaseId, tableId, change.field)]);
      result.fieldId = change.field.id;
      break;
    }
    case 'rename_field': {
      // Conditional rules name fields in their `where` as the client wrote it, often by name: follow the rename.
      const wheres = schema.uniqueRules.flatMap((rule) => {
        const where = renamedInWhere(schema, rule.where, change.fieldId, change.name);
        return where === null ? [] : [ddl.updateRuleWhere(rule.id, where)];
      });
      await sql.runEach([ddl.renameField(fieldIn(schema, change.fieldId).id, change.name), ...wheres]);
      result.fieldId = change.fieldId;
      break;
    }
    case 'update_field': {
      const field = fieldIn(schema, change.fieldId);
      const unfit = keysThatNoLongerFit(schema, { ...field, options: change.options });
      if (unfit.length > 0)
        throw validationFailed(
          unfit,
          'An index or unique rule added since this change was accepted cannot hold the new maxLength.',
        );
      await sql.run(ddl.blockWrites(databaseId, tableId));
      const check = ddl.selectViolations(
        databaseId,
        tableId,
        field,
        change.required && !field.required,
        change.options,
      );
      const [violations] = await sql.run<{ count: number; sample: string[] }>(check);
      if (violations!.count > 0) {
        throw new DomainError(
          'VALIDATION_FAILED',
          `${violations!.count} rows hold values that the new settings would not allow; change them first.`,
          {
            details: { violations: violations!.count, rowIds: violations!.sample },
          },
        );
      }
      await sql.run(ddl.updateFieldSettings(field.id, field.type, change.required, change.options));
      if (change.required !== field.required)
        await sql.run(ddl.setRequired(databaseId, tableId, field.id, change.required));
      result.fieldId = field.id;
      break;
    }
    case 'delete_field':
      await sql.runEach(ddl.deleteField(databaseId, tableId, fieldIn(schema, change.fieldId)));
      await forgetFieldIndexes(sql, tableId, change.fieldId);
      result.fieldId = change.fieldId;
      break;
    case 'reorder_fields':
      await sql.runEach(ddl.reorderFields(tableId, change.fieldIds));
      result.fieldIds = change.fieldIds;
      break;
    default:
      throw new Error(`not a direct change: ${change.kind}`);
  }
  result.schemaVersion = await bump(sql, tableId);
  return { state: 'succeeded', result: result as JobOutcome['result'], summary: run.payload.summary };
}

/**
 * The conversion expression over the trigger's NEW column, with the server-quoted choice literals inlined last (a
 * choice's text is never rewritten after it is quoted).
 */
async function conversionOf(
  sql: SqlExecutor,
  source: FieldDefinition,
  change: Extract<PlannedChange, { kind: 'convert_field' }>,
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
): Promise<{ count: number; report: Record<string, unknown> }> {
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

async function convert(run: Run, schema: TableSchema): Promise<void> {
  const { databaseId, tableId } = run.payload;
  const change = run.payload.change as Extract<PlannedChange, { kind: 'convert_field' }>;
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
        const outcome: JobOutcome = {
          state: 'failed',
          summary: run.payload.summary,
          result: { unconvertible: count, report } as JobOutcome['result'],
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
      const result = {
        fieldId: source.id,
        schemaVersion,
        converted: total - count,
        emptied: count,
        report,
      } as JobOutcome['result'];
      const outcome: JobOutcome = {
        state: count > 0 ? 'partially_completed' : 'succeeded',
        result,
        summary: run.payload.summary,
      };
      return { journal: { phase: 'done', outcome }, progress: { done: total, total } };
    });
  }
}

function handlerFor(kind: JobKind): JobHandler<SchemaChangePayload, SchemaJournal> {
  return {
    kind,
    payload: SchemaChangePayload,
    successEvent: (payload) => CHANGE_JOBS[payload.change.kind].successEvent,
    describe: (payload) => payload.summary,
    async run(run) {
      if (run.journal.phase !== 'done') {
        const schema = await schemaOf(run);
        const { kind } = run.payload.change;
        if (kind === 'convert_field') await convert(run, schema);
        else if (kind === 'add_unique_rule' || kind === 'add_foreign_key') await buildConstraint(run as never, schema);
        else if (kind === 'add_index' || kind === 'drop_index') await runIndexChange(run as never, schema);
        else
          await run.step(async (sql) => ({
            journal: { phase: 'done', outcome: await applyDirectly(sql, run, schema) },
            progress: { done: 1, total: 1 },
          }));
      }
      return (run.journal as { outcome: JobOutcome }).outcome;
    },
    async discard(run) {
      const { change, databaseId, tableId } = run.payload;
      if (change.kind === 'add_index') return abandonIndexChange(run as never);
      const undo =
        change.kind === 'convert_field'
          ? ddl.abandonConversion(databaseId, tableId, run.job.id)
          : abandonConstraint(run.payload, change);
      await pgExecutor(run.pool).runEach(undo);
    },
  };
}

export const schemaChangeHandlers = (
  [
    'createField',
    'updateField',
    'deleteField',
    'reorderFields',
    'applySchemaChange',
    'createUniqueRule',
    'createForeignKey',
  ] as const
).map(handlerFor);
