import { toParam, typeSpecOf, type CellValue, type FieldDefinition } from './field-types.ts';
import { isId } from '../kernel/ids.ts';
import { columnOf, historyTableOf, rowsTableOf, sequenceOf } from './identifiers.ts';
import {
  afterPosition,
  orderByClause,
  orderingOf,
  rangesAfter,
  sortKeyProjection,
  type Position,
  type SortKey,
} from './keyset.ts';
import { ID, jsonObject, Params, plainJsonString, utcTimestamp, type Statement } from './statement.ts';
import { activityInsertSql, type Actor } from './activity.ts';
import { RawJson } from '../kernel/raw-json.ts';
import { visibleViewSql } from './view-visibility.ts';

/**
 * Row SQL. Each mutation is ONE statement of data-modifying CTEs: the capacity/schema guard, the row, its cell
 * history and its activity event travel together, so a row write costs one round trip and either all of it
 * happens or none (DESIGN §2, issue 3). Values are always bound; identifiers come from IDs.
 */
export interface PhysicalTable {
  databaseId: string;
  tableId: string;
  fields: readonly FieldDefinition[];
}

/** Who did it, when, and the ids under which the history entries and the activity event are written. */
export interface RowEvent {
  orgId: string;
  mutationId: string;
  activityId: string;
  summary: string;
  actor: Actor;
  at: string;
}

/** A row as read from SQL: every column already text, parsed by `toRowShape`. */
export interface RowRecord {
  id: string;
  version: string;
  created_at: string;
  updated_at: string;
  [cell: `c${number}`]: string | null;
}

export type RowShape = {
  id: string;
  version: string;
  createdAt: string;
  updatedAt: string;
  values: { [fieldId: string]: CellValue };
};

/** The projection every row read uses: system columns, then each field as text in position order (`c0`, `c1`, …). */
export function rowProjection(fields: readonly FieldDefinition[], alias: string): string {
  const cells = fields.map(
    (field, index) => `${typeSpecOf(field.type).read(`${alias}.${columnOf(field.id)}`)} AS c${index}`,
  );
  return [
    `${alias}.id`,
    `${alias}.version::text AS version`,
    `${utcTimestamp(`${alias}.created_at`)} AS created_at`,
    `${utcTimestamp(`${alias}.updated_at`)} AS updated_at`,
    ...cells,
  ].join(', ');
}

/**
 * A cell as JSON text that parses to exactly what `fromText` makes of its text projection: strings, dates and
 * timestamps through `to_json` (escaping), numbers and booleans as PostgreSQL prints them (valid JSON literals, and
 * `JSON.parse` rounds a long number as `Number` does), arrays and json as the JSON they already are.
 */
function cellJson(field: FieldDefinition, column: string): string {
  const spec = typeSpecOf(field.type);
  switch (spec.family) {
    case 'string':
    case 'date':
    case 'datetime':
      return `to_json(${spec.read(column)})::text`;
    case 'array':
      return spec.read(column);
    default:
      return `${column}::text`;
  }
}

/**
 * Each row in the spec's shape (`RowShape`) as PostgreSQL built it, for reads that answer rows as they are (pages,
 * lookups, similarity): `h`, the version and timestamps as a small JSON text parsed per row, and `v`, the `values`
 * object with `fields` in their order as JSON text, which the answer carries unparsed (`RowRead`,
 * src/kernel/raw-json.ts).
 * Concatenated (`jsonObject`) rather than `json_build_object`, which takes at most 50 pairs.
 */
export function rowJsonColumns(fields: readonly FieldDefinition[], alias: string): string {
  const header = jsonObject([
    ['version', plainJsonString(`${alias}.version::text`)],
    ['createdAt', plainJsonString(utcTimestamp(`${alias}.created_at`))],
    ['updatedAt', plainJsonString(utcTimestamp(`${alias}.updated_at`))],
  ]);
  const values = jsonObject(
    fields.map((field) => [field.id, `coalesce(${cellJson(field, `${alias}.${columnOf(field.id)}`)}, 'null')`]),
  );
  // One expression each: PostgreSQL computes a cheap output column (a lone to_char) for every row before a sort, but
  // postpones an expensive one past the LIMIT, so a sorted page formats 100 rows' timestamps, not every match's.
  return [`${header} AS h`, `${values} AS v`].join(', ');
}

/** The columns `rowJsonColumns` answers, with the row's id. */
export const ROW_JSON_COLUMNS = ['id', 'h', 'v'] as const;

export interface RowJsonRecord {
  id: string;
  /** `{version, createdAt, updatedAt}` as JSON text. */
  h: string;
  v: string;
}

/** A row as read, its `values` the JSON text PostgreSQL built: serialized as it is, never parsed on the way out. */
export type RowRead = Omit<RowShape, 'values'> & { values: RawJson };

/** What the GraphQL `Row` type answers: a row a mutation wrote (objects) or one read (PostgreSQL's JSON). */
export type RowAnswer = RowShape | RowRead;

export function rowRead(record: RowJsonRecord): RowRead {
  const header = JSON.parse(record.h) as Pick<RowShape, 'version' | 'createdAt' | 'updatedAt'>;
  return {
    id: record.id,
    version: header.version,
    createdAt: header.createdAt,
    updatedAt: header.updatedAt,
    values: new RawJson(record.v),
  };
}

/** Cells keyed by field id, every field present (null when empty). */
export function toRowShape(fields: readonly FieldDefinition[], record: RowRecord): RowShape {
  const values: Record<string, CellValue> = {};
  fields.forEach((field, index) => {
    const text = record[`c${index}`];
    values[field.id] = text === null || text === undefined ? null : typeSpecOf(field.type).fromText(text);
  });
  return { id: record.id, version: record.version, createdAt: record.created_at, updatedAt: record.updated_at, values };
}

/** Shared placeholders of a row event, bound once and reused by the history and activity inserts. */
export function bindEvent(params: Params, event: RowEvent) {
  return {
    at: params.add(event.at, 'timestamptz'),
    mutationId: params.add(event.mutationId, 'text'),
    actorId: params.add(event.actor.id, 'text'),
    actorKind: params.add(event.actor.kind, 'text'),
    actorName: params.add(event.actor.name, 'text'),
  };
}
export type BoundEvent = ReturnType<typeof bindEvent>;

export function historyInsert(
  table: PhysicalTable,
  bound: BoundEvent,
  operation: string,
  source: string,
  cells: string,
): string {
  return `INSERT INTO ${historyTableOf(table.databaseId, table.tableId)}
      (row_id, version, field_id, operation, value, mutation_id, actor_id, actor_kind, actor_name, changed_at)
    SELECT s.id, s.version, cell.field_id, '${operation}', cell.value, ${bound.mutationId}, ${bound.actorId}, ${bound.actorKind},
           ${bound.actorName}, ${bound.at}
      FROM ${source} s CROSS JOIN LATERAL (${cells}) AS cell(field_id, value)`;
}

/** One `records.changed` entry per row of `source` (a row write's CTE), in the write's own statement. */
export function activityInsert(
  params: Params,
  table: PhysicalTable,
  event: RowEvent,
  bound: BoundEvent,
  source: string,
): string {
  return activityInsertSql(
    {
      ...rowActivity(params, table, event, bound),
      rowId: 's.id',
      affectedRows: '1',
    },
    `${source} s`,
  );
}

/** The members every row write's `records.changed` entry shares, bound once beside the history's. */
export function rowActivity(params: Params, table: PhysicalTable, event: RowEvent, bound: BoundEvent) {
  return {
    id: params.add(event.activityId, 'text'),
    orgId: params.add(event.orgId, 'text'),
    occurredAt: bound.at,
    category: `'records'`,
    event: `'records.changed'`,
    summary: params.add(event.summary, 'text'),
    actorId: bound.actorId,
    actorKind: bound.actorKind,
    actorKey: params.add(event.actor.key, 'text'),
    actorName: bound.actorName,
    databaseId: params.add(table.databaseId, 'text'),
    tableId: params.add(table.tableId, 'text'),
    mutationId: bound.mutationId,
  };
}

export function cellValueSql(params: Params, field: FieldDefinition, value: CellValue): string {
  return params.add(toParam(field, value), typeSpecOf(field.type).cast);
}

/** What a caller may add to a row insert's statement. */
export interface InsertExtras {
  /** A further condition the insert must meet, evaluated once (the caller's claim on an idempotency key). */
  gate?: (params: Params) => string;
  /** One more CTE that runs for the inserted row (e.g. the idempotency record). */
  also?: (params: Params, source: string) => string;
  /** Counts the row against this limit in the statement itself, instead of in a commit guard (claimRowCapacity). */
  rowLimit?: number;
}

export interface InsertRow {
  rowId: string;
  /** The version the values were checked against; a table at another version inserts nothing. */
  schemaVersion: number;
  /** Every field's canonical value (null when empty), generated ones included (see `allocateGenerated`). */
  values: ReadonlyMap<string, CellValue>;
  event: RowEvent;
}

/**
 * Inserts a row, its initial history (every cell, version 1) and a `records.changed` event, in one statement,
 * provided the table is still at the schema version the values were checked against. Every schema change locks
 * the physical table, and this statement takes its lock before its snapshot, so the check cannot go stale.
 * `extras` add the caller's bookkeeping to the same statement, so that it costs no round trip of its own.
 * Returns the row id, or no row when the schema moved on (or the gate was closed).
 */
export function insertRow(table: PhysicalTable, input: InsertRow, extras: InsertExtras = {}): Statement {
  const { gate, also, rowLimit } = extras;
  const params = new Params();
  const bound = bindEvent(params, input.event);
  const columns = ['id', 'created_at', 'updated_at', ...table.fields.map((field) => columnOf(field.id))];
  const values = [
    params.add(input.rowId, 'text'),
    bound.at,
    bound.at,
    ...table.fields.map((field) => cellValueSql(params, field, input.values.get(field.id) ?? null)),
  ];
  const cells = table.fields.map(
    (field) =>
      `(${params.add(field.id, 'text')}, ${params.add(JSON.stringify(input.values.get(field.id) ?? null), 'jsonb')})`,
  );
  const sql = `WITH inserted AS (
      INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)} (${columns.join(', ')})
      SELECT ${values.join(', ')} WHERE ${schemaGuard(params, table.tableId, input.schemaVersion)}${gate ? ` AND ${gate(params)}` : ''}
      RETURNING id, version
    ), history AS (${historyInsert(table, bound, 'create', 'inserted', `VALUES ${cells.join(', ')}`)}
    ), activity AS (${activityInsert(params, table, input.event, bound, 'inserted')})${also ? `, also AS (${also(params, 'inserted')})` : ''}
    SELECT id${rowLimit === undefined ? '' : `, ${claimRowCapacityCall(table.tableId, rowLimit)} AS claimed`} FROM inserted`;
  return { sql, params: params.values };
}

/**
 * The next value of each generated (autoNumber) field, drawn before the insert so the whole row is known up
 * front. An exhausted sequence raises 2200H (AUTO_INCREMENT_EXHAUSTED); numbers drawn by a failed write are not
 * reused, as with any PostgreSQL sequence.
 */
export function allocateGenerated(table: PhysicalTable): Statement | null {
  const generated = table.fields.filter((field) => typeSpecOf(field.type).generated);
  if (generated.length === 0) return null;
  return {
    sql: `SELECT ${generated.map((field, index) => `nextval('${sequenceOf(table.databaseId, field.id)}')::text AS g${index}`).join(', ')}`,
    params: [],
  };
}

function literalId(id: string): string {
  if (!isId(id)) throw new Error(`Not an id: ${JSON.stringify(id)}`);
  return `'${id}'`;
}

/**
 * The commit guard of a row create: counts the row against the table's limit, or raises SQLSTATE WDS01 (see the
 * row_capacity migration). Parameter-free because it travels with COMMIT in one simple-protocol round trip.
 */
export function claimRowCapacity(tableId: string, rowLimit: number): string {
  return `SELECT ${claimRowCapacityCall(tableId, rowLimit)}`;
}

function claimRowCapacityCall(tableId: string, rowLimit: number): string {
  if (!Number.isSafeInteger(rowLimit)) throw new Error(`Not a row limit: ${rowLimit}`);
  return `public.wds_claim_row(${literalId(tableId)}, ${rowLimit})`;
}

/** The commit guard of a row delete: frees the row's place under the limit. */
export function releaseRowCapacity(tableId: string): string {
  return `UPDATE public.data_tables SET row_count = row_count - 1 WHERE id = ${literalId(tableId)}`;
}

/** Why a guarded write found nothing to do: the current schema version and row count of the table, if it exists. */
export function rowGuardState(tableId: string): Statement {
  return {
    sql: `SELECT schema_version, row_count::text AS row_count, state FROM public.data_tables WHERE id = $1::bpchar`,
    params: [tableId],
  };
}

export interface UpdateRow {
  rowId: string;
  expectedVersion: bigint;
  /** Only the cells the request names; at least one (an empty patch is refused before it gets here). */
  values: ReadonlyMap<string, CellValue>;
  schemaVersion: number;
  event: RowEvent;
}

export function schemaGuard(params: Params, tableId: string, schemaVersion: number): string {
  return `EXISTS (SELECT 1 FROM public.data_tables WHERE id = ${params.add(tableId, ID)} AND state = 'active'
                   AND schema_version = ${params.add(schemaVersion, 'int')})`;
}

/**
 * Updates the named cells when the row is still at `expectedVersion` (the check is on the row being updated, so
 * PostgreSQL re-checks it after waiting for a concurrent writer: no lost updates). History gets an entry only
 * for cells whose value actually changed.
 */
export function updateRow(table: PhysicalTable, input: UpdateRow): Statement {
  const params = new Params();
  const bound = bindEvent(params, input.event);
  const changed = table.fields.filter((field) => input.values.has(field.id));
  const assignments = changed.map(
    (field) => `${columnOf(field.id)} = ${cellValueSql(params, field, input.values.get(field.id)!)}`,
  );
  const previous = changed.map((field, index) => `old.${columnOf(field.id)} AS old_${index}`);
  const cells = changed.map(
    (field, index) =>
      `(${params.add(field.id, 'text')}, ${params.add(JSON.stringify(input.values.get(field.id)), 'jsonb')},
      s.old_${index} IS DISTINCT FROM s.${columnOf(field.id)})`,
  );
  const rows = rowsTableOf(table.databaseId, table.tableId);
  const rowId = params.add(input.rowId, ID);
  const sql = `WITH updated AS (
      UPDATE ${rows} r SET version = r.version + 1, updated_at = ${bound.at}${assignments.map((set) => `, ${set}`).join('')}
        FROM (SELECT * FROM ${rows} WHERE id = ${rowId}) old
       WHERE r.id = old.id AND r.version = ${params.add(input.expectedVersion.toString(), 'bigint')}
         AND ${schemaGuard(params, table.tableId, input.schemaVersion)}
      RETURNING r.*${previous.map((column) => `, ${column}`).join('')}
    ), history AS (${historyInsert(table, bound, 'update', 'updated', `SELECT field_id, value FROM (VALUES ${cells.join(', ')}) AS c(field_id, value, changed) WHERE c.changed`)}
    ), activity AS (${activityInsert(params, table, input.event, bound, 'updated')})
    SELECT ${rowProjection(table.fields, 'updated')} FROM updated`;
  return { sql, params: params.values };
}

export interface DeleteRow {
  rowId: string;
  expectedVersion: bigint;
  schemaVersion: number;
  event: RowEvent;
}

/**
 * Deletes the row at `expectedVersion` and appends a `delete` entry (value null, version + 1) for every cell, so the history of a deleted row stays readable. A row still referenced by a
 * foreign key fails with 23503 (FOREIGN_KEY_CONFLICT).
 */
export function deleteRow(table: PhysicalTable, input: DeleteRow): Statement {
  const params = new Params();
  const bound = bindEvent(params, input.event);
  const cells = table.fields.map((field) => `(${params.add(field.id, 'text')}, 'null'::jsonb)`);
  const sql = `WITH removed AS (
      DELETE FROM ${rowsTableOf(table.databaseId, table.tableId)} r
       WHERE r.id = ${params.add(input.rowId, ID)} AND r.version = ${params.add(input.expectedVersion.toString(), 'bigint')}
         AND ${schemaGuard(params, table.tableId, input.schemaVersion)}
      RETURNING r.id, r.version + 1 AS version
    ), history AS (${historyInsert(table, bound, 'delete', 'removed', `VALUES ${cells.join(', ')}`)}
    ), activity AS (${activityInsert(params, table, input.event, bound, 'removed')})
    SELECT id, version::text AS version FROM removed`;
  return { sql, params: params.values };
}

/** One row by id, or the current version of a row (for conflict details). */
export function selectRow(table: PhysicalTable, rowId: string): Statement {
  return {
    sql: `SELECT ${rowProjection(table.fields, 'r')} FROM ${rowsTableOf(table.databaseId, table.tableId)} r WHERE r.id = $1::bpchar`,
    params: [rowId],
  };
}

/**
 * What a page built from cached definitions must still find when it runs: the table active at that schema version
 * in that database and org, and the view (if any) at that version, shared or owned by `userId`. PostgreSQL checks
 * it once per statement (an uncorrelated EXISTS is an InitPlan gating the scan), so the table and view look-ups ride
 * in the page's own round trip; a page that fails it comes back empty and is read again the long way.
 */
export interface PageGuard {
  orgId: string;
  databaseId: string;
  tableId: string;
  schemaVersion: number;
  view: { id: string; version: string; userId: string | null } | null;
}

export function guardCondition(guard: PageGuard, params: Params): string {
  const table = params.add(guard.tableId, ID);
  const org = params.add(guard.orgId, ID);
  const conditions = [
    `EXISTS (SELECT 1 FROM public.data_tables g WHERE g.id = ${table} AND g.database_id = ${params.add(guard.databaseId, ID)}
      AND g.org_id = ${org} AND g.state = 'active' AND g.schema_version = ${params.add(guard.schemaVersion, 'int')})`,
  ];
  if (guard.view) {
    conditions.push(`EXISTS (SELECT 1 FROM public.saved_views g WHERE g.id = ${params.add(guard.view.id, ID)} AND g.table_id = ${table}
      AND g.org_id = ${org} AND g.version = ${params.add(guard.view.version, 'bigint')}
      AND ${visibleViewSql('g.', params.add(guard.view.userId, ID))})`);
  }
  return conditions.join(' AND ');
}

export interface RowPageQuery {
  /** Builds the filter's SQL (or null for none) with the page's own parameters. */
  filter: ((params: Params) => string) | null;
  guard?: PageGuard | null;
  keys: readonly SortKey[];
  after: Position | null;
  limit: number;
  /** A ready sort index matches `keys` (src/data/sort-indexes.ts): read a later page as index ranges. */
  indexed?: boolean;
  /** Answer each row as `rowJsonColumns` with these fields' values, and its sort keys. */
  json?: readonly FieldDefinition[];
  /**
   * Search relevance (issue 28), when there are no `keys`: the page is ordered by it, highest first, then id, and
   * each row answers it as `k0` (a real, exact as text), which `after.values[0]` holds on later pages.
   */
  rank?: ((params: Params) => string) | null;
}

/** A page by relevance: `rank DESC, id` with the position's rank and id as its keyset. */
function selectRankedPage(table: PhysicalTable, query: RowPageQuery, rank: (params: Params) => string): Statement {
  const params = new Params();
  const conditions = [
    ...(query.guard ? [guardCondition(query.guard, params)] : []),
    ...(query.filter ? [query.filter(params)] : []),
  ];
  const after = query.after;
  if (after) {
    const value = params.add(after.values[0] ?? '0', 'real');
    const id = params.add(after.rowId, ID);
    conditions.push(`(${rank(params)} < ${value} OR (${rank(params)} = ${value} AND r.id > ${id}))`);
  }
  const sql = `SELECT ${pageProjection(table, query)}, (${rank(params)})::text AS k0 FROM ${rowsTableOf(table.databaseId, table.tableId)} r
    ${conditions.length ? `WHERE ${conditions.join(' AND ')}` : ''}
    ORDER BY ${rank(params)} DESC, r.id ASC LIMIT ${params.add(query.limit + 1, 'int')}`;
  return { sql, params: params.values };
}

function pageProjection(table: PhysicalTable, query: RowPageQuery): string {
  const row = query.json ? `r.id, ${rowJsonColumns(query.json, 'r')}` : rowProjection(table.fields, 'r');
  return [row, ...sortKeyProjection(query.keys, 'r')].join(', ');
}

/** One page in the order of `keys` then id; sort keys come back as `k0…` so the last row can become a cursor. */
export function selectRowPage(table: PhysicalTable, query: RowPageQuery): Statement {
  if (query.rank && query.keys.length === 0) return selectRankedPage(table, query, query.rank);
  if (query.after && query.indexed && query.keys.length > 0) return selectIndexedPage(table, query, query.after);
  const params = new Params();
  const conditions = [
    ...(query.guard ? [guardCondition(query.guard, params)] : []),
    ...(query.filter ? [query.filter(params)] : []),
    ...(query.after ? [afterPosition(query.keys, query.after, 'r', params)] : []),
  ];
  const sql = `SELECT ${pageProjection(table, query)} FROM ${rowsTableOf(table.databaseId, table.tableId)} r
    ${conditions.length ? `WHERE ${conditions.join(' AND ')}` : ''}
    ORDER BY ${orderByClause(query.keys, 'r')} LIMIT ${params.add(query.limit + 1, 'int')}`;
  return { sql, params: params.values };
}

/**
 * A later page over a sort index: one `ORDER BY … LIMIT` per range of `rangesAfter`, each an index range scan that
 * stops after a page, then the few rows they found in order (by range, then keys). Without an index this would
 * scan the table once per range, so it is only used with one.
 */
function selectIndexedPage(table: PhysicalTable, query: RowPageQuery, after: Position): Statement {
  const params = new Params();
  const filter = query.filter ? query.filter(params) : null;
  const limit = params.add(query.limit + 1, 'int');
  const projection = [
    pageProjection(table, query),
    ...query.keys.map((key, index) => `r.${columnOf(key.field.id)} AS s${index}`),
  ].join(', ');
  const branches = rangesAfter(query.keys, after, 'r', params).map(
    (range, index) =>
      `(SELECT ${index} AS b, ${projection} FROM ${rowsTableOf(table.databaseId, table.tableId)} r
       WHERE ${filter ? `${filter} AND ` : ''}${range} ORDER BY ${orderByClause(query.keys, 'r')} LIMIT ${limit})`,
  );
  const order = ['p.b', ...query.keys.map((key, index) => `p.s${index} ${orderingOf(key.direction)}`), 'p.id'].join(
    ', ',
  );
  // Not `p.*`: the `s` columns have the fields' own types, and a statement prepared before a field's conversion
  // would fail with "cached plan must not change result type" when its result type changed.
  const rowColumns = query.json
    ? ROW_JSON_COLUMNS
    : ['id', 'version', 'created_at', 'updated_at', ...table.fields.map((_field, index) => `c${index}`)];
  const columns = [...rowColumns, ...query.keys.map((_key, index) => `k${index}`)]
    .map((column) => `p.${column}`)
    .join(', ');
  return {
    sql: `SELECT ${columns} FROM (${branches.join(' UNION ALL ')}) p ORDER BY ${order} LIMIT ${limit}`,
    params: params.values,
  };
}

/** The sort values of one row, for a cursor that left them out. */
export function selectSortValues(table: PhysicalTable, keys: readonly SortKey[], rowId: string): Statement {
  return {
    sql: `SELECT ${sortKeyProjection(keys, 'r').join(', ') || 'r.id'} FROM ${rowsTableOf(table.databaseId, table.tableId)} r WHERE r.id = $1::bpchar`,
    params: [rowId],
  };
}

export interface HistoryRecord {
  field_id: string;
  version: string;
  operation: string;
  value: string;
  mutation_id: string;
  actor_id: string;
  actor_kind: string;
  actor_name: string;
  changed_at: string;
}

/** A row's cell history, newest version first, then by field id; keyset on (version, field_id). */
export function selectHistoryPage(
  table: PhysicalTable,
  rowId: string,
  after: { version: string; fieldId: string } | null,
  limit: number,
): Statement {
  const params = new Params();
  const row = params.add(rowId, ID);
  const position = after
    ? `AND (version, field_id) < (${params.add(after.version, 'bigint')}, ${params.add(after.fieldId, ID)})`
    : '';
  const sql = `SELECT field_id, version::text AS version, operation, value::text AS value, mutation_id, actor_id, actor_kind, actor_name,
           ${utcTimestamp('changed_at')} AS changed_at
      FROM ${historyTableOf(table.databaseId, table.tableId)}
     WHERE row_id = ${row} ${position}
     ORDER BY version DESC, field_id DESC
     LIMIT ${params.add(limit + 1, 'int')}`;
  return { sql, params: params.values };
}
