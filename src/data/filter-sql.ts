import { typeSpecOf, type FieldDefinition } from './field-types.ts';
import { checkFilter, familyOf } from './filter-check.ts';
import {
  leavesOf,
  resolveField,
  type FilterExpression,
  type FilterLeaf,
  type FilterOp,
  type PathKey,
} from './filter.ts';
import { columnOf } from './identifiers.ts';

/**
 * A checked filter compiled to a SQL boolean expression (values only through `bind`, columns only through
 * `columnOf`), and whether a filter may serve as a partial index's predicate (`isIndexable`).
 */

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
