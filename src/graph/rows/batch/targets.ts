import type { SqlExecutor } from '../../../db/sql.ts';
import { keyPayload, lockKeys, lockRows, matchKeys } from '../../../data/row-batch.ts';
import { lockRowsByKey } from '../../../data/lookup.ts';
import { toRowShape, type RowRecord, type RowShape } from '../../../data/rows.ts';
import { DomainError } from '../../../kernel/errors.ts';
import type { TableSchema } from '../../../catalog/table-schema.ts';
import { keyRuleOf } from '../row-lookup.ts';
import type { BatchFailures } from './failures.ts';
import type { PlannedOperation } from './plan.ts';
import { runBatchStatement } from './run-statement.ts';

/**
 * The rows a batch's updates, deletes and upserts reach, found and locked before anything is decided: keyed
 * targets resolved to row ids, named rows locked at their expected versions, upserted keys locked and matched.
 */

function versionConflict(expectedVersion: string, currentVersion: string | null): DomainError {
  const message =
    currentVersion === null
      ? 'The row does not exist (any more).'
      : 'The row was changed by someone else; read it again and retry.';
  return new DomainError('ROW_VERSION_CONFLICT', message, { details: { expectedVersion, currentVersion } });
}

/**
 * Finds and locks the rows of updates and deletes by key (`matchOn`), rule by rule: each such operation then names
 * its row by id, at the version the request expected or, when it gave none, at the version just locked. A key no
 * row holds fails as an update of a missing row does (409, currentVersion null); two operations that reach one row
 * are refused as naming it twice.
 */
export async function resolveKeyedTargets(
  executor: SqlExecutor,
  schema: TableSchema,
  planned: readonly PlannedOperation[],
  failures: BatchFailures,
): Promise<void> {
  const keyed = planned.filter(
    (operation): operation is Extract<PlannedOperation, { op: 'update' | 'delete' }> =>
      (operation.op === 'update' || operation.op === 'delete') && operation.match !== undefined,
  );
  if (keyed.length === 0) return;
  for (const rule of schema.uniqueRules) {
    const mine = keyed.filter((operation) => operation.match!.rule.id === rule.id);
    if (mine.length === 0) continue;
    const records = await runBatchStatement<RowRecord & { k: number }>(
      executor,
      schema,
      lockRowsByKey(
        schema,
        keyRuleOf(schema, rule),
        mine.map((operation) => operation.match!.key),
      ),
    );
    const byPosition = new Map(records.map((record) => [record.k, record]));
    mine.forEach((operation, position) => {
      const record = byPosition.get(position);
      const { match } = operation;
      if (!record) {
        failures.add(
          operation.index,
          new DomainError('ROW_VERSION_CONFLICT', 'No row holds this key.', {
            details: {
              expectedVersion: match!.versionGiven ? operation.expectedVersion : null,
              currentVersion: null,
              matchOn: rule.id,
              key: match!.key,
            },
          }),
        );
        return;
      }
      operation.rowId = record.id;
      if (!match!.versionGiven) operation.expectedVersion = record.version;
    });
  }
  const namedBy = new Map<string, number>();
  for (const operation of planned) {
    if (
      (operation.op !== 'update' && operation.op !== 'delete') ||
      failures.has(operation.index) ||
      operation.rowId === ''
    )
      continue;
    const earlier = namedBy.get(operation.rowId);
    if (earlier === undefined) namedBy.set(operation.rowId, operation.index);
    else
      failures.invalid(
        operation.index,
        [operation.match ? 'key' : 'rowId'],
        `names row ${operation.rowId}, which operation ${earlier} of this batch also changes; a batch names each row once`,
      );
  }
}

/** Locks the rows that updates and deletes name, and checks their versions. */
export async function lockTargets(
  executor: SqlExecutor,
  schema: TableSchema,
  planned: readonly PlannedOperation[],
  failures: BatchFailures,
): Promise<Map<string, RowShape>> {
  const ids = planned.flatMap((operation) =>
    (operation.op === 'update' || operation.op === 'delete') && !failures.has(operation.index) ? [operation.rowId] : [],
  );
  if (ids.length === 0) return new Map();
  const records = await runBatchStatement<RowRecord>(executor, schema, lockRows(schema, ids));
  const rows = new Map(records.map((record) => [record.id, toRowShape(schema.fields, record)]));
  for (const operation of planned) {
    if ((operation.op !== 'update' && operation.op !== 'delete') || failures.has(operation.index)) continue;
    const current = rows.get(operation.rowId);
    if (!current || current.version !== operation.expectedVersion)
      failures.add(operation.index, versionConflict(operation.expectedVersion, current?.version ?? null));
  }
  return rows;
}

/**
 * Locks the upserted keys, before any row: batches that upsert one key queue here while holding no row lock, so
 * they cannot deadlock with each other over the rows they go on to lock.
 */
export async function lockUpsertKeys(
  executor: SqlExecutor,
  schema: TableSchema,
  planned: readonly PlannedOperation[],
): Promise<void> {
  const lockIds = planned.flatMap((operation) => (operation.op === 'upsert' ? [operation.lockId] : []));
  if (lockIds.length > 0) await runBatchStatement(executor, schema, lockKeys([...new Set(lockIds)]));
}

/** Finds (and locks) the rows that hold the upserted keys: upsert index → row. */
export async function matchUpserts(
  executor: SqlExecutor,
  schema: TableSchema,
  planned: readonly PlannedOperation[],
): Promise<Map<number, RowShape>> {
  const upserts = planned.filter((operation) => operation.op === 'upsert');
  const matched = new Map<number, RowShape>();
  if (upserts.length === 0) return matched;
  for (const rule of schema.uniqueRules) {
    const mine = upserts.filter((operation) => operation.rule.id === rule.id);
    if (mine.length === 0) continue;
    const keys = mine.map((operation) => keyPayload(operation.index, rule.fieldIds, operation.values));
    const records = await runBatchStatement<RowRecord & { op: number }>(
      executor,
      schema,
      matchKeys(schema, keyRuleOf(schema, rule), keys),
    );
    for (const record of records) matched.set(record.op, toRowShape(schema.fields, record));
  }
  return matched;
}
