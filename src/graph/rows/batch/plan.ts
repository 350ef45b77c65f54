import { createHash } from 'node:crypto';
import type { CellValue } from '../../../data/field-types.ts';
import { DomainError, type FieldProblem } from '../../../kernel/errors.ts';
import type { TableSchema, UniqueRuleDefinition } from '../../../catalog/table-schema.ts';
import type { BatchOperation, BatchRowsBody } from '../../../contracts/rows-batch.ts';
import { checkRowSize, checkValues } from '../row-values.ts';
import { checkedKey, unconditionalRule } from '../row-lookup.ts';
import type { BatchFailures } from './failures.ts';

/**
 * The in-memory half of a row batch (issue 13): each operation of the request checked against the schema without
 * touching the database. An operation that fails is recorded in `BatchFailures` and left out of the plan.
 */

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
 * are filled in once the key's row is found under lock (`resolveKeyedTargets` in ./targets.ts).
 */
export interface KeyMatch {
  rule: UniqueRuleDefinition;
  key: CellValue[];
  versionGiven: boolean;
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
