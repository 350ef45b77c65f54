import type { SqlExecutor } from '../../../db/sql.ts';
import type { FilterExpression } from '../../../data/filter.ts';
import {
  conditionalKeyConflicts,
  incomingKeys,
  keyPayload,
  missingReferences,
  referencedRows,
  rowPayload,
  takenKeys,
  type IncomingKey,
  type RowPayload,
} from '../../../data/row-batch.ts';
import { DomainError } from '../../../kernel/errors.ts';
import type { TableSchema } from '../../../catalog/table-schema.ts';
import { keyRuleOf } from '../row-lookup.ts';
import type { BatchFailures } from './failures.ts';
import { keyOf } from './plan.ts';
import { runBatchStatement } from './run-statement.ts';
import { valuesOf, type Writes } from './writes.ts';

function ruleDetails(schema: TableSchema, fieldIds: readonly string[]) {
  return { fieldIds: [...fieldIds], fieldNames: fieldIds.map((id) => schema.fieldsById.get(id)!.name) };
}

const uniqueConflict = (schema: TableSchema, ruleId: string, fieldIds: readonly string[], earlier: number | null) =>
  new DomainError(
    'UNIQUE_CONFLICT',
    earlier === null
      ? 'Another row already has these values in these fields.'
      : `Operation ${earlier} of this batch writes the same values in these fields.`,
    { details: { ruleId, ...ruleDetails(schema, fieldIds), ...(earlier === null ? {} : { conflictsWith: earlier }) } },
  );

/**
 * Unique rules, set-wise: the batch's new keys against each other (in memory) and against the rows the batch does
 * not change (one query per rule). A conditional rule's `where` is SQL, so its check is one query over the batch's
 * rows and the table's, both filtered by it.
 */
async function checkUniqueness(
  executor: SqlExecutor,
  schema: TableSchema,
  writes: Writes,
  failures: BatchFailures,
): Promise<void> {
  const written = [...writes.inserts, ...writes.changes];
  const changedIds = [...writes.changes, ...writes.deletes].map((write) => write.row.id);
  for (const rule of schema.uniqueRules) {
    if (rule.where !== null && rule.where !== undefined) {
      if (written.length === 0) continue;
      const rows = written.map((write) => ({ ...rowPayload(schema.fields, '', write.values), id: write.index }));
      const statement = conditionalKeyConflicts(
        schema,
        keyRuleOf(schema, rule),
        rule.where as FilterExpression,
        rows,
        changedIds,
      );
      for (const { op, conflictsWith } of await runBatchStatement<{ op: number; conflictsWith: number | null }>(
        executor,
        schema,
        statement,
      )) {
        failures.add(op, uniqueConflict(schema, rule.id, rule.fieldIds, conflictsWith));
      }
      continue;
    }
    const seen = new Map<string, number>();
    const keys: RowPayload[] = [];
    for (const write of written) {
      if (rule.fieldIds.some((id) => (write.values.get(id) ?? null) === null)) continue;
      const key = keyOf(rule.fieldIds, write.values);
      const earlier = seen.get(key);
      if (earlier !== undefined) {
        failures.add(write.index, uniqueConflict(schema, rule.id, rule.fieldIds, earlier));
      } else {
        seen.set(key, write.index);
        keys.push(keyPayload(write.index, rule.fieldIds, write.values));
      }
    }
    refuseHandovers(schema, rule, writes, failures);
    if (keys.length === 0) continue;
    for (const { op } of await runBatchStatement<{ op: number }>(
      executor,
      schema,
      takenKeys(schema, keyRuleOf(schema, rule), keys, changedIds),
    )) {
      failures.add(op, uniqueConflict(schema, rule.id, rule.fieldIds, null));
    }
  }
}

/**
 * An update that takes the key another update of the batch gives up (a swap, or a chain). Both happen in one
 * UPDATE, and PostgreSQL checks a unique index row by row, not at the end of the statement, so whether it passes
 * depends on the order rows are visited: refused as a 422, like naming a row twice. A delete that frees a key does
 * not count: deletes run before updates and inserts.
 */
function refuseHandovers(
  schema: TableSchema,
  rule: TableSchema['uniqueRules'][number],
  writes: Writes,
  failures: BatchFailures,
): void {
  const givenUp = new Map<string, number>();
  for (const change of writes.changes) {
    const before = valuesOf(change.row);
    if (rule.fieldIds.some((id) => (before.get(id) ?? null) === null)) continue;
    const old = keyOf(rule.fieldIds, before);
    if (old !== keyOf(rule.fieldIds, change.values)) givenUp.set(old, change.index);
  }
  for (const change of writes.changes) {
    const from = givenUp.get(keyOf(rule.fieldIds, change.values));
    if (from === undefined || from === change.index || failures.has(change.index)) continue;
    const names = ruleDetails(schema, rule.fieldIds).fieldNames.join(', ');
    failures.invalid(
      change.index,
      ['values'],
      `takes the ${names} that operation ${from} of this batch gives up; unique rules are checked row by row, ` +
        'so move a key between rows in two batches',
    );
  }
}

/** Foreign keys, set-wise: the referenced rows must exist (or, for a key into this table, be written by the batch). */
async function checkReferences(
  executor: SqlExecutor,
  schema: TableSchema,
  writes: Writes,
  failures: BatchFailures,
): Promise<void> {
  const written = [...writes.inserts.map((write) => ({ ...write, changed: null })), ...writes.changes];
  for (const key of schema.foreignKeys) {
    const affected = written.filter(
      (write) =>
        (write.changed === null || key.fieldIds.some((id) => write.changed!.includes(id))) &&
        key.fieldIds.every((id) => (write.values.get(id) ?? null) !== null),
    );
    if (affected.length === 0) continue;
    const fields = key.fieldIds.map((id) => schema.fieldsById.get(id)!);
    const statement = missingReferences(
      schema.databaseId,
      { fields, referencedTableId: key.referencedTableId, referencedFieldIds: key.referencedFieldIds },
      affected.map((write) => keyPayload(write.index, key.fieldIds, write.values)),
    );
    const selfKeys =
      key.referencedTableId === schema.tableId
        ? new Set(written.map((write) => keyOf(key.referencedFieldIds, write.values)))
        : new Set<string>();
    for (const { op } of await runBatchStatement<{ op: number }>(executor, schema, statement)) {
      const write = affected.find((candidate) => candidate.index === op)!;
      if (selfKeys.has(keyOf(key.fieldIds, write.values))) continue;
      failures.add(
        op,
        new DomainError(
          'FOREIGN_KEY_CONFLICT',
          `No row of ${key.referencedTableName} has these values in ${key.referencedFieldNames.join(', ')}.`,
          {
            details: {
              foreignKeyId: key.id,
              ...ruleDetails(schema, key.fieldIds),
              referencedTableId: key.referencedTableId,
            },
          },
        ),
      );
    }
  }
}

/**
 * Rows still referenced: a row the batch deletes, or whose referenced key an update changes, must not be held by a
 * row of a referencing table (rows of this table that the batch deletes do not count). One query per incoming key.
 */
async function checkReferencedRows(
  executor: SqlExecutor,
  schema: TableSchema,
  writes: Writes,
  failures: BatchFailures,
): Promise<void> {
  if (writes.deletes.length === 0 && writes.changes.length === 0) return;
  const keys = await runBatchStatement<IncomingKey>(executor, schema, incomingKeys(schema.tableId));
  const deletedIds = writes.deletes.map((remove) => remove.row.id);
  for (const key of keys) {
    const fields = key.referencedFieldIds.map((id) => schema.fieldsById.get(id)!);
    const leaving = [
      ...writes.deletes,
      ...writes.changes.filter((change) => key.referencedFieldIds.some((id) => change.changed.includes(id))),
    ].filter(
      (write) =>
        !failures.has(write.index) && key.referencedFieldIds.every((id) => (write.row.values[id] ?? null) !== null),
    );
    if (leaving.length === 0) continue;
    const ignored = key.tableId === schema.tableId ? deletedIds : [];
    const statement = referencedRows(
      schema.databaseId,
      key,
      fields,
      leaving.map((write) => keyPayload(write.index, key.referencedFieldIds, valuesOf(write.row))),
      ignored,
    );
    for (const { op } of await runBatchStatement<{ op: number }>(executor, schema, statement)) {
      failures.add(
        op,
        new DomainError('FOREIGN_KEY_CONFLICT', `Rows of ${key.tableName} still reference this row.`, {
          details: {
            foreignKeyId: key.id,
            referencingTableId: key.tableId,
            ...ruleDetails(schema, key.referencedFieldIds),
          },
        }),
      );
    }
  }
}

/** Every set-wise check of the written rows against the table and the tables that reference it. */
export async function checkAgainstTables(
  executor: SqlExecutor,
  schema: TableSchema,
  writes: Writes,
  failures: BatchFailures,
): Promise<void> {
  await checkUniqueness(executor, schema, writes, failures);
  await checkReferences(executor, schema, writes, failures);
  await checkReferencedRows(executor, schema, writes, failures);
}
