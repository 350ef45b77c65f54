import { createHash } from 'node:crypto';
import { z } from 'zod';
import { FilterExpression, OrderBy, resolveField, type OrderByItem } from '../../data/filter.ts';
import { filterBudgetProblems } from '../../data/filter-budget.ts';
import { checkFilter, checkOrderBy } from '../../data/filter-check.ts';
import { countRows } from '../../data/aggregate.ts';
import type { Position, SortKey } from '../../data/keyset.ts';
import {
  selectHistoryPage,
  selectRowPage,
  selectRow,
  selectSortValues,
  type HistoryRecord,
  type PageGuard,
  type RowRecord,
  rowRead,
  type RowJsonRecord,
  type RowRead,
} from '../../data/rows.ts';
import { signatureOf } from '../../data/sort-indexes.ts';
import type { Statement } from '../../data/statement.ts';
import { DomainError, notFound, validationFailed, type FieldProblem } from '../../kernel/errors.ts';
import { builder } from '../server/builder.ts';
import { heavyRead } from '../server/query-limits.ts';
import { viewLens, type ViewLens } from '../views/views.ts';
import { Id, VersionString, type Json } from '../../kernel/formats.ts';
import { dataPlane, type Context } from '../server/context.ts';
import { Cursor, cursorKey, decodeCursor, DEFAULT_PAGE_SIZE, encodeCursor, PageLimit } from '../../catalog/cursor.ts';
import { canonicalJson } from '../../idempotency/key.ts';
import { pageOf, pageRef, type PageArgs, type PageShape } from '../shared/pages.ts';
import type { TableAddress, TableSchema } from '../../catalog/table-schema.ts';
import { addressOf, tableAddressArgs } from '../tables/address.ts';
import { rowFromTable } from './row-origin.ts';
import { rowSelection } from './row-filter.ts';
import { SearchText } from '../../contracts/rows-search.ts';
import { Row } from './rows.ts';
import { currentSchema } from '../tables/schema-endpoint.ts';

/** Reading rows page by page (filter language of spec 2.4, keyset cursors) and a row's cell history. */
export type HistoryEntryShape = {
  rowId: string;
  fieldId: string;
  version: string;
  operation: string;
  value: Json;
  mutationId: string;
  actor: { id: string; kind: string; name: string };
  changedAt: string;
};

export const RowPage = pageRef('RowPage', Row, 'A page of rows in the requested order (row id breaks ties).');
builder.objectFields(RowPage, (t) => ({
  total: t.int({
    nullable: true,
    description:
      'With `includeTotal`, on the first page: how many rows match (the filter, view and search). Null otherwise.',
    resolve: (page) => (page as RowPageShape).total ?? null,
  }),
}));

const HistoryActor = builder.objectRef<HistoryEntryShape['actor']>('HistoryActor').implement({
  fields: (t) => ({ id: t.exposeID('id'), kind: t.exposeString('kind'), name: t.exposeString('name') }),
});

const HistoryEntry = builder.objectRef<HistoryEntryShape>('CellHistoryEntry').implement({
  description:
    'One cell at one row version: `operation` is create, update, delete (a deleted row’s cells read null) or restore.',
  fields: (t) => ({
    rowId: t.exposeID('rowId'),
    fieldId: t.exposeID('fieldId'),
    version: t.exposeString('version'),
    operation: t.exposeString('operation'),
    value: t.field({ type: 'JSON', nullable: true, resolve: (entry) => entry.value }),
    mutationId: t.exposeID('mutationId'),
    actor: t.field({ type: HistoryActor, resolve: (entry) => entry.actor }),
    changedAt: t.field({ type: 'Timestamp', resolve: (entry) => entry.changedAt }),
  }),
});
export const HistoryPage = pageRef('CellHistoryPage', HistoryEntry, 'Cell history of a row, newest version first.');

export const RowOrderInput = builder.inputType('RowOrderInput', {
  fields: (t) => ({ field: t.string({ required: true }), direction: t.string({ required: true }) }),
});

/**
 * Where a page ended: the last row's sort values and id. Values too long for a URL (ordering by a long text) are
 * left out (`values: null`) and read again from that row when the next page is asked for.
 */
const RowPosition = z.strictObject({ values: z.array(z.string().nullable()).nullable(), rowId: Id });
const MAX_INLINE_SORT_VALUES = 512; // characters of JSON; keeps cursors well under the 1024-character limit

function positionAfter(keys: readonly SortKey[], last: RowPageRecord): z.infer<typeof RowPosition> {
  const values = keys.map((_key, index) => last[`k${index}`] ?? null);
  return { values: JSON.stringify(values).length <= MAX_INLINE_SORT_VALUES ? values : null, rowId: last.id };
}

/** The sort values a cursor left out, read from its row; a row deleted since then leaves nothing to resume from. */
async function resolvePosition(
  context: Context,
  schema: TableSchema,
  keys: readonly SortKey[],
  position: z.infer<typeof RowPosition>,
): Promise<Position> {
  if (position.values) return { values: position.values, rowId: position.rowId };
  const [row] = await run<Record<string, string | null>>(context, selectSortValues(schema, keys, position.rowId));
  if (!row)
    throw new DomainError('CURSOR_INVALID', 'The row this page ended on was deleted; start again without the cursor.');
  return { values: keys.map((_key, index) => row[`k${index}`] ?? null), rowId: position.rowId };
}
const HistoryPosition = z.strictObject({ version: VersionString, fieldId: Id });

function prefixed(problems: FieldProblem[], prefix: string): FieldProblem[] {
  return problems.map((problem) => ({ ...problem, path: [prefix, ...problem.path] }));
}

function parsed<T>(schema: z.ZodType<T>, value: unknown, name: string): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw validationFailed(
    result.error.issues.map((issue) => ({
      path: [name, ...issue.path.map((key) => (typeof key === 'number' ? key : String(key)))],
      message: issue.message,
    })),
  );
}

export interface RowQuery {
  where: FilterExpression | null;
  orderBy: OrderByItem[];
}

/** Whether a ready sort index serves this order exactly (its keys, directions, then id). */
function hasReadyIndex(schema: TableSchema, keys: readonly SortKey[]): boolean {
  if (keys.length === 0) return false;
  const signature = signatureOf(keys.map((key) => ({ fieldId: key.field.id, direction: key.direction })));
  return schema.indexes.some(
    (index) => index.method === 'btree' && index.state === 'ready' && signatureOf(index.keys) === signature,
  );
}

function sortKeysOf(schema: TableSchema, orderBy: readonly OrderByItem[]): SortKey[] {
  return orderBy.map((item) => ({ field: resolveField(schema.fields, item.field)!, direction: item.direction }));
}

/** The cursor belongs to one table, schema version, filter and order: anything else makes it CURSOR_INVALID. */
function rowCursorScope(schema: TableSchema, query: RowQuery): string {
  const digest = createHash('sha256').update(canonicalJson(query)).digest('base64url');
  return `rows:${schema.tableId}:${schema.schemaVersion}:${digest}`;
}

export function checkRowQuery(schema: TableSchema, where: unknown, orderBy: unknown): RowQuery {
  const query: RowQuery = {
    where: where === null || where === undefined ? null : parsed(FilterExpression, where, 'where'),
    orderBy: orderBy === null || orderBy === undefined ? [] : parsed(OrderBy, orderBy, 'orderBy'),
  };
  const problems = [
    ...(query.where ? prefixed(checkFilter(query.where, schema.fields), 'where') : []),
    ...prefixed(checkOrderBy(query.orderBy, schema.fields), 'orderBy'),
  ];
  if (problems.length) throw validationFailed(problems, 'The filter or order does not fit the table schema.');
  return query;
}

async function run<T>(context: Context, statement: Statement): Promise<T[]> {
  return dataPlane(context).query<T>(statement.sql, statement.params);
}

/** The view's filter and the request's together; the request's order wins, else the view's. */
export function throughView(lens: ViewLens, asked: RowQuery): RowQuery {
  const filters = [lens.where, asked.where].filter((where): where is FilterExpression => where !== null);
  return {
    where: filters.length === 0 ? null : filters.length === 1 ? filters[0]! : { and: filters },
    orderBy: asked.orderBy.length > 0 ? asked.orderBy : lens.orderBy,
  };
}

/** A page row: the row as PostgreSQL built it (hidden fields left out, `rowJsonColumns`) and its sort keys. */
type RowPageRecord = RowJsonRecord & Record<`k${number}`, string | null>;

export interface RowPageArgs extends PageArgs {
  viewId?: string | number | null;
  where?: unknown;
  orderBy?: unknown;
  /** Rows containing every word (issue 28), by relevance unless an order is given. */
  search?: string | null;
  /** Count the matches on the first page (`total`). */
  includeTotal?: boolean | null;
}

/** A row page, with the count of all its matches when the first page asked for it. */
export type RowPageShape = PageShape<RowRead> & { total?: number | null };

/**
 * The table's schema as this server last read it, when it still claims this address, and the guard a statement
 * built from it carries (see `PageGuard`): a hint that PostgreSQL checks, never an answer on its own.
 */
export function cachedTable(context: Context, address: TableAddress): { schema: TableSchema; guard: PageGuard } | null {
  const schema = context.schemas.peek(address.tableId);
  if (!schema || schema.orgId !== address.orgId || schema.databaseId !== address.databaseId) return null;
  const guard = {
    orgId: schema.orgId,
    databaseId: schema.databaseId,
    tableId: schema.tableId,
    schemaVersion: schema.schemaVersion,
    view: null,
  };
  return { schema, guard };
}

/**
 * The table's schema and the view's lens as this server last read them, when both still claim to be current for
 * this address. Only a hint: the page built from them carries a guard that PostgreSQL checks (see `PageGuard`).
 */
function cachedDefinitions(
  context: Context,
  address: TableAddress,
  viewId: string | null,
): { schema: TableSchema; lens: ViewLens | null; guard: PageGuard } | null {
  const table = cachedTable(context, address);
  if (!table) return null;
  const { schema } = table;
  const cached = viewId ? context.views.get(viewId) : null;
  if (
    viewId &&
    (!cached ||
      cached.tableId !== schema.tableId ||
      cached.orgId !== schema.orgId ||
      cached.schemaVersion !== schema.schemaVersion)
  )
    return null;
  const view = cached ? { id: cached.viewId, version: cached.version, userId: context.caller?.userId ?? null } : null;
  return { schema, lens: cached?.lens ?? null, guard: { ...table.guard, view } };
}

/**
 * One page of a table's rows: the `rows` query (and so GET …/rows and POST …/rows/query) and the `Table.rows`
 * edge. Filter language, validation, budget, view semantics and cursors are these, whichever way it is reached.
 */
export async function readRowPage(context: Context, schema: TableSchema, args: RowPageArgs): Promise<RowPageShape> {
  const lens = args.viewId ? await viewLens(context, schema, String(args.viewId)) : null;
  return (await readPageThrough(context, args, schema, lens, null))!;
}

/** One page of rows; null when a guarded page came back empty (the definitions it trusted may be stale). */
async function readPageThrough(
  context: Context,
  args: RowPageArgs,
  schema: TableSchema,
  lens: ViewLens | null,
  guard: PageGuard | null,
): Promise<RowPageShape | null> {
  const asked = checkRowQuery(schema, args.where, args.orderBy);
  const query = lens ? throughView(lens, asked) : asked;
  // The view's filter and the request's run together, so they share one budget.
  const overBudget = query.where ? filterBudgetProblems(query.where, schema.fields) : [];
  if (overBudget.length)
    throw validationFailed(prefixed(overBudget, 'where'), 'The filter is over its cost budget; simplify it.');
  const keys = sortKeysOf(schema, query.orderBy);
  const limit = args.limit ?? DEFAULT_PAGE_SIZE;
  const key = await cursorKey(context.prisma);
  const search = args.search ?? null;
  const scope = `${rowCursorScope(schema, query)}:${lens?.tag ?? ''}${search === null ? '' : `:${createHash('sha256').update(search).digest('base64url')}`}`;
  const after = args.cursor
    ? await resolvePosition(context, schema, keys, decodeCursor(key, scope, args.cursor, RowPosition))
    : null;
  const { filter, rank } = rowSelection(schema, query.where, search);
  const shown = lens ? schema.fields.filter((field) => !lens.hidden.has(field.id)) : schema.fields;
  const statement = selectRowPage(schema, {
    guard,
    filter,
    keys,
    after,
    limit,
    indexed: hasReadyIndex(schema, keys),
    json: shown,
    rank,
  });
  const records = await run<RowPageRecord>(context, statement);
  if (guard && records.length === 0) return null;
  // A page by relevance carries its rank as its one sort value (`k0`).
  const cursorKeys = rank && keys.length === 0 ? [null] : keys;
  const page: RowPageShape = pageOf(
    records,
    limit,
    (record) => rowFromTable(schema, rowRead(record)),
    (last) => encodeCursor(key, scope, positionAfter(cursorKeys as readonly SortKey[], last)),
  );
  if (args.includeTotal && !args.cursor) {
    const [counted] = await run<{ total: string }>(context, countRows(schema, filter));
    page.total = Number(counted!.total);
  }
  return page;
}

/** A row's cell history, newest first: the `rowHistory` query and the `Row.history` edge. */
export async function readHistoryPage(
  context: Context,
  schema: TableSchema,
  rowId: string,
  page: PageArgs,
): Promise<PageShape<HistoryEntryShape>> {
  const limit = page.limit ?? DEFAULT_PAGE_SIZE;
  const key = await cursorKey(context.prisma);
  const scope = `history:${schema.tableId}:${rowId}`;
  const after = page.cursor ? decodeCursor(key, scope, page.cursor, HistoryPosition) : null;
  const records = await run<HistoryRecord>(context, selectHistoryPage(schema, rowId, after, limit));
  if (records.length === 0 && !after) {
    // No history and no row: the row never existed here.
    const [row] = await run<RowRecord>(context, selectRow(schema, rowId));
    if (!row) throw notFound('row');
  }
  return pageOf(
    records,
    limit,
    (record): HistoryEntryShape => ({
      rowId,
      fieldId: record.field_id,
      version: record.version,
      operation: record.operation,
      value: JSON.parse(record.value) as Json,
      mutationId: record.mutation_id,
      actor: { id: record.actor_id, kind: record.actor_kind, name: record.actor_name },
      changedAt: record.changed_at,
    }),
    (last) => encodeCursor(key, scope, { version: last.version, fieldId: last.field_id }),
  );
}
builder.queryFields((t) => ({
  rows: t.field({
    type: RowPage,
    description: 'Rows matching `where` (spec 2.4) in `orderBy` order, row id last; `limit` 1..100 (default 50).',
    args: {
      ...tableAddressArgs,
      viewId: t.arg.id({
        validate: Id.optional(),
        description:
          'Read through this saved view: its filter (and `where`), its order unless `orderBy` is given, without its hidden columns.',
      }),
      where: t.arg({ type: 'JSON' }),
      orderBy: t.arg({ type: [RowOrderInput] }),
      limit: t.arg.int({ validate: PageLimit.optional() }),
      cursor: t.arg.string({ validate: Cursor.optional() }),
      search: t.arg.string({ validate: SearchText.optional(), description: SearchText.description }),
      includeTotal: t.arg.boolean({
        description:
          'Answer `total`, the exact count of the matches, on the first page (a full count: its cost grows with the matches).',
      }),
    },
    // A search or a full count reads every candidate row, however small the page.
    extensions: heavyRead(['search', 'includeTotal']),
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    resolve: async (_root, args, context) => {
      const address = addressOf(args);
      const viewId = args.viewId ? String(args.viewId) : null;
      // The table head and view look-ups were each a round trip before the page's (4 in all with the credential's):
      // from cached definitions they ride in the page's statement as its guard. A guarded page that comes back empty,
      // or that the cached definitions refused, is read again the long way: 404, 422 or a fresh page, as before.
      const cached = cachedDefinitions(context, address, viewId);
      const fast = cached
        ? await readPageThrough(context, args, cached.schema, cached.lens, cached.guard).catch((error: unknown) => {
            if (error instanceof DomainError) return null;
            throw error;
          })
        : null;
      if (fast) return fast;
      return readRowPage(context, await currentSchema(context, address), args);
    },
  }),
  rowHistory: t.field({
    type: HistoryPage,
    description: 'The cell history of a row, newest version first; kept after the row is deleted.',
    args: {
      ...tableAddressArgs,
      rowId: t.arg.id({ required: true, validate: Id }),
      limit: t.arg.int({ validate: PageLimit.optional() }),
      cursor: t.arg.string({ validate: Cursor.optional() }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'history:read' }),
    resolve: async (_root, args, context) =>
      readHistoryPage(context, await currentSchema(context, addressOf(args)), String(args.rowId), args),
  }),
}));
