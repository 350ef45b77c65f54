import { typeSpecOf, type FieldDefinition, type FieldType, type ValueFamily } from './field-types.ts';
import { columnOf, rowsTableOf } from './identifiers.ts';
import type { PhysicalTable } from './rows.ts';
import { Params, type Statement } from './statement.ts';

/**
 * Aggregates over a table's rows (issue 28): groups by up to three fields, up to twenty functions, a `having` over
 * their values and an order over either, one page of groups at a time. The statement is built from field ids and
 * bound values only; which function applies to which type is decided here, beside the SQL it compiles to.
 */
export const AGGREGATE_FUNCTIONS = [
  'count',
  'countDistinct',
  'countEmpty',
  'countNotEmpty',
  'sum',
  'avg',
  'min',
  'max',
  'percentile',
] as const;
export type AggregateFunction = (typeof AGGREGATE_FUNCTIONS)[number];

export const GRANULARITIES = ['day', 'week', 'month', 'quarter', 'year'] as const;
export type Granularity = (typeof GRANULARITIES)[number];

export const HAVING_OPS = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'isNull', 'isNotNull'] as const;
export type HavingOp = (typeof HAVING_OPS)[number];

/** Groups one request may compute; more is refused (413) rather than paged, as no page of them would be useful. */
export const MAX_GROUPS = 10_000;

const NUMERIC: readonly ValueFamily[] = ['number'];
const ORDERED: readonly ValueFamily[] = ['number', 'date', 'datetime', 'string'];

/** The families each function takes a field of; `count` takes none. */
const FUNCTION_FAMILIES: Record<AggregateFunction, readonly ValueFamily[] | null> = {
  count: null,
  countDistinct: ['string', 'number', 'boolean', 'date', 'datetime', 'array', 'json'],
  countEmpty: ['string', 'number', 'boolean', 'date', 'datetime', 'array', 'json'],
  countNotEmpty: ['string', 'number', 'boolean', 'date', 'datetime', 'array', 'json'],
  sum: NUMERIC,
  avg: NUMERIC,
  min: ORDERED,
  max: ORDERED,
  percentile: NUMERIC,
};

/** Group keys: every type but json and longText (a document is not a category; a long text is rarely one). */
const UNGROUPABLE: readonly FieldType[] = ['json', 'longText'];

const familyOf = (field: FieldDefinition): ValueFamily => typeSpecOf(field.type).family;

/** Why `fn` cannot apply to `field` (null when it can): the 422 message of the aggregate's `fieldId`. */
export function aggregateFieldProblem(fn: AggregateFunction, field: FieldDefinition | null): string | null {
  const families = FUNCTION_FAMILIES[fn];
  if (families === null) return field === null ? null : 'must be absent: count counts rows';
  if (field === null) return `is required for ${fn}`;
  if (families.includes(familyOf(field))) return null;
  if (fn === 'sum' || fn === 'avg' || fn === 'percentile')
    return `${fn} applies to integer, number and autoNumber fields, not to a ${field.type} field`;
  return `${fn} applies to numbers, dates, datetimes and text, not to a ${field.type} field`;
}

/** Why `field` cannot be a group key (null when it can), granularity included. */
export function groupFieldProblem(field: FieldDefinition, granularity: Granularity | null): string | null {
  if (UNGROUPABLE.includes(field.type)) return `cannot group by a ${field.type} field`;
  if (granularity !== null && field.type !== 'date' && field.type !== 'datetime')
    return `granularity applies to date and datetime fields, not to a ${field.type} field`;
  return null;
}

export interface GroupKey {
  field: FieldDefinition;
  /** Dates and datetimes: the period a value falls in (`day` when null); null for other types. */
  granularity: Granularity | null;
  /** The time zone a datetime's period is reckoned in (an IANA name). */
  timeZone: string;
}

export interface AggregateSpec {
  fn: AggregateFunction;
  field: FieldDefinition | null;
  /** percentile's fraction, 0..1. */
  fraction: number | null;
}

export type HavingExpression =
  | { aggregate: number; op: HavingOp; value: number | string | null }
  | { and: HavingExpression[] }
  | { or: HavingExpression[] };

export type GroupOrder =
  | { group: number; direction: 'asc' | 'desc' }
  | { aggregate: number; direction: 'asc' | 'desc' };

export interface AggregateQuery {
  /** The rows' filter (a view's and the request's, and a search), with the statement's own parameters. */
  filter: ((params: Params) => string) | null;
  groups: readonly GroupKey[];
  aggregates: readonly AggregateSpec[];
  having: HavingExpression | null;
  orderBy: readonly GroupOrder[];
  limit: number;
  offset: number;
}

/** Whether a value that a function answers is compared and rendered as a number or as its field's type. */
export function resultFamily(spec: AggregateSpec): ValueFamily {
  if (spec.fn === 'min' || spec.fn === 'max') return familyOf(spec.field!);
  return 'number';
}

function emptyCondition(field: FieldDefinition, column: string): string {
  switch (familyOf(field)) {
    case 'array':
      return `coalesce(cardinality(${column}), 0) = 0`;
    case 'string':
      return `coalesce(${column}, '') = ''`;
    default:
      return `${column} IS NULL`;
  }
}

function aggregateSql(spec: AggregateSpec, params: Params): string {
  if (spec.fn === 'count') return 'count(*)';
  const column = `r.${columnOf(spec.field!.id)}`;
  switch (spec.fn) {
    case 'countDistinct':
      return `count(DISTINCT ${column})`;
    case 'countEmpty':
      return `count(*) FILTER (WHERE ${emptyCondition(spec.field!, column)})`;
    case 'countNotEmpty':
      return `count(*) FILTER (WHERE NOT (${emptyCondition(spec.field!, column)}))`;
    // sum of bigint and numeric is numeric: exact, whatever the number of rows.
    case 'sum':
      return `sum(${column})`;
    case 'avg':
      return `avg(${column})`;
    case 'min':
      return `min(${column})`;
    case 'max':
      return `max(${column})`;
    case 'percentile':
      return `percentile_cont(${params.add(spec.fraction, 'float8')}) WITHIN GROUP (ORDER BY ${column})`;
  }
}

/** A group key in its own type (so groups sort as their values do); multiSelect keys come from `m<i>`. */
function groupSql(key: GroupKey, index: number, params: Params): string {
  const column = `r.${columnOf(key.field.id)}`;
  switch (key.field.type) {
    case 'multiSelect':
      return `m${index}.choice`;
    case 'date':
      return key.granularity === null || key.granularity === 'day'
        ? column
        : `date_trunc('${key.granularity}', ${column})::date`;
    case 'datetime':
      return `date_trunc('${key.granularity ?? 'day'}', ${column} AT TIME ZONE ${params.add(key.timeZone, 'text')})::date`;
    default:
      return column;
  }
}

/** A value read back as text: dates as YYYY-MM-DD, timestamps in the spec's UTC form, the rest as PostgreSQL prints. */
function outputSql(form: 'date' | 'timestamp' | 'text', expression: string): string {
  if (form === 'date') return `to_char(${expression}, 'YYYY-MM-DD')`;
  if (form === 'timestamp') return typeSpecOf('datetime').read(expression);
  return `${expression}::text`;
}

/** Date and datetime keys are both periods, answered as their first day. */
const groupForm = (key: GroupKey) => (key.field.type === 'date' || key.field.type === 'datetime' ? 'date' : 'text');

function aggregateForm(spec: AggregateSpec): 'date' | 'timestamp' | 'text' {
  const family = resultFamily(spec);
  return family === 'date' ? 'date' : family === 'datetime' ? 'timestamp' : 'text';
}

const COMPARISONS: Partial<Record<HavingOp, string>> = {
  eq: '=',
  ne: 'IS DISTINCT FROM',
  lt: '<',
  lte: '<=',
  gt: '>',
  gte: '>=',
};

const CASTS: Partial<Record<ValueFamily, string>> = {
  number: 'numeric',
  date: 'date',
  datetime: 'timestamptz',
  string: 'text',
};

function havingSql(expression: HavingExpression, aggregates: readonly AggregateSpec[], params: Params): string {
  if ('and' in expression)
    return `(${expression.and.map((item) => havingSql(item, aggregates, params)).join(' AND ')})`;
  if ('or' in expression) return `(${expression.or.map((item) => havingSql(item, aggregates, params)).join(' OR ')})`;
  const column = `g.a${expression.aggregate}`;
  if (expression.op === 'isNull') return `${column} IS NULL`;
  if (expression.op === 'isNotNull') return `${column} IS NOT NULL`;
  const family = resultFamily(aggregates[expression.aggregate]!);
  return `${column} ${COMPARISONS[expression.op]} ${params.add(String(expression.value), CASTS[family] ?? 'text')}`;
}

const ordering = (direction: 'asc' | 'desc') => (direction === 'asc' ? 'ASC NULLS LAST' : 'DESC NULLS FIRST');

/** The requested order, then every group key not named (ascending), so that pages are stable. */
function orderSql(query: AggregateQuery): string {
  const named = query.orderBy.map((item) =>
    'group' in item
      ? `g.g${item.group} ${ordering(item.direction)}`
      : `g.a${item.aggregate} ${ordering(item.direction)}`,
  );
  const rest = query.groups
    .map((_key, index) => index)
    .filter((index) => !query.orderBy.some((item) => 'group' in item && item.group === index))
    .map((index) => `g.g${index} ASC NULLS LAST`);
  return [...named, ...rest].join(', ');
}

/**
 * One page of groups (`found` marks each; an empty page answers one row without it), and how many groups there
 * are (`groups`, counted up to MAX_GROUPS + 1: the grouped rows are
 * materialised once and cut there, so an answer of 10,001 means "too many"). Each answered row holds `groups`, then
 * `g<i>` (group keys) and `a<i>` (aggregates) as text; without any group there is exactly one row, the totals.
 * A multiSelect key joins each row to its choices (an empty one to a single NULL choice): one group per choice.
 */
export function aggregateRows(table: PhysicalTable, query: AggregateQuery): Statement {
  const params = new Params();
  const keys = query.groups.map((key, index) => `${groupSql(key, index, params)} AS g${index}`);
  const values = query.aggregates.map((spec, index) => `${aggregateSql(spec, params)} AS a${index}`);
  const unnests = query.groups.flatMap((key, index) =>
    key.field.type === 'multiSelect'
      ? [`LEFT JOIN LATERAL unnest(r.${columnOf(key.field.id)}) AS m${index}(choice) ON true`]
      : [],
  );
  const where = query.filter ? `WHERE ${query.filter(params)}` : '';
  const groupBy =
    keys.length > 0 ? `GROUP BY ${keys.map((_key, index) => index + 1).join(', ')} LIMIT ${MAX_GROUPS + 1}` : '';
  const grouped = `SELECT ${[...keys, ...values].join(', ')} FROM ${rowsTableOf(table.databaseId, table.tableId)} r ${unnests.join(' ')} ${where} ${groupBy}`;
  const outputs = [
    ...query.groups.map((key, index) => `${outputSql(groupForm(key), `g.g${index}`)} AS g${index}`),
    ...query.aggregates.map((spec, index) => `${outputSql(aggregateForm(spec), `g.a${index}`)} AS a${index}`),
  ];
  const having = query.having ? `WHERE ${havingSql(query.having, query.aggregates, params)}` : '';
  const order = orderSql(query);
  const page = `SELECT true AS found, ${outputs.join(', ')} FROM g ${having} ${order ? `ORDER BY ${order}` : ''}
     LIMIT ${params.add(query.limit + 1, 'int')} OFFSET ${params.add(query.offset, 'int')}`;
  const sql = `WITH g AS MATERIALIZED (${grouped})
    SELECT c.groups, p.* FROM (SELECT count(*)::int AS groups FROM g) c LEFT JOIN LATERAL (${page}) p ON true`;
  return { sql, params: params.values };
}

/** A row count matching a filter: `includeTotal` of a row page. */
export function countRows(table: PhysicalTable, filter: ((params: Params) => string) | null): Statement {
  const params = new Params();
  const where = filter ? `WHERE ${filter(params)}` : '';
  return {
    sql: `SELECT count(*)::text AS total FROM ${rowsTableOf(table.databaseId, table.tableId)} r ${where}`,
    params: params.values,
  };
}

/**
 * A decimal as JSON: a number when the number's own decimal text is exactly this decimal (so nothing was rounded),
 * else the decimal as a string. PostgreSQL prints numeric sums in full, e.g. `12.50` or `90071992547409930`.
 */
export function exactDecimal(text: string): number | string {
  const canonical = canonicalDecimal(text);
  const value = Number(canonical);
  return Number.isFinite(value) && String(value) === canonical ? value : canonical;
}

function canonicalDecimal(text: string): string {
  let value = text.trim();
  const negative = value.startsWith('-');
  if (negative) value = value.slice(1);
  let [whole = '0', fraction = ''] = value.split('.');
  whole = whole.replace(/^0+(?=\d)/, '');
  fraction = fraction.replace(/0+$/, '');
  const digits = fraction ? `${whole}.${fraction}` : whole;
  return negative && digits !== '0' ? `-${digits}` : digits;
}

/** An aggregate's text as JSON: counts as numbers, sums/min/max exactly, averages and percentiles as doubles. */
export function aggregateValueOf(spec: AggregateSpec, text: string | null): number | string | null {
  if (text === null) return null;
  switch (spec.fn) {
    case 'count':
    case 'countDistinct':
    case 'countEmpty':
    case 'countNotEmpty':
      return Number(text);
    case 'avg':
    case 'percentile':
      return Number(text);
    default:
      return familyOf(spec.field!) === 'number' ? exactDecimal(text) : text;
  }
}

/** A group key's text as JSON: numbers, booleans, dates as YYYY-MM-DD (the period's first day), text as it is. */
export function groupValueOf(key: GroupKey, text: string | null): number | string | boolean | null {
  if (text === null) return null;
  switch (familyOf(key.field)) {
    case 'number':
      return exactDecimal(text);
    case 'boolean':
      return text === 'true';
    default:
      return text;
  }
}
