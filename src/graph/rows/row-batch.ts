import type { SqlExecutor } from '../../db/sql.ts';
import { typeSpecOf, type CellValue } from '../../data/field-types.ts';
import { columnKeyOf } from '../../data/identifiers.ts';
import {
  allocateGeneratedBatch,
  batchActivity,
  claimRowsCapacity,
  conditionalKeyConflicts,
  deleteRows,
  incomingKeys,
  insertRows,
  lockKeys,
  lockRows,
  matchKeys,
  missingReferences,
  referencedRows,
  rowPayload,
  takenKeys,
  updateRows,
  type ChangedRow,
  type IncomingKey,
  type KeyRule,
  type RowPayload,
} from '../../data/row-batch.ts';
import type { FilterExpression } from '../../data/filter.ts';
import { toRowShape, type RowEvent, type RowRecord, type RowShape } from '../../data/rows.ts';
import { DomainError } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { builder } from '../server/builder.ts';
import type { Context } from '../server/context.ts';
import { idempotentSql, type IdempotentTransaction } from '../../idempotency/run.ts';
import { addressOf, tableAddressArgs } from '../tables/address.ts';
import { schemaVersionConflict, type TableSchema } from '../../catalog/table-schema.ts';
import { BatchFailures, BatchRowsBody, keyOf, planBatch, type PlannedOperation } from './row-batch-plan.ts';
import { checkRowSize } from './row-values.ts';
import { keyRuleOf } from './row-lookup.ts';
import { lockRowsByKey } from '../../data/lookup.ts';
import { explainRefusedInsert, Row, rowEvent, rowLimitReached, run } from './rows.ts';
import type { Statement } from '../../data/statement.ts';
import { schemaExpecting } from '../tables/schema-endpoint.ts';
import { SQLSTATE, sqlStateOf } from '../../db/pg-errors.ts';

/**
 * Row batches (issue 13): up to 1,000 creates, updates, deletes and upserts in one transaction, all or nothing.
 * Checks run first, for every operation (in memory, then a few set-wise reads under row and key locks); only a
 * batch without failures writes, with one statement per kind of write (src/data/row-batch.ts) and one
 * `records.changed` event. The failures of all operations come back in one answer (src/graph/rows/row-batch-plan.ts).
 */
type Outcome = 'created' | 'updated' | 'deleted' | 'unchanged';
export type RowBatchShape = { results: { row: RowShape; outcome: Outcome }[]; mutationId: string };

/** What the batch will write, decided from the checked operations and the locked rows. */
interface Writes {
  /** New rows get their id here; their autoNumber values are drawn just before the write (`completeInserts`). */
  inserts: { index: number; id: string; values: Map<string, CellValue> }[];
  changes: { index: number; row: RowShape; values: Map<string, CellValue>; changed: string[] }[];
  deletes: { index: number; row: RowShape }[];
  unchanged: { index: number; row: RowShape }[];
}

/**
 * Runs a batch statement. Two batches that write overlapping keys in different orders can deadlock in PostgreSQL's
 * unique checks; the one it aborts (40P01) is told to retry — it is a transient conflict, so it is not recorded
 * for its Idempotency-Key, and a retry sees the other batch's rows.
 */
async function query<T>(executor: SqlExecutor, schema: TableSchema, statement: Statement): Promise<T[]> {
  try {
    return await run<T>(executor, schema, statement);
  } catch (error) {
    if (sqlStateOf(error) !== SQLSTATE.deadlockDetected) throw error;
    throw new DomainError(
      'ROW_VERSION_CONFLICT',
      'Another write changed the same rows at the same time; read them again and retry.',
      {
        details: { reason: 'concurrent_write' },
        retryAfter: 1,
      },
    );
  }
}

const valuesOf = (row: RowShape) => new Map(Object.entries(row.values));
const same = (a: CellValue | undefined, b: CellValue | undefined) =>
  JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

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
async function resolveKeyedTargets(
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
    const records = await query<RowRecord & { k: number }>(
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
async function lockTargets(
  executor: SqlExecutor,
  schema: TableSchema,
  planned: readonly PlannedOperation[],
  failures: BatchFailures,
): Promise<Map<string, RowShape>> {
  const ids = planned.flatMap((operation) =>
    (operation.op === 'update' || operation.op === 'delete') && !failures.has(operation.index) ? [operation.rowId] : [],
  );
  if (ids.length === 0) return new Map();
  const records = await query<RowRecord>(executor, schema, lockRows(schema, ids));
  const rows = new Map(records.map((record) => [record.id, toRowShape(schema.fields, record)]));
  for (const operation of planned) {
    if ((operation.op !== 'update' && operation.op !== 'delete') || failures.has(operation.index)) continue;
    const current = rows.get(operation.rowId);
    if (!current || current.version !== operation.expectedVersion)
      failures.add(operation.index, versionConflict(operation.expectedVersion, current?.version ?? null));
  }
  return rows;
}

const ruleOf = (
  schema: TableSchema,
  rule: { id: string; fieldIds: string[]; enforcement: 'btree' | 'hash' },
): KeyRule => ({
  ruleId: rule.id,
  fields: rule.fieldIds.map((id) => schema.fieldsById.get(id)!),
  enforcement: rule.enforcement,
});

const keyPayload = (
  index: number,
  fieldIds: readonly string[],
  values: ReadonlyMap<string, CellValue>,
): RowPayload => ({
  id: index,
  ...Object.fromEntries(fieldIds.map((id) => [columnKeyOf(id), values.get(id) ?? null])),
});

/**
 * Locks the upserted keys, before any row: batches that upsert one key queue here while holding no row lock, so
 * they cannot deadlock with each other over the rows they go on to lock.
 */
async function lockUpsertKeys(
  executor: SqlExecutor,
  schema: TableSchema,
  planned: readonly PlannedOperation[],
): Promise<void> {
  const lockIds = planned.flatMap((operation) => (operation.op === 'upsert' ? [operation.lockId] : []));
  if (lockIds.length > 0) await query(executor, schema, lockKeys([...new Set(lockIds)]));
}

/** Finds (and locks) the rows that hold the upserted keys: upsert index → row. */
async function matchUpserts(
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
    const records = await query<RowRecord & { op: number }>(
      executor,
      schema,
      matchKeys(schema, ruleOf(schema, rule), keys),
    );
    for (const record of records) matched.set(record.op, toRowShape(schema.fields, record));
  }
  return matched;
}

function changeOf(
  schema: TableSchema,
  index: number,
  current: RowShape,
  patch: ReadonlyMap<string, CellValue>,
  writes: Writes,
): void {
  const values = valuesOf(current);
  for (const [fieldId, value] of patch) values.set(fieldId, value);
  const changed = schema.fields
    .filter((field) => !same(current.values[field.id], values.get(field.id)))
    .map((field) => field.id);
  if (changed.length === 0) writes.unchanged.push({ index, row: current });
  else writes.changes.push({ index, row: current, values, changed });
}

/** Decides every operation's write from the locked rows; a row named twice (through an upsert) is refused. */
function decideWrites(
  schema: TableSchema,
  planned: readonly PlannedOperation[],
  targets: Map<string, RowShape>,
  matched: Map<number, RowShape>,
  failures: BatchFailures,
  rowSizeLimit: number,
): Writes {
  const writes: Writes = { inserts: [], changes: [], deletes: [], unchanged: [] };
  const claimedBy = new Map<string, number>(
    planned.flatMap((operation) =>
      operation.op === 'update' || operation.op === 'delete' ? [[operation.rowId, operation.index] as const] : [],
    ),
  );
  for (const operation of planned) {
    if (failures.has(operation.index)) continue;
    if (operation.op === 'create')
      writes.inserts.push({ index: operation.index, id: newId(), values: operation.values });
    else if (operation.op === 'delete')
      writes.deletes.push({ index: operation.index, row: targets.get(operation.rowId)! });
    else if (operation.op === 'update')
      changeOf(schema, operation.index, targets.get(operation.rowId)!, operation.values, writes);
    else {
      const current = matched.get(operation.index);
      if (!current) {
        writes.inserts.push({ index: operation.index, id: newId(), values: operation.values });
        continue;
      }
      const earlier = claimedBy.get(current.id);
      if (earlier !== undefined) {
        failures.invalid(
          operation.index,
          ['values'],
          `matches row ${current.id}, which operation ${earlier} of this batch also changes; a batch names each row once`,
        );
        continue;
      }
      claimedBy.set(current.id, operation.index);
      changeOf(
        schema,
        operation.index,
        current,
        new Map([...operation.values].filter(([fieldId]) => operation.named.has(fieldId))),
        writes,
      );
    }
  }
  for (const change of writes.changes) {
    try {
      checkRowSize(change.values, rowSizeLimit);
    } catch (error) {
      if (error instanceof DomainError) failures.add(change.index, error);
      else throw error;
    }
  }
  return writes;
}

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
        ruleOf(schema, rule),
        rule.where as FilterExpression,
        rows,
        changedIds,
      );
      for (const { op, conflictsWith } of await query<{ op: number; conflictsWith: number | null }>(
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
    for (const { op } of await query<{ op: number }>(
      executor,
      schema,
      takenKeys(schema, ruleOf(schema, rule), keys, changedIds),
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
    for (const { op } of await query<{ op: number }>(executor, schema, statement)) {
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
  const keys = await query<IncomingKey>(executor, schema, incomingKeys(schema.tableId));
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
    for (const { op } of await query<{ op: number }>(executor, schema, statement)) {
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
async function checkAgainstTables(
  executor: SqlExecutor,
  schema: TableSchema,
  writes: Writes,
  failures: BatchFailures,
): Promise<void> {
  await checkUniqueness(executor, schema, writes, failures);
  await checkReferences(executor, schema, writes, failures);
  await checkReferencedRows(executor, schema, writes, failures);
}

/**
 * Writes, and when the database still refuses a key (one a concurrent transaction committed after the checks, or a
 * case the checks leave to the indexes), rolls the writes back and checks again: the new statements see the other
 * transaction's rows, so the failure is reported with its operation's index. If the checks find nothing, the
 * database's own error stands.
 */
async function writeChecked(
  executor: SqlExecutor,
  schema: TableSchema,
  writes: Writes,
  event: RowEvent,
  total: number,
): Promise<void> {
  await executor.query('SAVEPOINT batch_write', []);
  try {
    await write(executor, schema, writes, event);
  } catch (error) {
    if (!(error instanceof DomainError) || (error.code !== 'UNIQUE_CONFLICT' && error.code !== 'FOREIGN_KEY_CONFLICT'))
      throw error;
    await executor.query('ROLLBACK TO SAVEPOINT batch_write', []);
    const again = new BatchFailures();
    await checkAgainstTables(executor, schema, writes, again);
    again.throwIfAny(total);
    throw error;
  }
}

/** Draws the autoNumber values of the new rows. */
async function completeInserts(executor: SqlExecutor, schema: TableSchema, writes: Writes): Promise<void> {
  const statement = allocateGeneratedBatch(schema, writes.inserts.length);
  const drawn = statement ? await query<Record<string, string>>(executor, schema, statement) : [];
  const generated = schema.fields.filter((field) => typeSpecOf(field.type).generated);
  writes.inserts.forEach((insert, position) => {
    generated.forEach((field, index) => insert.values.set(field.id, Number(drawn[position]![`g${index}`])));
  });
}

async function expectWritten(
  executor: SqlExecutor,
  schema: TableSchema,
  written: number,
  expected: number,
): Promise<void> {
  if (written !== expected) await explainRefusedInsert(executor, schema);
}

async function write(executor: SqlExecutor, schema: TableSchema, writes: Writes, event: RowEvent): Promise<void> {
  const batch = { schemaVersion: schema.schemaVersion, event };
  if (writes.deletes.length > 0) {
    const removed = await query(
      executor,
      schema,
      deleteRows(
        schema,
        batch,
        writes.deletes.map((remove) => remove.row.id),
      ),
    );
    await expectWritten(executor, schema, removed.length, writes.deletes.length);
  }
  if (writes.changes.length > 0) {
    const rows: ChangedRow[] = writes.changes.map((change) => ({
      payload: rowPayload(
        schema.fields.filter((field) => !typeSpecOf(field.type).generated),
        change.row.id,
        change.values,
        { version: String(BigInt(change.row.version) + 1n) },
      ),
      changedFieldIds: change.changed,
    }));
    const updated = await query(executor, schema, updateRows(schema, batch, rows));
    await expectWritten(executor, schema, updated.length, writes.changes.length);
  }
  if (writes.inserts.length > 0) {
    const [inserted] = await query<{ count: number }>(
      executor,
      schema,
      insertRows(
        schema,
        batch,
        writes.inserts.map((insert) => rowPayload(schema.fields, insert.id, insert.values)),
      ),
    );
    await expectWritten(executor, schema, inserted!.count, writes.inserts.length);
  }
  const affected = writes.inserts.length + writes.changes.length + writes.deletes.length;
  if (affected > 0) {
    const only =
      affected === 1
        ? [
            ...writes.inserts.map((insert) => insert.id),
            ...[...writes.changes, ...writes.deletes].map((write) => write.row.id),
          ][0]!
        : null;
    await query(executor, schema, batchActivity(schema, event, affected, only));
  }
}

function resultsOf(schema: TableSchema, writes: Writes, event: RowEvent): RowBatchShape['results'] {
  const created = (id: string, values: ReadonlyMap<string, CellValue>): RowShape => ({
    id,
    version: '1',
    createdAt: event.at,
    updatedAt: event.at,
    values: Object.fromEntries(schema.fields.map((field) => [field.id, values.get(field.id) ?? null])),
  });
  const results: { index: number; row: RowShape; outcome: Outcome }[] = [
    ...writes.inserts.map(({ index, id, values }) => ({
      index,
      row: created(id, values),
      outcome: 'created' as const,
    })),
    ...writes.changes.map(({ index, row, values }) => ({
      index,
      outcome: 'updated' as const,
      row: {
        ...row,
        version: String(BigInt(row.version) + 1n),
        updatedAt: event.at,
        values: Object.fromEntries(values),
      },
    })),
    ...writes.deletes.map(({ index, row }) => ({
      index,
      row: { ...row, version: String(BigInt(row.version) + 1n) },
      outcome: 'deleted' as const,
    })),
    ...writes.unchanged.map(({ index, row }) => ({ index, row, outcome: 'unchanged' as const })),
  ];
  return results.sort((a, b) => a.index - b.index).map(({ row, outcome }) => ({ row, outcome }));
}

function summaryOf(writes: Writes): string {
  return (
    `Changed ${writes.inserts.length + writes.changes.length + writes.deletes.length} rows in a batch ` +
    `(${writes.inserts.length} created, ${writes.changes.length} updated, ${writes.deletes.length} deleted)`
  );
}

async function runBatch(
  context: Context,
  tx: IdempotentTransaction,
  schema: TableSchema,
  body: BatchRowsBody,
): Promise<RowBatchShape> {
  if (body.expectedSchemaVersion !== schema.schemaVersion)
    throw schemaVersionConflict(body.expectedSchemaVersion, schema.schemaVersion);
  const failures = new BatchFailures();
  const rowSizeLimit = context.config.ROW_SIZE_LIMIT_BYTES;
  const planned = planBatch(schema, body, failures, rowSizeLimit);
  await lockUpsertKeys(tx.executor, schema, planned);
  await resolveKeyedTargets(tx.executor, schema, planned, failures);
  const targets = await lockTargets(tx.executor, schema, planned, failures);
  const matched = await matchUpserts(tx.executor, schema, planned);
  const writes = decideWrites(schema, planned, targets, matched, failures, rowSizeLimit);
  await checkAgainstTables(tx.executor, schema, writes, failures);
  failures.throwIfAny(body.operations.length);

  const event = rowEvent(context, schema, summaryOf(writes));
  await completeInserts(tx.executor, schema, writes);
  await writeChecked(tx.executor, schema, writes, event, body.operations.length);
  const delta = writes.inserts.length - writes.deletes.length;
  const rowLimit = context.config.TABLE_ROW_LIMIT;
  if (delta !== 0)
    tx.guardCommit({
      sql: claimRowsCapacity(schema.tableId, delta, rowLimit),
      explain: async (error) => rowLimitReached(error, rowLimit),
    });
  return { results: resultsOf(schema, writes, event), mutationId: event.mutationId };
}

const RowBatchOutcome = builder.enumType('RowBatchOutcome', {
  values: ['created', 'updated', 'deleted', 'unchanged'] as const,
});

const RowBatchResult = builder.objectRef<RowBatchShape['results'][number]>('RowBatchResult').implement({
  description:
    'One operation’s row: as written, as it stood when deleted (version = the deletion’s), or as it is when unchanged.',
  fields: (t) => ({
    row: t.field({ type: Row, resolve: (result) => result.row }),
    outcome: t.field({ type: RowBatchOutcome, resolve: (result) => result.outcome }),
  }),
});

const RowBatch = builder.objectRef<RowBatchShape>('RowBatch').implement({
  description:
    'A committed batch: one result per operation, in request order, and the mutation id of its history and event.',
  fields: (t) => ({
    results: t.field({ type: [RowBatchResult], resolve: (batch) => batch.results }),
    mutationId: t.exposeID('mutationId'),
  }),
});

const BatchRowsInput = builder.inputType('BatchRowsInput', {
  fields: (t) => ({
    expectedSchemaVersion: t.int({ required: true }),
    operations: t.field({
      type: ['JSON'],
      required: true,
      description:
        '1..1000 of {op: "create", values}, {op: "update", rowId, expectedVersion, values}, {op: "delete", rowId, expectedVersion}, ' +
        '{op: "upsert", matchOn: <unconditional unique rule id>, values}; update and delete may name their row by ' +
        '{matchOn: <unconditional unique rule id>, key: [values in the rule’s order], expectedVersion?} instead of rowId.',
    }),
  }),
  validate: BatchRowsBody,
});

builder.mutationFields((t) => ({
  batchRows: t.field({
    type: RowBatch,
    description:
      'Applies up to 1,000 row operations in one transaction, all or nothing (issue 13): every failing operation is reported ' +
      'by index in one answer (422 before 413 before 409); one `records.changed` event with `affectedRows`.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      input: t.arg({ type: BatchRowsInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'write' }, oauth: 'rows:write' }),
    resolve: async (_root, args, context) => {
      const body = BatchRowsBody.parse(args.input);
      const address = addressOf(args);
      const schema = await schemaExpecting(context, address, body.expectedSchemaVersion);
      return idempotentSql(
        context,
        { operation: 'batchRows', key: args.idempotencyKey, input: { ...address, ...body } },
        (tx) => runBatch(context, tx, schema, body),
      );
    },
  }),
}));
