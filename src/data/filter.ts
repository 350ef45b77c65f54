import { z } from 'zod';
import type { FieldProblem } from '../kernel/errors.ts';
import {
  isStorableText,
  typeSpecOf,
  UNSTORABLE_TEXT,
  valueSchemaOf,
  type FieldDefinition,
  type ValueFamily,
} from './field-types.ts';
import { columnOf } from './identifiers.ts';

/**
 * The filter language of saved views and conditional unique rules (spec 2.3, 2.4): its zod schemas, the semantic
 * check against a table's fields, and the compiler to a SQL boolean expression. `docs/decisions/filters.md` ("Filter
 * language") has the operator × type table this file implements.
 */

export const FILTER_OPS = [
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
  'prefix',
  'contains',
  'iContains',
  'pathExists',
  'pathEq',
  'jsonContains',
] as const;
export type FilterOp = (typeof FILTER_OPS)[number];

export interface FilterLeaf {
  field: string;
  op: FilterOp;
  value?: unknown;
  path?: (string | number)[];
}
export type FilterExpression = FilterLeaf | { and: FilterExpression[] } | { or: FilterExpression[] };
export interface OrderByItem {
  field: string;
  direction: 'asc' | 'desc';
}

/** Spec §8. */
const MAX_GROUP_ITEMS = 100;
const MAX_PATH_ITEMS = 32;
const MAX_PATH_KEY_LENGTH = 1024;
const MAX_PATH_INDEX = 2_147_483_647;
const MAX_ORDER_BY = 8;
/** Ours, to bound the work (and the stack) one request can cost: a deeper or larger filter is not a real view. */
const MAX_GROUP_DEPTH = 16;
const MAX_LEAVES = 500;
/** The deepest document a json field may hold (FIELD_OPTIONS.json maxDepth ≤ 64): deeper values never match. */
const MAX_VALUE_DEPTH = 64;
const MAX_IN_VALUES = 1000;

/**
 * The cost budget (DESIGN §5, issue 18), checked before any SQL runs: the sum of each condition's weight. A filter is
 * evaluated on every row a scan reaches, so the weight is what one condition costs per row relative to a comparison:
 * LIKE scans the text (ILIKE also folds case) and JSON conditions walk the document. Measured on 300,000 rows,
 * 120 iContains conditions took 26 s (~0.7 µs per condition per row), so the 25 the budget allows (500 / 20) take
 * about 5 s there; larger tables rely on the statement budget (QUERY_TIMEOUT). 500 comparisons, the structural
 * maximum of conditions, stay allowed.
 */
export const FILTER_COST_BUDGET = 500;
export const FILTER_OP_WEIGHTS: Readonly<Record<FilterOp, number>> = {
  eq: 1,
  ne: 1,
  lt: 1,
  lte: 1,
  gt: 1,
  gte: 1,
  between: 1,
  in: 1,
  isNull: 1,
  isNotNull: 1,
  prefix: 5,
  contains: 10,
  iContains: 20,
  pathExists: 10,
  pathEq: 10,
  jsonContains: 10,
};
/**
 * Values one filter may bind (every single value, both ends of a between, every `in` item and JSON path item).
 * PostgreSQL's protocol carries at most 65,535 parameters per statement, and a row page adds its own (cursor, limit).
 */
export const MAX_FILTER_VALUES = 10_000;

type PathKey = string | number;

/** A field id or a field's exact name (`resolveField`). */
export const FieldReference = z.string().min(1).max(64);

const PathItem = z.union([z.string().max(MAX_PATH_KEY_LENGTH), z.number().int().min(0).max(MAX_PATH_INDEX)], {
  error: `must be a string of at most ${MAX_PATH_KEY_LENGTH} characters or an integer 0..${MAX_PATH_INDEX}`,
});

const leafShape = (value: z.ZodType) =>
  z.strictObject({
    field: FieldReference,
    op: z.enum(FILTER_OPS),
    value: value.optional(),
    path: z.array(PathItem).max(MAX_PATH_ITEMS).optional(),
  });

/** The value is checked separately (`jsonValueIssue`), without recursion and with readable messages. */
const LeafWithoutValue = leafShape(z.unknown());

const GROUP_SHAPES = {
  and: z.strictObject({ and: z.array(z.unknown()).min(1).max(MAX_GROUP_ITEMS) }),
  or: z.strictObject({ or: z.array(z.unknown()).min(1).max(MAX_GROUP_ITEMS) }),
};

/** The declared shape: what the OpenAPI document shows and what types the output. */
const Expression: z.ZodType<FilterExpression> = z.lazy(() =>
  z.union([
    leafShape(z.json()),
    z.strictObject({ and: z.array(Expression).min(1).max(MAX_GROUP_ITEMS) }),
    z.strictObject({ or: z.array(Expression).min(1).max(MAX_GROUP_ITEMS) }),
  ]),
);

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function groupKeyOf(node: unknown): 'and' | 'or' | null {
  if (!isRecord(node)) return null;
  if (Object.hasOwn(node, 'and')) return 'and';
  return Object.hasOwn(node, 'or') ? 'or' : null;
}

const prefixed = (path: PathKey[], issues: readonly z.core.$ZodIssue[]): FieldProblem[] =>
  issues.map((issue) => ({
    path: [...path, ...issue.path.map((key) => (typeof key === 'number' ? key : String(key)))],
    message: issue.message,
  }));

/** Any finite JSON value nesting at most MAX_VALUE_DEPTH containers, walked with an explicit stack. */
function jsonValueIssue(value: unknown): FieldProblem | null {
  const pending: { node: unknown; path: PathKey[]; depth: number }[] = [{ node: value, path: [], depth: 0 }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const { node, path, depth } = next;
    if (node === null || typeof node === 'string' || typeof node === 'boolean') continue;
    if (typeof node === 'number') {
      if (!Number.isFinite(node)) return { path, message: 'must be a finite number' };
      continue;
    }
    const isContainer =
      Array.isArray(node) || (isRecord(node) && [Object.prototype, null].includes(Object.getPrototypeOf(node)));
    if (!isContainer)
      return { path, message: 'must be JSON: null, a boolean, a number, a string, an array or an object' };
    if (depth >= MAX_VALUE_DEPTH) return { path, message: `must nest at most ${MAX_VALUE_DEPTH} levels` };
    const entries: [PathKey, unknown][] = Array.isArray(node)
      ? Array.from(node, (item, index) => [index, item])
      : Object.entries(node);
    for (const [key, item] of entries) pending.push({ node: item, path: [...path, key], depth: depth + 1 });
  }
  return null;
}

function leafIssues(node: unknown, path: PathKey[]): FieldProblem[] {
  const parsed = LeafWithoutValue.safeParse(node);
  const issues = parsed.success ? [] : prefixed(path, parsed.error.issues);
  const valueIssue = isRecord(node) && node.value !== undefined ? jsonValueIssue(node.value) : null;
  return valueIssue
    ? [...issues, { path: [...path, 'value', ...valueIssue.path], message: valueIssue.message }]
    : issues;
}

/**
 * Every structural problem of an untrusted expression, found iteratively so that a hostile nesting depth cannot
 * exhaust the stack before a limit is seen. Groups over the item limit are reported and not entered.
 */
function structuralIssues(root: unknown): FieldProblem[] {
  const issues: FieldProblem[] = [];
  const pending: { node: unknown; path: PathKey[]; depth: number }[] = [{ node: root, path: [], depth: 0 }];
  let leaves = 0;
  for (let next = pending.pop(); next; next = pending.pop()) {
    const { node, path, depth } = next;
    const key = groupKeyOf(node);
    if (key === null) {
      leaves += 1;
      if (leaves > MAX_LEAVES)
        return [...issues, { path: [], message: `must have at most ${MAX_LEAVES} conditions in all` }];
      issues.push(...leafIssues(node, path));
      continue;
    }
    if (depth >= MAX_GROUP_DEPTH) {
      issues.push({ path, message: `and/or groups may nest at most ${MAX_GROUP_DEPTH} levels deep` });
      continue;
    }
    const parsed = GROUP_SHAPES[key].safeParse(node);
    if (!parsed.success) issues.push(...prefixed(path, parsed.error.issues));
    const items = (node as Record<string, unknown>)[key];
    if (!Array.isArray(items) || items.length > MAX_GROUP_ITEMS) continue;
    // Pushed last-first so that problems come out in document order.
    for (let index = items.length - 1; index >= 0; index -= 1) {
      pending.push({ node: items[index], path: [...path, key, index], depth: depth + 1 });
    }
  }
  return issues;
}

/** Spec 2.4, plus our depth and size bounds. The walk reports precise paths; the union then types the result. */
export const FilterExpression: z.ZodType<FilterExpression> = z.preprocess((input, context) => {
  for (const { path, message } of structuralIssues(input)) context.addIssue({ code: 'custom', path, message });
  return input;
}, Expression);

/** Spec 2.3 query.orderBy. */
export const OrderBy: z.ZodType<OrderByItem[]> = z
  .array(
    z.strictObject({
      field: FieldReference,
      direction: z.enum(['asc', 'desc']),
    }),
  )
  .max(MAX_ORDER_BY);

/** A field reference is a field id (exact) or, failing that, a field name (exact, case-sensitive). */
export function resolveField(fields: readonly FieldDefinition[], reference: string): FieldDefinition | undefined {
  return fields.find((field) => field.id === reference) ?? fields.find((field) => field.name === reference);
}

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
const VALUE_SHAPE: Record<FilterOp, 'none' | 'one' | 'pair' | 'list' | 'json'> = {
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

const familyOf = (field: FieldDefinition): ValueFamily => typeSpecOf(field.type).family;

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

/** Binds one scalar and returns its placeholder (or, for DDL, a literal) with the cast applied. */
export type Bind = (value: string | number | boolean | null, cast: string) => string;

interface LeafContext {
  column: string;
  field: FieldDefinition;
  bind: Bind;
}

/** Safe integers use the column's own cast (bigint stays bigint, so its index applies); other numbers numeric. */
function bindOperand({ field, bind }: LeafContext, value: unknown): string {
  const spec = typeSpecOf(field.type);
  if (spec.family === 'number') return bind(String(value), Number.isSafeInteger(value) ? spec.cast : 'numeric');
  if (spec.family === 'array') return bind(value as string, 'text');
  return bind(value as string | boolean, spec.cast);
}

/**
 * LIKE / ILIKE (so trigram or pattern indexes can serve them) with the value's own `%`, `_` and `\` escaped:
 * the user's text is always matched literally, and it is still a bound parameter.
 */
function likePattern({ bind }: LeafContext, value: unknown, before: string, after: string): string {
  const literal = String(value).replace(/[\\%_]/g, (character) => `\\${character}`);
  return bind(`${before}${literal}${after}`, 'text');
}

const bindList = (context: LeafContext, values: unknown): string[] =>
  (values as unknown[]).map((value) => bindOperand(context, value));

function bindPath({ bind }: LeafContext, path: readonly PathKey[]): string {
  return `ARRAY[${path.map((item) => bind(String(item), 'text')).join(', ')}]::text[]`;
}

const COMPARISON_SQL: Partial<Record<FilterOp, string>> = {
  eq: '=',
  ne: 'IS DISTINCT FROM',
  lt: '<',
  lte: '<=',
  gt: '>',
  gte: '>=',
};

function multiSelectSql(context: LeafContext, leaf: FilterLeaf): string {
  const { column } = context;
  switch (leaf.op) {
    case 'contains':
      return `${bindOperand(context, leaf.value)} = ANY(${column})`;
    case 'in':
      return `${column} && ARRAY[${bindList(context, leaf.value).join(', ')}]::text[]`;
    // An empty multi-select looks exactly like an unset one, so both count as empty.
    case 'isNull':
      return `coalesce(cardinality(${column}), 0) = 0`;
    case 'isNotNull':
      return `cardinality(${column}) > 0`;
    default:
      throw new Error(`compileFilter: ${leaf.op} does not apply to multiSelect`);
  }
}

function jsonSql(context: LeafContext, leaf: FilterLeaf): string {
  const { column, bind } = context;
  const target = leaf.path && leaf.path.length > 0 ? `(${column} #> ${bindPath(context, leaf.path)})` : column;
  const document = () => bind(JSON.stringify(leaf.value), 'jsonb');
  switch (leaf.op) {
    case 'isNull':
      return `${column} IS NULL`;
    case 'isNotNull':
      return `${column} IS NOT NULL`;
    case 'pathExists':
      return `${target} IS NOT NULL`;
    case 'pathEq':
      return `${target} = ${document()}`;
    case 'jsonContains':
      return `${target} @> ${document()}`;
    default:
      throw new Error(`compileFilter: ${leaf.op} does not apply to json`);
  }
}

function scalarSql(context: LeafContext, leaf: FilterLeaf): string {
  const { column } = context;
  const comparison = COMPARISON_SQL[leaf.op];
  if (comparison) return `${column} ${comparison} ${bindOperand(context, leaf.value)}`;
  switch (leaf.op) {
    case 'between': {
      const [low, high] = bindList(context, leaf.value);
      // Parenthesised because BETWEEN's own AND would otherwise read like a conjunction.
      return `(${column} BETWEEN ${low} AND ${high})`;
    }
    case 'in':
      return `${column} IN (${bindList(context, leaf.value).join(', ')})`;
    case 'isNull':
      return `${column} IS NULL`;
    case 'isNotNull':
      return `${column} IS NOT NULL`;
    case 'prefix':
      return `${column} LIKE ${likePattern(context, leaf.value, '', '%')} ESCAPE '\\'`;
    case 'contains':
      return `${column} LIKE ${likePattern(context, leaf.value, '%', '%')} ESCAPE '\\'`;
    case 'iContains':
      return `${column} ILIKE ${likePattern(context, leaf.value, '%', '%')} ESCAPE '\\'`;
    default:
      throw new Error(`compileFilter: ${leaf.op} does not apply to ${context.field.type}`);
  }
}

function leafSql(leaf: FilterLeaf, fields: readonly FieldDefinition[], bind: Bind, alias: string | undefined): string {
  const field = resolveField(fields, leaf.field);
  if (!field) throw new Error(`compileFilter: unknown field ${JSON.stringify(leaf.field)}`);
  const context = { column: alias ? `${alias}.${columnOf(field.id)}` : columnOf(field.id), field, bind };
  const family = familyOf(field);
  if (family === 'array') return multiSelectSql(context, leaf);
  if (family === 'json') return jsonSql(context, leaf);
  return scalarSql(context, leaf);
}

function expressionSql(
  expression: FilterExpression,
  fields: readonly FieldDefinition[],
  bind: Bind,
  alias: string | undefined,
): string {
  const group = (items: FilterExpression[], joiner: string) =>
    `(${items.map((item) => expressionSql(item, fields, bind, alias)).join(joiner)})`;
  if ('and' in expression) return group(expression.and, ' AND ');
  if ('or' in expression) return group(expression.or, ' OR ');
  return leafSql(expression, fields, bind, alias);
}

/**
 * SQL boolean expression for a filter that `checkFilter` accepts (it throws otherwise: a caller bug). Values reach
 * the SQL only through `bind`; columns only through `columnOf`. `alias` must be a plain SQL identifier.
 */
export function compileFilter(
  expression: FilterExpression,
  fields: readonly FieldDefinition[],
  bind: Bind,
  alias?: string,
): string {
  if (alias !== undefined && !/^[a-z_][a-z0-9_]*$/.test(alias))
    throw new Error(`compileFilter: alias must be a plain identifier, got ${JSON.stringify(alias)}`);
  const problems = checkFilter(expression, fields);
  if (problems.length > 0) throw new Error(`compileFilter needs a checked filter: ${JSON.stringify(problems)}`);
  return expressionSql(expression, fields, bind, alias);
}

function boundValuesOf(leaf: FilterLeaf): number {
  const shape = VALUE_SHAPE[leaf.op];
  const values =
    shape === 'none'
      ? 0
      : shape === 'pair' || shape === 'list'
        ? Array.isArray(leaf.value)
          ? leaf.value.length
          : 1
        : 1;
  return values + (leaf.path?.length ?? 0);
}

/**
 * The cost and bound values of a well-shaped filter against the budgets above, as problems at the expression's
 * root (the total is what is over, not one condition). Text-search operators weigh their full weight only on text
 * fields; on a multiSelect `contains` is an array membership test and weighs 1.
 */
export function filterBudgetProblems(expression: FilterExpression, fields: readonly FieldDefinition[]): FieldProblem[] {
  let cost = 0;
  let values = 0;
  for (const leaf of leavesOf(expression)) {
    const field = resolveField(fields, leaf.field);
    cost += field && familyOf(field) === 'array' ? 1 : FILTER_OP_WEIGHTS[leaf.op];
    values += boundValuesOf(leaf);
  }
  const problems: FieldProblem[] = [];
  if (cost > FILTER_COST_BUDGET) {
    problems.push({
      path: [],
      message:
        `costs ${cost}, over the budget of ${FILTER_COST_BUDGET} per filter (each condition weighs 1; prefix 5, ` +
        'contains 10, iContains 20 on text; pathExists, pathEq and jsonContains 10): use fewer text-search conditions',
    });
  }
  if (values > MAX_FILTER_VALUES) {
    problems.push({
      path: [],
      message: `binds ${values} values, over the limit of ${MAX_FILTER_VALUES} per filter (in lists, between pairs and JSON paths count each item)`,
    });
  }
  return problems;
}

function* leavesOf(expression: FilterExpression): Generator<FilterLeaf> {
  if ('and' in expression) for (const item of expression.and) yield* leavesOf(item);
  else if ('or' in expression) for (const item of expression.or) yield* leavesOf(item);
  else yield expression;
}

/**
 * Text ordering follows the collation and lower() the locale's case rules. PostgreSQL labels both IMMUTABLE, but
 * a glibc or ICU upgrade can change their answers, and a unique index whose predicate changes meaning silently
 * stops enforcing (or wrongly enforces) the rule. Everything else compiles to byte- or value-exact operators.
 */
const COLLATION_DEPENDENT: readonly FilterOp[] = ['lt', 'lte', 'gt', 'gte', 'between', 'iContains'];

/**
 * For partial unique indexes: true when the filter is valid and every operator compiles to IMMUTABLE SQL whose
 * meaning cannot drift. Index predicates take no parameters, so compile them with a `bind` that renders literals.
 */
export function isIndexable(expression: FilterExpression, fields: readonly FieldDefinition[]): boolean {
  if (checkFilter(expression, fields).length > 0) return false;
  return [...leavesOf(expression)].every((leaf) => {
    const field = resolveField(fields, leaf.field);
    return field !== undefined && !(familyOf(field) === 'string' && COLLATION_DEPENDENT.includes(leaf.op));
  });
}

/** The fields a filter names (by name or id), each once, in the order they first appear. */
export function filterFieldsOf(expression: FilterExpression, fields: readonly FieldDefinition[]): FieldDefinition[] {
  const found = new Map<string, FieldDefinition>();
  for (const leaf of leavesOf(expression)) {
    const field = resolveField(fields, leaf.field);
    if (field) found.set(field.id, field);
  }
  return [...found.values()];
}
