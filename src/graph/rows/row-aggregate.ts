import { createHash } from 'node:crypto';
import { z } from 'zod';
import {
  aggregateFieldProblem,
  aggregateRows,
  aggregateValueOf,
  groupFieldProblem,
  groupValueOf,
  MAX_GROUPS,
  resultFamily,
  type AggregateSpec,
  type GroupKey,
  type GroupOrder,
  type HavingExpression,
} from '../../data/aggregate.ts';
import { valueSchemaOf } from '../../data/field-types.ts';
import { resolveField } from '../../data/filter.ts';
import { DomainError, validationFailed, type FieldProblem } from '../../kernel/errors.ts';
import type { TableSchema } from '../../catalog/table-schema.ts';
import {
  AggregateRowsBody,
  DEFAULT_AGGREGATE_LIMIT,
  type AggregateItem,
  type AggregateOrderItem,
  type GroupByItem,
  type HavingInput,
} from '../../contracts/rows-aggregate.ts';
import { builder } from '../server/builder.ts';
import { heavyRead } from '../server/query-limits.ts';
import { dataPlane, type Context } from '../server/context.ts';
import { cursorKey, decodeCursor, encodeCursor } from '../../catalog/cursor.ts';
import { canonicalJson } from '../../idempotency/key.ts';
import { viewLens } from '../views/views.ts';
import { addressOf, tableAddressArgs } from '../tables/address.ts';
import { checkedWhere, rowSelection } from './row-filter.ts';
import { currentSchema } from '../tables/schema-endpoint.ts';

/**
 * Aggregates (issue 28): `aggregateRows` (POST …/rows/aggregate) and the `Table.aggregate` edge. The rows are those
 * GET …/rows would read (filter, view, search, budgets); the functions' type rules and their SQL are
 * src/data/aggregate.ts'; here the request is checked against the schema, every problem named by its path
 * (`aggregates.2.fieldId`), and groups are paged with an offset cursor bound to the query.
 */
export type AggregateGroupShape = { group: Record<string, unknown>; values: Record<string, unknown> };
export type AggregatePageShape = { data: AggregateGroupShape[]; nextCursor: string | null; hasMore: boolean };

interface CheckedAggregate {
  groups: GroupKey[];
  specs: AggregateSpec[];
  names: string[];
  having: HavingExpression | null;
  orderBy: GroupOrder[];
}

function groupKeysOf(schema: TableSchema, items: readonly GroupByItem[], problems: FieldProblem[]): GroupKey[] {
  const keys: GroupKey[] = [];
  items.forEach((item, index) => {
    const { fieldId, granularity = null, timeZone = 'UTC' } = typeof item === 'string' ? { fieldId: item } : item;
    const path = typeof item === 'string' ? ['groupBy', index] : ['groupBy', index, 'fieldId'];
    const field = resolveField(schema.fields, fieldId);
    if (!field)
      return void problems.push({
        path,
        message: `must be the id or name of a field of this table; ${JSON.stringify(fieldId)} is neither`,
      });
    const problem = groupFieldProblem(field, granularity);
    if (problem) return void problems.push({ path, message: problem, fieldId: field.id });
    if (keys.some((key) => key.field.id === field.id))
      return void problems.push({ path, message: 'must not group by a field twice', fieldId: field.id });
    keys.push({ field, granularity, timeZone });
  });
  return keys;
}

function specsOf(schema: TableSchema, items: readonly AggregateItem[], problems: FieldProblem[]): AggregateSpec[] {
  const seen = new Set<string>();
  return items.map((item, index) => {
    const field = item.fieldId === undefined ? null : (resolveField(schema.fields, item.fieldId) ?? null);
    if (item.fieldId !== undefined && !field) {
      problems.push({
        path: ['aggregates', index, 'fieldId'],
        message: `must be the id or name of a field of this table; ${JSON.stringify(item.fieldId)} is neither`,
      });
    } else {
      const problem = aggregateFieldProblem(item.fn, field);
      if (problem)
        problems.push({
          path: ['aggregates', index, 'fieldId'],
          message: problem,
          ...(field ? { fieldId: field.id } : {}),
        });
    }
    if (item.fn === 'percentile' && item.fraction === undefined)
      problems.push({ path: ['aggregates', index, 'fraction'], message: 'is required for percentile (0..1)' });
    if (item.fn !== 'percentile' && item.fraction !== undefined)
      problems.push({
        path: ['aggregates', index, 'fraction'],
        message: 'must be absent: only percentile takes a fraction',
      });
    if (seen.has(item.as))
      problems.push({ path: ['aggregates', index, 'as'], message: 'must not repeat another aggregate’s name' });
    seen.add(item.as);
    return { fn: item.fn, field, fraction: item.fraction ?? null };
  });
}

/** The problem with a having operand compared with an aggregate's result (null when it fits). */
function operandProblem(spec: AggregateSpec, value: unknown): string | null {
  const family = resultFamily(spec);
  if (family === 'number')
    return typeof value === 'number' && Number.isFinite(value) ? null : 'must be a finite number';
  if (family === 'date' || family === 'datetime')
    return valueSchemaOf(spec.field!).safeParse(value).success ? null : `must be a ${spec.field!.type} value`;
  return typeof value === 'string' ? null : 'must be a string';
}

function havingOf(
  input: HavingInput,
  names: readonly string[],
  specs: readonly AggregateSpec[],
  path: (string | number)[],
  problems: FieldProblem[],
): HavingExpression {
  if ('and' in input)
    return { and: input.and.map((item, index) => havingOf(item, names, specs, [...path, 'and', index], problems)) };
  if ('or' in input)
    return { or: input.or.map((item, index) => havingOf(item, names, specs, [...path, 'or', index], problems)) };
  const aggregate = names.indexOf(input.aggregate);
  if (aggregate < 0) {
    problems.push({
      path: [...path, 'aggregate'],
      message: `must be the \`as\` of one of the aggregates; ${JSON.stringify(input.aggregate)} is not`,
    });
    return { aggregate: 0, op: input.op, value: null };
  }
  const takesValue = input.op !== 'isNull' && input.op !== 'isNotNull';
  if (!takesValue && input.value !== undefined)
    problems.push({ path: [...path, 'value'], message: `must be absent: ${input.op} takes no value` });
  if (takesValue) {
    const problem =
      input.value === undefined ? `is required for ${input.op}` : operandProblem(specs[aggregate]!, input.value);
    if (problem) problems.push({ path: [...path, 'value'], message: problem });
  }
  return { aggregate, op: input.op, value: input.value ?? null };
}

function orderOf(
  schema: TableSchema,
  items: readonly AggregateOrderItem[],
  groups: readonly GroupKey[],
  names: readonly string[],
  problems: FieldProblem[],
): GroupOrder[] {
  return items.flatMap((item, index): GroupOrder[] => {
    if ('fieldId' in item) {
      const field = resolveField(schema.fields, item.fieldId);
      const group = groups.findIndex((key) => key.field.id === field?.id);
      if (group < 0)
        return (
          problems.push({ path: ['orderBy', index, 'fieldId'], message: 'must be a field the request groups by' }), []
        );
      return [{ group, direction: item.direction }];
    }
    const aggregate = names.indexOf(item.aggregate);
    if (aggregate < 0)
      return (
        problems.push({ path: ['orderBy', index, 'aggregate'], message: 'must be the `as` of one of the aggregates' }),
        []
      );
    return [{ aggregate, direction: item.direction }];
  });
}

function checkAggregate(schema: TableSchema, body: AggregateRowsBody): CheckedAggregate {
  const problems: FieldProblem[] = [];
  const groups = groupKeysOf(schema, body.groupBy ?? [], problems);
  const specs = specsOf(schema, body.aggregates, problems);
  const names = body.aggregates.map((item) => item.as);
  const having = body.having ? havingOf(body.having, names, specs, ['having'], problems) : null;
  const orderBy = orderOf(schema, body.orderBy ?? [], groups, names, problems);
  if (problems.length > 0) throw validationFailed(problems, 'The aggregates do not fit the table schema.');
  return { groups, specs, names, having, orderBy };
}

const AggregatePosition = z.strictObject({ offset: z.int().min(0) });

/** A cursor belongs to one table, schema version, view version and query (everything but the cursor itself). */
function aggregateScope(schema: TableSchema, body: AggregateRowsBody, viewTag: string): string {
  const { cursor: _cursor, ...query } = body;
  const digest = createHash('sha256').update(canonicalJson(query)).digest('base64url');
  return `aggregate:${schema.tableId}:${schema.schemaVersion}:${viewTag}:${digest}`;
}

type AggregateRecord = { groups: number; found: boolean | null } & Record<`g${number}` | `a${number}`, string | null>;

function tooManyGroups(): DomainError {
  return new DomainError(
    'PAYLOAD_TOO_LARGE',
    `The request makes more than ${MAX_GROUPS} groups; group by fewer or coarser fields, or filter the rows first.`,
    {
      details: { limit: MAX_GROUPS },
    },
  );
}

/** A time zone the runtime knows but PostgreSQL does not (their tz databases can differ): the request's problem. */
function unknownZone(error: unknown, groups: readonly GroupKey[]): DomainError | null {
  const record = error as { code?: unknown; message?: unknown } | null;
  if (record?.code !== '22023' || !String(record.message).includes('time zone')) return null;
  const index = groups.findIndex((key) => key.field.type === 'datetime');
  return validationFailed([
    { path: ['groupBy', Math.max(index, 0), 'timeZone'], message: 'is not a time zone this database knows' },
  ]);
}

/** One page of groups of the table's rows (see the file's comment). */
export async function aggregateTable(
  context: Context,
  schema: TableSchema,
  body: AggregateRowsBody,
): Promise<AggregatePageShape> {
  const lens = body.viewId ? await viewLens(context, schema, body.viewId) : null;
  const where = checkedWhere(schema, lens, body.where);
  const checked = checkAggregate(schema, body);
  const limit = body.limit ?? DEFAULT_AGGREGATE_LIMIT;
  const key = await cursorKey(context.prisma);
  const scope = aggregateScope(schema, body, lens?.tag ?? '');
  const offset = body.cursor ? decodeCursor(key, scope, body.cursor, AggregatePosition).offset : 0;
  const { filter } = rowSelection(schema, where, body.search);
  const statement = aggregateRows(schema, {
    filter,
    groups: checked.groups,
    aggregates: checked.specs,
    having: checked.having,
    orderBy: checked.orderBy,
    limit,
    offset,
  });
  const records = await dataPlane(context)
    .query<AggregateRecord>(statement.sql, statement.params)
    .catch((error: unknown) => {
      throw unknownZone(error, checked.groups) ?? error;
    });
  if ((records[0]?.groups ?? 0) > MAX_GROUPS) throw tooManyGroups();
  const found = records.filter((record) => record.found);
  const hasMore = found.length > limit;
  const data = found.slice(0, limit).map((record) => ({
    group: Object.fromEntries(
      checked.groups.map((group, index) => [group.field.id, groupValueOf(group, record[`g${index}`] ?? null)]),
    ),
    values: Object.fromEntries(
      checked.specs.map((spec, index) => [checked.names[index]!, aggregateValueOf(spec, record[`a${index}`] ?? null)]),
    ),
  }));
  return { data, nextCursor: hasMore ? encodeCursor(key, scope, { offset: offset + limit }) : null, hasMore };
}

const AggregateGroup = builder.objectRef<AggregateGroupShape>('AggregateGroup').implement({
  description:
    'One group: `group` holds each grouped field’s value by field id (empty without groupBy), `values` each aggregate ' +
    'by its `as`. Exact sums, min and max of numbers beyond a double’s precision are decimal strings.',
  fields: (t) => ({
    group: t.field({ type: 'JSON', resolve: (group) => group.group }),
    values: t.field({ type: 'JSON', resolve: (group) => group.values }),
  }),
});

export const AggregatePage = builder.objectRef<AggregatePageShape>('AggregatePage').implement({
  description: 'A page of groups in the requested order (then by group keys).',
  fields: (t) => ({
    data: t.field({ type: [AggregateGroup], resolve: (page) => page.data }),
    nextCursor: t.string({ nullable: true, resolve: (page) => page.nextCursor }),
    hasMore: t.boolean({ resolve: (page) => page.hasMore }),
  }),
});

export const AggregateRowsInput = builder
  .inputType('AggregateRowsInput', {
    description:
      'As the body of POST …/rows/aggregate: groupBy (≤ 3), aggregates (1..20: count, countDistinct, countEmpty, countNotEmpty, ' +
      'sum, avg, min, max, percentile), having, orderBy, limit (1..1000) and cursor.',
    fields: (t) => ({
      viewId: t.id(),
      where: t.field({ type: 'JSON' }),
      search: t.string(),
      groupBy: t.field({ type: ['JSON'] }),
      aggregates: t.field({ type: ['JSON'], required: true }),
      having: t.field({ type: 'JSON' }),
      orderBy: t.field({ type: ['JSON'] }),
      limit: t.int(),
      cursor: t.string(),
    }),
  })
  .validate(AggregateRowsBody);

builder.queryFields((t) => ({
  aggregateRows: t.field({
    type: AggregatePage,
    description: 'Counts, sums and other aggregates of the rows GET …/rows would read, optionally grouped (issue 28).',
    args: { ...tableAddressArgs, input: t.arg({ type: AggregateRowsInput, required: true }) },
    extensions: heavyRead(),
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    resolve: async (_root, { input, ...args }, context) =>
      aggregateTable(context, await currentSchema(context, addressOf(args)), input),
  }),
}));
