import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { CellValue } from '../../data/field-types.ts';
import { DomainError, httpStatusOf, type ErrorCode, type FieldProblem } from '../../kernel/errors.ts';
import { Id, SchemaVersion, VersionString } from '../../kernel/formats.ts';
import type { TableSchema, UniqueRuleDefinition } from '../../catalog/table-schema.ts';
import { checkRowSize, checkValues } from './row-values.ts';

/**
 * The in-memory half of a row batch (issue 13): the request's shape, each operation checked against the schema
 * without touching the database, and the failures of all operations gathered into one answer.
 */
export const MAX_BATCH_OPERATIONS = 1_000;

const Values = z.record(z.string(), z.unknown());
export const BatchOperation = z.discriminatedUnion('op', [
  z.strictObject({ op: z.literal('create'), values: Values }),
  z.strictObject({ op: z.literal('update'), rowId: Id, expectedVersion: VersionString, values: Values }),
  z.strictObject({ op: z.literal('delete'), rowId: Id, expectedVersion: VersionString }),
  z.strictObject({ op: z.literal('upsert'), matchOn: Id.describe('an unconditional unique rule of the table'), values: Values }),
], { error: 'op must be one of create, update, delete, upsert' });
export type BatchOperation = z.infer<typeof BatchOperation>;

export const BatchRowsBody = z.strictObject({
  expectedSchemaVersion: SchemaVersion,
  operations: z.array(BatchOperation).min(1).max(MAX_BATCH_OPERATIONS),
});
export type BatchRowsBody = z.infer<typeof BatchRowsBody>;

/** One operation, checked: what the database phase needs. */
export type PlannedOperation =
  | { op: 'create'; index: number; values: Map<string, CellValue> }
  | { op: 'update'; index: number; rowId: string; expectedVersion: string; values: Map<string, CellValue> }
  | { op: 'delete'; index: number; rowId: string; expectedVersion: string }
  | { op: 'upsert'; index: number; rule: UniqueRuleDefinition; key: string; lockId: string; values: Map<string, CellValue>; named: Set<string> };

export interface BatchFailure {
  index: number;
  code: ErrorCode;
  message: string;
  details?: unknown;
}

/**
 * Failures of a batch, answered together. Which status wins when they are mixed: 422 (the request itself is wrong;
 * fixing it may change everything else), then 413 (a row too large), then 409 (the data changed; retry after
 * reading it again). The top-level code is that of the first failing operation with the winning status;
 * `details.failures` lists every failing operation by index, and a 422 also carries the usual `problems` with paths
 * under `operations.<index>`.
 */
export class BatchFailures {
  readonly list: BatchFailure[] = [];

  add(index: number, error: DomainError): void {
    this.list.push({ index, code: error.code, message: error.message, ...(error.details === undefined ? {} : { details: error.details }) });
  }

  invalid(index: number, path: (string | number)[], message: string): void {
    this.add(index, new DomainError('VALIDATION_FAILED', message, { details: { problems: [{ path, message }] } }));
  }

  has(index: number): boolean {
    return this.list.some((failure) => failure.index === index);
  }

  throwIfAny(total: number): void {
    if (this.list.length === 0) return;
    const failures = [...this.list].sort((a, b) => a.index - b.index);
    const rank = (failure: BatchFailure) => [422, 413, 409].indexOf(httpStatusOf(failure.code));
    const winner = failures.reduce((best, failure) => (rank(failure) < rank(best) ? failure : best));
    const summary = `${new Set(failures.map((failure) => failure.index)).size} of ${total} operations failed; nothing was written.`;
    if (winner.code === 'VALIDATION_FAILED') {
      const problems = failures.flatMap((failure) => failure.code === 'VALIDATION_FAILED'
        ? ((failure.details as { problems: FieldProblem[] }).problems).map((problem) => ({ ...problem, path: ['operations', failure.index, ...problem.path] }))
        : []);
      throw new DomainError('VALIDATION_FAILED', summary, { details: { problems, failures } });
    }
    throw new DomainError(winner.code, summary, { details: { failures } });
  }
}

/** The key of an upsert as one comparable string: canonical values in the rule's field order. */
export function keyOf(fieldIds: readonly string[], values: ReadonlyMap<string, CellValue>): string {
  return JSON.stringify(fieldIds.map((id) => values.get(id) ?? null));
}

/** A 64-bit advisory lock id for (table, rule, key): serialises upserts of one key across transactions. */
function lockIdOf(tableId: string, ruleId: string, key: string): string {
  return createHash('sha256').update(`${tableId}\n${ruleId}\n${key}`, 'utf8').digest().readBigInt64BE(0).toString();
}

function namedFields(schema: TableSchema, values: Record<string, unknown>): Set<string> {
  const named = new Set<string>();
  for (const key of Object.keys(values)) {
    const field = schema.fieldsById.get(key) ?? schema.fieldsByName.get(key);
    if (field) named.add(field.id);
  }
  return named;
}

function planUpsert(schema: TableSchema, operation: Extract<BatchOperation, { op: 'upsert' }>, index: number, failures: BatchFailures): PlannedOperation | null {
  const rule = schema.uniqueRules.find((candidate) => candidate.id === operation.matchOn);
  if (!rule) return failures.invalid(index, ['matchOn'], 'is not a unique rule of this table'), null;
  if (rule.where !== null && rule.where !== undefined) {
    return failures.invalid(index, ['matchOn'], 'is a conditional rule; an upsert needs an unconditional one, so that a key names at most one row'), null;
  }
  const values = checkValues(schema, operation.values, 'create');
  const empty = rule.fieldIds.filter((id) => (values.get(id) ?? null) === null);
  if (empty.length > 0) {
    const names = empty.map((id) => schema.fieldsById.get(id)!.name).join(', ');
    return failures.invalid(index, ['values'], `must give ${names}: an upsert finds its row by the rule's fields, and an empty key matches no row`), null;
  }
  const key = keyOf(rule.fieldIds, values);
  return { op: 'upsert', index, rule, key, lockId: lockIdOf(schema.tableId, rule.id, key), values, named: namedFields(schema, operation.values) };
}

function planOne(schema: TableSchema, operation: BatchOperation, index: number, failures: BatchFailures, rowSizeLimit: number): PlannedOperation | null {
  switch (operation.op) {
    case 'create': {
      const values = checkValues(schema, operation.values, 'create');
      checkRowSize(values, rowSizeLimit);
      return { op: 'create', index, values };
    }
    case 'update':
      return { op: 'update', index, rowId: operation.rowId, expectedVersion: operation.expectedVersion, values: checkValues(schema, operation.values, 'update') };
    case 'delete':
      return { op: 'delete', index, rowId: operation.rowId, expectedVersion: operation.expectedVersion };
    case 'upsert':
      return planUpsert(schema, operation, index, failures);
  }
}

/** Two operations on one row (or one upsert key) would depend on their order; a batch names each row once. */
function refuseRepeats(planned: readonly PlannedOperation[], failures: BatchFailures): void {
  const seen = new Map<string, number>();
  for (const operation of planned) {
    const target = operation.op === 'update' || operation.op === 'delete' ? `row ${operation.rowId}`
      : operation.op === 'upsert' ? `key ${operation.rule.id} ${operation.key}` : null;
    if (target === null) continue;
    const earlier = seen.get(target);
    if (earlier === undefined) seen.set(target, operation.index);
    else failures.invalid(operation.index, [operation.op === 'upsert' ? 'values' : 'rowId'], `operation ${earlier} of this batch already changes this row; a batch names each row once`);
  }
}

/** Checks every operation against the schema; the ones that fail are left out and recorded in `failures`. */
export function planBatch(schema: TableSchema, body: BatchRowsBody, failures: BatchFailures, rowSizeLimit: number): PlannedOperation[] {
  const planned: PlannedOperation[] = [];
  body.operations.forEach((operation, index) => {
    try {
      const checked = planOne(schema, operation, index, failures, rowSizeLimit);
      if (checked) planned.push(checked);
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      failures.add(index, error);
    }
  });
  refuseRepeats(planned, failures);
  return planned.filter((operation) => !failures.has(operation.index));
}
