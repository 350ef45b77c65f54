import { outsideTransaction, type SqlExecutor } from '../../../db/sql.ts';
import { selectDuplicates, selectOrphans } from '../../../data/constraints.ts';
import { inlineLiterals, quoteLiterals } from '../../../data/ddl.ts';
import { typeSpecOf } from '../../../data/field-types.ts';
import type { FilterExpression } from '../../../data/filter.ts';
import { compileFilter } from '../../../data/filter-sql.ts';
import type { Params, Statement } from '../../../data/statement.ts';
import { buildHashedKey, dropHashedKey } from '../../../data/unique-keys.ts';
import { DomainError } from '../../../kernel/errors.ts';
import type { TableSchema } from '../../../catalog/table-schema.ts';
import type { JobOutcome, JobRun } from '../../engine/handler.ts';
import type { PlannedChange } from './plan.ts';
import type { CreateForeignKeyResult, CreateUniqueRuleResult } from './results.ts';
import * as ddl from './change-statements.ts';
import { bump, lockVersion } from './steps.ts';
import { SQLSTATE, sqlStateOf } from '../../../db/pg-errors.ts';

/**
 * Unique rules and foreign keys built online, as schema-change jobs: the build runs outside any transaction
 * (CREATE UNIQUE INDEX CONCURRENTLY; a NOT VALID foreign key then VALIDATE), so row writes go on meanwhile; the
 * catalog row and the schema version bump follow in one short cutover step. A build interrupted by a dead worker
 * is dropped and started again on resume.
 */
type Target = { orgId: string; databaseId: string; tableId: string; expectedSchemaVersion: number; summary: string };
type ConstraintResult = CreateUniqueRuleResult | CreateForeignKeyResult;
export type ConstraintJournal =
  | { phase: 'build' }
  | { phase: 'cutover' }
  | { phase: 'done'; outcome: JobOutcome<ConstraintResult> };
type Run = JobRun<Target & { change: PlannedChange }, ConstraintJournal>;
type RuleChange = Extract<PlannedChange, { kind: 'add_unique_rule' }>;
type KeyChange = Extract<PlannedChange, { kind: 'add_foreign_key' }>;

const REPORTED = 20;

async function duplicatesError(sql: SqlExecutor, schema: TableSchema, change: RuleChange): Promise<DomainError | null> {
  const fields = change.fieldIds.map((id) => schema.fieldsById.get(id)!);
  const filter = change.where
    ? (params: Params) =>
        compileFilter(change.where as FilterExpression, schema.fields, (value, cast) => params.add(value, cast), 'r')
    : null;
  const statement = selectDuplicates(schema.databaseId, schema.tableId, fields, filter, REPORTED);
  const groups = await sql.run<Record<string, unknown>>(statement);
  if (groups.length === 0) return null;
  return new DomainError(
    'UNIQUE_CONFLICT',
    'Existing rows already share values in these fields; resolve the duplicates first.',
    {
      details: {
        fieldIds: change.fieldIds,
        duplicates: groups.map((group) => ({
          rowIds: group.row_ids as string[],
          values: Object.fromEntries(
            fields.map((field, index) => [field.id, typeSpecOf(field.type).fromText(group[`c${index}`] as string)]),
          ),
        })),
        truncated: groups.length === REPORTED,
      },
    },
  );
}

async function predicateOf(sql: SqlExecutor, schema: TableSchema, where: unknown): Promise<string | null> {
  if (where === null || where === undefined) return null;
  const values: (string | null)[] = [];
  const text = compileFilter(where as FilterExpression, schema.fields, (value, cast) => {
    values.push(value === null ? null : String(value));
    return `$${values.length}::${cast}`;
  });
  const quote = quoteLiterals(values);
  const [row] = await sql.run<{ literals: string[] }>(quote);
  return inlineLiterals(text, row!.literals);
}

/** Drops what an earlier (interrupted) build of the rule left behind. */
function dropRule(
  target: { databaseId: string; tableId: string },
  change: RuleChange,
  concurrently: boolean,
): Statement[] {
  if (change.enforcement === 'hash') return dropHashedKey(target.databaseId, target.tableId, change.ruleId);
  return [ddl.dropUniqueIndex(target.databaseId, change.ruleId, concurrently)];
}

function ruleBuild(schema: TableSchema, change: RuleChange, predicate: string | null): Statement[] {
  if (change.enforcement === 'btree')
    return [ddl.buildUniqueIndex(schema.databaseId, schema.tableId, change.ruleId, change.fieldIds, predicate)];
  const fields = change.fieldIds.map((id) => schema.fieldsById.get(id)!);
  return buildHashedKey(schema.databaseId, schema.tableId, change.ruleId, fields, predicate);
}

async function buildRule(run: Run, schema: TableSchema, change: RuleChange): Promise<void> {
  await outsideTransaction(run.pool, async (sql) => {
    const duplicates = await duplicatesError(sql, schema, change);
    if (duplicates) throw duplicates;
    const predicate = await predicateOf(sql, schema, change.where);
    await sql.runEach(dropRule(schema, change, true));
    try {
      await sql.runEach(ruleBuild(schema, change, predicate));
    } catch (error) {
      const code = sqlStateOf(error);
      if (code !== SQLSTATE.uniqueViolation && code !== SQLSTATE.exclusionViolation) throw error;
      await sql.runEach(dropRule(schema, change, true));
      throw (await duplicatesError(sql, schema, change)) ?? error;
    }
  });
}

async function buildKey(run: Run, schema: TableSchema, change: KeyChange): Promise<void> {
  const fields = change.fieldIds.map((id) => schema.fieldsById.get(id)!);
  const orphans = async (sql: SqlExecutor): Promise<DomainError | null> => {
    const statement = selectOrphans(
      schema.databaseId,
      {
        tableId: schema.tableId,
        fields,
        referencedTableId: change.referencedTableId,
        referencedFields: change.referencedFieldIds.map((id, index) => ({ ...fields[index]!, id })),
      },
      REPORTED,
    );
    const rows = await sql.run<Record<string, unknown>>(statement);
    if (rows.length === 0) return null;
    return new DomainError(
      'FOREIGN_KEY_CONFLICT',
      'Existing rows hold values that the referenced table does not have; fix them first.',
      {
        details: {
          fieldIds: change.fieldIds,
          orphans: rows.map((row) => ({
            rowId: row.id as string,
            values: Object.fromEntries(
              fields.map((field, index) => [field.id, typeSpecOf(field.type).fromText(row[`c${index}`] as string)]),
            ),
          })),
          truncated: rows.length === REPORTED,
        },
      },
    );
  };
  await outsideTransaction(run.pool, async (sql) => {
    const found = await orphans(sql);
    if (found) throw found;
    await sql.runEach(
      ddl.addForeignKeyNotValid(
        schema.databaseId,
        schema.tableId,
        change.foreignKeyId,
        change.fieldIds,
        change.referencedTableId,
        change.referencedFieldIds,
      ),
    );
    try {
      await sql.run(ddl.validateForeignKey(schema.databaseId, schema.tableId, change.foreignKeyId));
    } catch (error) {
      if (sqlStateOf(error) !== SQLSTATE.foreignKeyViolation) throw error;
      await sql.run(ddl.dropForeignKeyIfExists(schema.databaseId, schema.tableId, change.foreignKeyId));
      throw (await orphans(sql)) ?? error;
    }
  });
}

async function cutover(sql: SqlExecutor, run: Run, schema: TableSchema): Promise<JobOutcome<ConstraintResult>> {
  await lockVersion(sql, run.payload);
  const change = run.payload.change;
  if (change.kind === 'add_unique_rule') {
    const [index] = await sql.query<{ valid: boolean }>(
      ddl.uniqueIndexIsValid(schema.databaseId, change.ruleId).sql,
      ddl.uniqueIndexIsValid(schema.databaseId, change.ruleId).params,
    );
    if (!index?.valid) throw new Error('The unique index is missing or invalid at cutover');
    await sql.run(
      ddl.insertUniqueRule(change.ruleId, schema.tableId, change.fieldIds, change.where, change.enforcement),
    );
    const schemaVersion = await bump(sql, schema.tableId);
    return { state: 'succeeded', result: { ruleId: change.ruleId, schemaVersion }, summary: run.payload.summary };
  }
  if (change.kind === 'add_foreign_key') {
    await sql.run(
      ddl.insertForeignKey(
        change.foreignKeyId,
        schema.tableId,
        change.fieldIds,
        change.referencedTableId,
        change.referencedRuleId,
      ),
    );
    const schemaVersion = await bump(sql, schema.tableId);
    return {
      state: 'succeeded',
      result: { foreignKeyId: change.foreignKeyId, schemaVersion },
      summary: run.payload.summary,
    };
  }
  throw new Error(`not a constraint change: ${change.kind}`);
}

/** Runs (or resumes) an online rule or key build to its cutover. */
export async function buildConstraint(run: Run, schema: TableSchema): Promise<void> {
  const change = run.payload.change;
  if (!run.journal.phase) {
    await run.step(async (sql) => {
      await lockVersion(sql, run.payload);
      return { journal: { phase: 'build' }, progress: { done: 0, total: 2 } };
    });
  }
  if (run.journal.phase === 'build') {
    if (change.kind === 'add_unique_rule') await buildRule(run, schema, change);
    else if (change.kind === 'add_foreign_key') await buildKey(run, schema, change);
    await run.step(async () => ({ journal: { phase: 'cutover' }, progress: { done: 1, total: 2 } }));
  }
  if (run.journal.phase === 'cutover') {
    await run.step(async (sql) => ({
      journal: { phase: 'done', outcome: await cutover(sql, run, schema) },
      progress: { done: 2, total: 2 },
    }));
  }
}

/** Undoes a build that will not cut over. */
export function abandonConstraint(target: Target, change: PlannedChange): Statement[] {
  if (change.kind === 'add_unique_rule') return dropRule(target, change, false);
  if (change.kind === 'add_foreign_key')
    return [ddl.dropForeignKeyIfExists(target.databaseId, target.tableId, change.foreignKeyId)];
  return [];
}
