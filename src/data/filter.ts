import { z } from 'zod';
import type { FieldProblem } from '../kernel/errors.ts';
import type { FieldDefinition } from './field-types.ts';

/**
 * The filter language of saved views and conditional unique rules (spec 2.3, 2.4): its vocabulary, its shape as zod
 * schemas (structure and the limits of spec §8, checked without recursion), and the field references it names.
 * Beside it: the check against a table's fields (filter-check.ts), the compiler to SQL (filter-sql.ts) and the cost
 * budget (filter-budget.ts).
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

export type PathKey = string | number;

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

export const isRecord = (value: unknown): value is Record<string, unknown> =>
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

/** Every condition of a filter, in document order. */
export function* leavesOf(expression: FilterExpression): Generator<FilterLeaf> {
  if ('and' in expression) for (const item of expression.and) yield* leavesOf(item);
  else if ('or' in expression) for (const item of expression.or) yield* leavesOf(item);
  else yield expression;
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
