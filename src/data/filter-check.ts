import type { FieldProblem } from '../kernel/errors.ts';
import {
  isStorableText,
  typeSpecOf,
  UNSTORABLE_TEXT,
  valueSchemaOf,
  type FieldDefinition,
  type ValueFamily,
} from './field-types.ts';
import {
  isRecord,
  resolveField,
  type FilterExpression,
  type FilterLeaf,
  type FilterOp,
  type OrderByItem,
  type PathKey,
} from './filter.ts';

/**
 * The semantic check of a well-shaped filter and order against a table's fields (spec 2.3, 2.4): which operators
 * apply to which field type, and what each operator's value must hold. `docs/decisions/filters.md` ("Filter
 * language") has the operator × type table this file implements.
 */

/** Spec §8. */
const MAX_IN_VALUES = 1000;

const ORDERED = [
  'eq',
  'ne',
  'lt',
  'lte',
  'gt',
  'gte',
  'between',
  'in',
  'isNull',
  'isNotNull',
] as const satisfies FilterOp[];

const OPS_BY_FAMILY: Record<ValueFamily, readonly FilterOp[]> = {
  string: [...ORDERED, 'prefix', 'contains', 'iContains'],
  number: ORDERED,
  date: ORDERED,
  datetime: ORDERED,
  boolean: ['eq', 'ne', 'in', 'isNull', 'isNotNull'],
  array: ['contains', 'in', 'isNull', 'isNotNull'],
  json: ['isNull', 'isNotNull', 'pathExists', 'pathEq', 'jsonContains'],
};

/** What `value` holds for each operator: a scalar of the field's type, two of them, a list, any JSON, or nothing. */
export const VALUE_SHAPE: Record<FilterOp, 'none' | 'one' | 'pair' | 'list' | 'json'> = {
  eq: 'one',
  ne: 'one',
  lt: 'one',
  lte: 'one',
  gt: 'one',
  gte: 'one',
  between: 'pair',
  in: 'list',
  isNull: 'none',
  isNotNull: 'none',
  prefix: 'one',
  contains: 'one',
  iContains: 'one',
  pathExists: 'none',
  pathEq: 'json',
  jsonContains: 'json',
};

const PATH_OPS: readonly FilterOp[] = ['pathExists', 'pathEq', 'jsonContains'];
/** Equality against a select's choices: a value that is not a choice is a typo or a stale view, never a match. */
const SELECT_EQUALITY_OPS: readonly FilterOp[] = ['eq', 'ne', 'in'];
const NUL_MESSAGE = UNSTORABLE_TEXT;

export const familyOf = (field: FieldDefinition): ValueFamily => typeSpecOf(field.type).family;

function choiceProblem(field: FieldDefinition, op: FilterOp, value: string): string | null {
  const choices = field.options.choices;
  // Every multiSelect operator with an operand (contains, in) names choices; select's prefix and substring do not.
  const namesChoice = field.type === 'multiSelect' || (field.type === 'select' && SELECT_EQUALITY_OPS.includes(op));
  return namesChoice && Array.isArray(choices) && !choices.includes(value)
    ? 'must be one of the declared choices'
    : null;
}

/** The problem with one scalar operand of `op` on `field`, or null when it is fine. */
function operandProblem(field: FieldDefinition, op: FilterOp, value: unknown): string | null {
  if (value === null) return 'must not be null (use isNull or isNotNull)';
  switch (familyOf(field)) {
    case 'number':
      return typeof value === 'number' && Number.isFinite(value) ? null : 'must be a finite number';
    case 'boolean':
      return typeof value === 'boolean' ? null : 'must be true or false';
    case 'date':
    case 'datetime': {
      const parsed = valueSchemaOf(field).safeParse(value);
      return parsed.success ? null : (parsed.error.issues[0]?.message ?? 'is not valid');
    }
    default:
      if (typeof value !== 'string') return 'must be a string';
      return !isStorableText(value) ? NUL_MESSAGE : choiceProblem(field, op, value);
  }
}

function operandProblems(field: FieldDefinition, op: FilterOp, values: readonly unknown[]): FieldProblem[] {
  return values.flatMap((value, index) => {
    const message = operandProblem(field, op, value);
    return message ? [{ path: ['value', index], message }] : [];
  });
}

function jsonHasNul(value: unknown): boolean {
  if (typeof value === 'string') return !isStorableText(value);
  if (Array.isArray(value)) return value.some(jsonHasNul);
  return isRecord(value) && Object.entries(value).some(([key, item]) => !isStorableText(key) || jsonHasNul(item));
}

function valueProblems(field: FieldDefinition, leaf: FilterLeaf): FieldProblem[] {
  const { op, value } = leaf;
  const shape = VALUE_SHAPE[op];
  if (shape === 'none')
    return value === undefined ? [] : [{ path: ['value'], message: `must be absent: ${op} takes no value` }];
  if (value === undefined) return [{ path: ['value'], message: `is required for ${op}` }];
  switch (shape) {
    case 'one': {
      const message = operandProblem(field, op, value);
      return message ? [{ path: ['value'], message }] : [];
    }
    case 'pair':
      return Array.isArray(value) && value.length === 2
        ? operandProblems(field, op, value)
        : [{ path: ['value'], message: 'must be an array of two values [low, high]' }];
    case 'list':
      return Array.isArray(value) && value.length >= 1 && value.length <= MAX_IN_VALUES
        ? operandProblems(field, op, value)
        : [{ path: ['value'], message: `must be an array of 1 to ${MAX_IN_VALUES} values` }];
    case 'json':
      return jsonHasNul(value) ? [{ path: ['value'], message: NUL_MESSAGE }] : [];
  }
}

function pathProblems(leaf: FilterLeaf): FieldProblem[] {
  const { op, path } = leaf;
  const required = op === 'pathExists' || op === 'pathEq';
  if (path === undefined) return required ? [{ path: ['path'], message: `is required for ${op}` }] : [];
  if (!PATH_OPS.includes(op))
    return [{ path: ['path'], message: `must be absent: only ${PATH_OPS.join(', ')} take a path` }];
  if (required && path.length === 0) return [{ path: ['path'], message: `must have at least one item for ${op}` }];
  return path.flatMap((item, index) =>
    typeof item === 'string' && !isStorableText(item) ? [{ path: ['path', index], message: NUL_MESSAGE }] : [],
  );
}

function leafProblems(leaf: FilterLeaf, fields: readonly FieldDefinition[]): FieldProblem[] {
  const field = resolveField(fields, leaf.field);
  if (!field)
    return [
      {
        path: ['field'],
        message: `must be the id or name of a field of this table; ${JSON.stringify(leaf.field)} is neither`,
      },
    ];
  const allowed = OPS_BY_FAMILY[familyOf(field)];
  if (!allowed.includes(leaf.op)) {
    return [
      { path: ['op'], message: `${leaf.op} does not apply to a ${field.type} field; use one of ${allowed.join(', ')}` },
    ];
  }
  return [...pathProblems(leaf), ...valueProblems(field, leaf)];
}

function problemsAt(expression: FilterExpression, fields: readonly FieldDefinition[], at: PathKey[]): FieldProblem[] {
  const within = (problems: FieldProblem[]) =>
    problems.map((problem) => ({ ...problem, path: [...at, ...problem.path] }));
  if ('and' in expression)
    return expression.and.flatMap((item, index) => problemsAt(item, fields, [...at, 'and', index]));
  if ('or' in expression) return expression.or.flatMap((item, index) => problemsAt(item, fields, [...at, 'or', index]));
  return within(leafProblems(expression, fields));
}

/** Semantic check against a table's fields. Returns every problem; paths are relative to the expression. */
export function checkFilter(expression: FilterExpression, fields: readonly FieldDefinition[]): FieldProblem[] {
  return problemsAt(expression, fields, []);
}

/** json and multiSelect have no useful total order for a spreadsheet user, so they cannot be sorted by. */
const UNORDERABLE: readonly ValueFamily[] = ['json', 'array'];

export function checkOrderBy(orderBy: readonly OrderByItem[], fields: readonly FieldDefinition[]): FieldProblem[] {
  const seen = new Set<string>();
  return orderBy.flatMap((item, index): FieldProblem[] => {
    const field = resolveField(fields, item.field);
    const path = [index, 'field'];
    if (!field)
      return [
        { path, message: `must be the id or name of a field of this table; ${JSON.stringify(item.field)} is neither` },
      ];
    if (UNORDERABLE.includes(familyOf(field))) return [{ path, message: `cannot sort by a ${field.type} field` }];
    if (seen.has(field.id)) return [{ path, message: 'must not repeat a field already sorted by' }];
    seen.add(field.id);
    return [];
  });
}
