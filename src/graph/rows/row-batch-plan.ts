import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { CellValue } from '../../data/field-types.ts';
import { DomainError, httpStatusOf, type ErrorCode, type FieldProblem } from '../../kernel/errors.ts';
import { Id, SchemaVersion, VersionString } from '../../kernel/formats.ts';
import type { TableSchema, UniqueRuleDefinition } from '../../catalog/table-schema.ts';
import { checkRowSize, checkValues } from './row-values.ts';
import { checkedKey, unconditionalRule } from './row-lookup.ts';

/**
 * The in-memory half of a row batch (issue 13): the request's shape, each operation checked against the schema
 * without touching the database, and the failures of all operations gathered into one answer.
 */
export const MAX_BATCH_OPERATIONS = 1_000;

const Values = z.record(z.string(), z.unknown());
/**
 * An update or delete names its row by `rowId` (with `expectedVersion`), or by `matchOn` (an unconditional unique
 * rule) and `key` (its fields' values in its order), where `expectedVersion` is optional (issue 28).
 */
const RowTarget = {
  rowId: Id.optional(),
  matchOn: Id.optional().describe('an unconditional unique rule of the table, instead of rowId'),
  key: z.array(z.unknown()).min(1).max(16).optional().describe('with matchOn: the rule’s field values in its order'),
  expectedVersion: VersionString.optional().describe('required with rowId, optional with matchOn'),
};
function targetIssues(
  operation: {
    rowId?: string | undefined;
    matchOn?: string | undefined;
    key?: unknown[] | undefined;
    expectedVersion?: string | undefined;
  },
  context: z.core.$RefinementCtx,
): void {
  if (operation.rowId !== undefined) {
    if (operation.matchOn !== undefined || operation.key !== undefined)
      context.addIssue({ code: 'custom', path: ['matchOn'], message: 'must be absent with rowId' });
    if (operation.expectedVersion === undefined)
      context.addIssue({ code: 'custom', path: ['expectedVersion'], message: 'is required with rowId' });
  } else if (operation.matchOn === undefined) {
    context.addIssue({ code: 'custom', path: ['rowId'], message: 'is required (or matchOn and key)' });
  } else if (operation.key === undefined) {
    context.addIssue({ code: 'custom', path: ['key'], message: 'is required with matchOn' });
  }
}
export const BatchOperation = z.discriminatedUnion(
  'op',
  [
    z.strictObject({ op: z.literal('create'), values: Values }),
    z.strictObject({ op: z.literal('update'), ...RowTarget, values: Values }).superRefine(targetIssues),
    z.strictObject({ op: z.literal('delete'), ...RowTarget }).superRefine(targetIssues),
    z.strictObject({
      op: z.literal('upsert'),
      matchOn: Id.describe('an unconditional unique rule of the table'),
      values: Values,
    }),
  ],
  { error: 'op must be one of create, update, delete, upsert' },
);
export type BatchOperation = z.infer<typeof BatchOperation>;

export const BatchRowsBody = z.strictObject({
  expectedSchemaVersion: SchemaVersion,
  operations: z.array(BatchOperation).min(1).max(MAX_BATCH_OPERATIONS),
});
export type BatchRowsBody = z.infer<typeof BatchRowsBody>;

/** One operation, checked: what the database phase needs. */
export type PlannedOperation =
  | { op: 'create'; index: number; values: Map<string, CellValue> }
  | {
      op: 'update';
      index: number;
      rowId: string;
      expectedVersion: string;
      values: Map<string, CellValue>;
      match?: KeyMatch;
    }
  | { op: 'delete'; index: number; rowId: string; expectedVersion: string; match?: KeyMatch }
  | {
      op: 'upsert';
      index: number;
      rule: UniqueRuleDefinition;
      key: string;
      lockId: string;
      values: Map<string, CellValue>;
      named: Set<string>;
    };

/**
 * An update or delete by key: its rule and checked key. `rowId` (and `expectedVersion`, when the request gave none)
 * are filled in once the key's row is found under lock (src/graph/tables/row-batch.ts, `resolveKeyedTargets`).
 */
export interface KeyMatch {
  rule: UniqueRuleDefinition;
  key: CellValue[];
  versionGiven: boolean;
}

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
    this.list.push({
      index,
      code: error.code,
      message: error.message,
      ...(error.details === undefined ? {} : { details: error.details }),
    });
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
      const problems = failures.flatMap((failure) =>
        failure.code === 'VALIDATION_FAILED'
          ? (failure.details as { problems: FieldProblem[] }).problems.map((problem) => ({
              ...problem,
              path: ['operations', failure.index, ...problem.path],
            }))
          : [],
      );
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

function planUpsert(
  schema: TableSchema,
  operation: Extract<BatchOperation, { op: 'upsert' }>,
  index: number,
  failures: BatchFailures,
): PlannedOperation | null {
  const rule = schema.uniqueRules.find((candidate) => candidate.id === operation.matchOn);
  if (!rule) return (failures.invalid(index, ['matchOn'], 'is not a unique rule of this table'), null);
  if (rule.where !== null && rule.where !== undefined) {
    return (
      failures.invalid(
        index,
        ['matchOn'],
        'is a conditional rule; an upsert needs an unconditional one, so that a key names at most one row',
      ),
      null
    );
  }
  const values = checkValues(schema, operation.values, 'create');
  const empty = rule.fieldIds.filter((id) => (values.get(id) ?? null) === null);
  if (empty.length > 0) {
    const names = empty.map((id) => schema.fieldsById.get(id)!.name).join(', ');
    return (
      failures.invalid(
        index,
        ['values'],
        `must give ${names}: an upsert finds its row by the rule's fields, and an empty key matches no row`,
      ),
      null
    );
  }
  const key = keyOf(rule.fieldIds, values);
  return {
    op: 'upsert',
    index,
    rule,
    key,
    lockId: lockIdOf(schema.tableId, rule.id, key),
    values,
    named: namedFields(schema, operation.values),
  };
}

/** The rule and key of a keyed update or delete, or null (the failure recorded). */
function planMatch(
  schema: TableSchema,
  operation: { matchOn?: string | undefined; key?: unknown[] | undefined; expectedVersion?: string | undefined },
  index: number,
  failures: BatchFailures,
): KeyMatch | null {
  const rule = unconditionalRule(schema, operation.matchOn!, ['matchOn']);
  if ('path' in rule) return (failures.invalid(index, rule.path, rule.message), null);
  const problems: FieldProblem[] = [];
  const key = checkedKey(schema, rule, operation.key!, ['key'], problems);
  key.forEach((value, position) => {
    if (value === null && !problems.some((problem) => problem.path[1] === position)) {
      problems.push({ path: ['key', position], message: 'must not be empty: an empty value names no row' });
    }
  });
  if (problems.length > 0) {
    failures.add(
      index,
      new DomainError('VALIDATION_FAILED', 'The key does not fit the rule’s fields.', { details: { problems } }),
    );
    return null;
  }
  return { rule, key, versionGiven: operation.expectedVersion !== undefined };
}

function planOne(
  schema: TableSchema,
  operation: BatchOperation,
  index: number,
  failures: BatchFailures,
  rowSizeLimit: number,
): PlannedOperation | null {
  if ((operation.op === 'update' || operation.op === 'delete') && operation.rowId === undefined) {
    const match = planMatch(schema, operation, index, failures);
    if (!match) return null;
    const target = { index, rowId: '', expectedVersion: operation.expectedVersion ?? '', match };
    return operation.op === 'update'
      ? { op: 'update', ...target, values: checkValues(schema, operation.values, 'update') }
      : { op: 'delete', ...target };
  }
  switch (operation.op) {
    case 'create': {
      const values = checkValues(schema, operation.values, 'create');
      checkRowSize(values, rowSizeLimit);
      return { op: 'create', index, values };
    }
    case 'update':
      return {
        op: 'update',
        index,
        rowId: operation.rowId!,
        expectedVersion: operation.expectedVersion!,
        values: checkValues(schema, operation.values, 'update'),
      };
    case 'delete':
      return { op: 'delete', index, rowId: operation.rowId!, expectedVersion: operation.expectedVersion! };
    case 'upsert':
      return planUpsert(schema, operation, index, failures);
  }
}

/** Two operations on one row (or one upsert key) would depend on their order; a batch names each row once. */
function refuseRepeats(planned: readonly PlannedOperation[], failures: BatchFailures): void {
  const seen = new Map<string, number>();
  for (const operation of planned) {
    const target =
      (operation.op === 'update' || operation.op === 'delete') && operation.match
        ? `key ${operation.match.rule.id} ${JSON.stringify(operation.match.key)}`
        : operation.op === 'update' || operation.op === 'delete'
          ? `row ${operation.rowId}`
          : operation.op === 'upsert'
            ? `key ${operation.rule.id} ${operation.key}`
            : null;
    if (target === null) continue;
    const earlier = seen.get(target);
    if (earlier === undefined) seen.set(target, operation.index);
    else {
      const path =
        operation.op === 'upsert'
          ? 'values'
          : (operation.op === 'update' || operation.op === 'delete') && operation.match
            ? 'key'
            : 'rowId';
      failures.invalid(
        operation.index,
        [path],
        `operation ${earlier} of this batch already changes this row; a batch names each row once`,
      );
    }
  }
}

/** Checks every operation against the schema; the ones that fail are left out and recorded in `failures`. */
export function planBatch(
  schema: TableSchema,
  body: BatchRowsBody,
  failures: BatchFailures,
  rowSizeLimit: number,
): PlannedOperation[] {
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
