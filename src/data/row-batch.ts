import { isId } from '../kernel/ids.ts';
import { typeSpecOf, type CellValue, type FieldDefinition } from './field-types.ts';
import type { FilterExpression } from './filter.ts';
import { compileFilter } from './filter-sql.ts';
import { columnKeyOf, columnOf, historyTableOf, rowsTableOf, sequenceOf } from './identifiers.ts';
import { bindEvent, rowActivity, rowProjection, type BoundEvent, type PhysicalTable, type RowEvent } from './rows.ts';
import { activityInsertSql } from './activity.ts';
import { ID, Params, type Statement } from './statement.ts';
import { hashedKeyExpression, keyPresent, type KeyEnforcement } from './unique-keys.ts';

/**
 * Set-wise row SQL for batches (issue 13). A batch of 1,000 operations costs a handful of statements, never one
 * per row: the rows travel as ONE jsonb array parameter, unpacked by `jsonb_to_recordset` into typed columns (a
 * JSON value converts to each column type through that type's input function, as a bound parameter would), and
 * the same array feeds the cell history through `->`, which yields each cell's canonical JSON.
 */

/** A row as the batch sends it: the id, then every written field's canonical value keyed by its column name. */
export type RowPayload = Record<string, CellValue>;

export function rowPayload(
  fields: readonly FieldDefinition[],
  rowId: string,
  values: ReadonlyMap<string, CellValue>,
  extra: Record<string, CellValue> = {},
): RowPayload {
  const payload: RowPayload = { id: rowId, ...extra };
  for (const field of fields) payload[columnKeyOf(field.id)] = values.get(field.id) ?? null;
  return payload;
}

/** A key as the key statements take it: the batch position of its operation as `id`, then the key's values. */
export function keyPayload(
  index: number,
  fieldIds: readonly string[],
  values: ReadonlyMap<string, CellValue>,
): RowPayload {
  return { id: index, ...Object.fromEntries(fieldIds.map((id) => [columnKeyOf(id), values.get(id) ?? null])) };
}

/** `jsonb_to_recordset(<placeholder>) AS alias(id bpchar, …columns)`, typed by the fields' own column types. */
function recordset(
  payload: string,
  fields: readonly FieldDefinition[],
  alias: string,
  extra: readonly string[] = [],
): string {
  const columns = [
    'id bpchar',
    ...extra,
    ...fields.map((field) => `${columnOf(field.id)} ${typeSpecOf(field.type).column(field.options)}`),
  ];
  return `jsonb_to_recordset(${payload}) AS ${alias}(${columns.join(', ')})`;
}

/** The fields a request can write: everything but generated (autoNumber) columns, which keep their drawn value. */
const writable = (fields: readonly FieldDefinition[]) => fields.filter((field) => !typeSpecOf(field.type).generated);

/** The guard of every batch write: the table is still active at the schema version the values were checked against. */
function schemaGuard(params: Params, tableId: string, schemaVersion: number): string {
  return `EXISTS (SELECT 1 FROM public.data_tables WHERE id = ${params.add(tableId, ID)} AND state = 'active'
                   AND schema_version = ${params.add(schemaVersion, 'int')})`;
}

/** History rows for `cells` (field id, version, value SQL) of each row of `source`. */
function historyInsert(
  table: PhysicalTable,
  bound: BoundEvent,
  operation: string,
  source: string,
  cells: string,
): string {
  return `INSERT INTO ${historyTableOf(table.databaseId, table.tableId)}
      (row_id, version, field_id, operation, value, mutation_id, actor_id, actor_kind, actor_name, changed_at)
    SELECT cell.row_id, cell.version, cell.field_id, '${operation}', cell.value, ${bound.mutationId}, ${bound.actorId}, ${bound.actorKind},
           ${bound.actorName}, ${bound.at}
      FROM ${source} CROSS JOIN LATERAL (${cells}) AS cell(row_id, version, field_id, value)`;
}

/** Rows and their `id`-ordered locks: the targets of a batch's updates and deletes, read as they are committed. */
export function lockRows(table: PhysicalTable, rowIds: readonly string[]): Statement {
  return {
    sql: `SELECT ${rowProjection(table.fields, 'r')} FROM ${rowsTableOf(table.databaseId, table.tableId)} r
           WHERE r.id = ANY($1::bpchar[]) ORDER BY r.id FOR UPDATE`,
    params: [rowIds],
  };
}

/**
 * Transaction-scoped advisory locks on the keys a batch upserts, taken in one order so that two batches cannot
 * deadlock. Two upserts of one key serialise here: the second reads the key only after the first has committed
 * (each statement of a READ COMMITTED transaction takes a fresh snapshot), so it finds the row and updates it.
 */
export function lockKeys(lockIds: readonly string[]): Statement {
  return {
    sql: 'SELECT count(*)::int AS locked FROM (SELECT pg_advisory_xact_lock(k) FROM (SELECT unnest($1::bigint[]) AS k ORDER BY 1) AS keys) AS held',
    params: [lockIds],
  };
}

export interface KeyRule {
  ruleId: string;
  fields: readonly FieldDefinition[];
  enforcement: KeyEnforcement;
}

/** Equality of the rule's key between `t` (the table) and `k` (the batch's keys), in the form the rule's index serves. */
export function keyMatch(table: PhysicalTable, rule: KeyRule): string {
  const ids = rule.fields.map((field) => field.id);
  if (rule.enforcement === 'hash') {
    return `${hashedKeyExpression(table.databaseId, rule.ruleId, ids, 't')} = ${hashedKeyExpression(table.databaseId, rule.ruleId, ids, 'k')} AND ${keyPresent(ids, 't')}`;
  }
  return ids.map((id) => `t.${columnOf(id)} = k.${columnOf(id)}`).join(' AND ');
}

/** Keys carry the operation's index as their `id` (a batch position, not a row id). */
const keyRecordset = (params: Params, keys: readonly RowPayload[], rule: KeyRule) =>
  `jsonb_to_recordset(${params.add(JSON.stringify(keys), 'jsonb')}) AS k(id int, ${rule.fields.map((field) => `${columnOf(field.id)} ${typeSpecOf(field.type).column(field.options)}`).join(', ')})`;

/** The rows holding the upserted keys, locked, with the index of the operation that named each key (`op`). */
export function matchKeys(table: PhysicalTable, rule: KeyRule, keys: readonly RowPayload[]): Statement {
  const params = new Params();
  const sql = `SELECT k.id AS op, ${rowProjection(table.fields, 't')}
      FROM ${keyRecordset(params, keys, rule)} JOIN ${rowsTableOf(table.databaseId, table.tableId)} t ON ${keyMatch(table, rule)}
     ORDER BY t.id FOR UPDATE OF t`;
  return { sql, params: params.values };
}

/** The batch positions whose new key another row, not changed by the batch, already holds. */
export function takenKeys(
  table: PhysicalTable,
  rule: KeyRule,
  keys: readonly RowPayload[],
  changedRowIds: readonly string[],
): Statement {
  const params = new Params();
  const sql = `SELECT k.id AS op FROM ${keyRecordset(params, keys, rule)}
     WHERE EXISTS (SELECT 1 FROM ${rowsTableOf(table.databaseId, table.tableId)} t
                    WHERE ${keyMatch(table, rule)} AND t.id <> ALL(${params.add(changedRowIds, 'bpchar[]')}))
     ORDER BY k.id`;
  return { sql, params: params.values };
}

/**
 * A conditional rule's conflicts among the rows a batch writes (`rows`: every field, `id` = the operation's index).
 * Only rows inside the rule's `where` take part, in the batch and in the table alike. Answers each refused position
 * with the earliest batch position writing the same key (`conflictsWith`), or null when an unchanged row holds it.
 */
export function conditionalKeyConflicts(
  table: PhysicalTable,
  rule: KeyRule,
  where: FilterExpression,
  rows: readonly RowPayload[],
  changedRowIds: readonly string[],
): Statement {
  const params = new Params();
  const ids = rule.fields.map((field) => field.id);
  const columns = table.fields.map((field) => `${columnOf(field.id)} ${typeSpecOf(field.type).column(field.options)}`);
  const inside = (alias: string) => compileFilter(where, table.fields, (value, cast) => params.add(value, cast), alias);
  const sameKey = ids.map((id) => `o.${columnOf(id)} = k.${columnOf(id)}`).join(' AND ');
  const sql = `WITH k AS (
      SELECT * FROM jsonb_to_recordset(${params.add(JSON.stringify(rows), 'jsonb')}) AS k(id int, ${columns.join(', ')})
       WHERE ${keyPresent(ids, 'k')} AND (${inside('k')}))
    SELECT k.id AS op, (SELECT min(o.id) FROM k o WHERE o.id < k.id AND ${sameKey}) AS "conflictsWith"
      FROM k
     WHERE EXISTS (SELECT 1 FROM k o WHERE o.id < k.id AND ${sameKey})
        OR EXISTS (SELECT 1 FROM ${rowsTableOf(table.databaseId, table.tableId)} t
                    WHERE ${keyMatch(table, rule)} AND t.id <> ALL(${params.add(changedRowIds, 'bpchar[]')}) AND (${inside('t')}))
     ORDER BY k.id`;
  return { sql, params: params.values };
}

/** A foreign key of some table of the database into the batch's table, as `referencedRows` needs it. */
export interface IncomingKey {
  id: string;
  tableId: string;
  tableName: string;
  fieldIds: readonly string[];
  referencedFieldIds: readonly string[];
}

/** The foreign keys into a table (its own included), with the referenced rule's fields. */
export function incomingKeys(tableId: string): Statement {
  return {
    sql: `SELECT k.id, k.table_id AS "tableId", t.name AS "tableName", k.field_ids AS "fieldIds", r.field_ids AS "referencedFieldIds"
            FROM foreign_keys k JOIN data_tables t ON t.id = k.table_id JOIN unique_rules r ON r.id = k.referenced_rule_id
           WHERE k.referenced_table_id = $1 ORDER BY k.id`,
    params: [tableId],
  };
}

/**
 * The batch positions whose row's current key (`keys`: the referenced fields' values, `id` = the position) rows of
 * the referencing table still hold, leaving out the rows in `ignoredRowIds` (rows of this table the batch deletes).
 */
export function referencedRows(
  databaseId: string,
  key: IncomingKey,
  referencedFields: readonly FieldDefinition[],
  keys: readonly RowPayload[],
  ignoredRowIds: readonly string[],
): Statement {
  const params = new Params();
  const columns = referencedFields.map(
    (field) => `${columnOf(field.id)} ${typeSpecOf(field.type).column(field.options)}`,
  );
  const matches = key.fieldIds
    .map((id, index) => `r.${columnOf(id)} = k.${columnOf(key.referencedFieldIds[index]!)}`)
    .join(' AND ');
  const sql = `SELECT k.id AS op FROM jsonb_to_recordset(${params.add(JSON.stringify(keys), 'jsonb')}) AS k(id int, ${columns.join(', ')})
     WHERE EXISTS (SELECT 1 FROM ${rowsTableOf(databaseId, key.tableId)} r WHERE ${matches} AND r.id <> ALL(${params.add(ignoredRowIds, 'bpchar[]')}))
     ORDER BY k.id`;
  return { sql, params: params.values };
}

/** The batch positions whose foreign key values the referenced table does not hold. */
export function missingReferences(
  databaseId: string,
  key: { fields: readonly FieldDefinition[]; referencedTableId: string; referencedFieldIds: readonly string[] },
  keys: readonly RowPayload[],
): Statement {
  const params = new Params();
  const columns = key.fields.map((field) => `${columnOf(field.id)} ${typeSpecOf(field.type).column(field.options)}`);
  const matches = key.fields
    .map((field, index) => `t.${columnOf(key.referencedFieldIds[index]!)} = k.${columnOf(field.id)}`)
    .join(' AND ');
  const sql = `SELECT k.id AS op FROM jsonb_to_recordset(${params.add(JSON.stringify(keys), 'jsonb')}) AS k(id int, ${columns.join(', ')})
     WHERE NOT EXISTS (SELECT 1 FROM ${rowsTableOf(databaseId, key.referencedTableId)} t WHERE ${matches})
     ORDER BY k.id`;
  return { sql, params: params.values };
}

/** `count` values of each autoNumber field, drawn before the insert so every new row is known up front. */
export function allocateGeneratedBatch(table: PhysicalTable, count: number): Statement | null {
  const generated = table.fields.filter((field) => typeSpecOf(field.type).generated);
  if (generated.length === 0 || count === 0) return null;
  const params = new Params();
  return {
    sql: `SELECT ${generated.map((field, index) => `nextval('${sequenceOf(table.databaseId, field.id)}')::text AS g${index}`).join(', ')}
            FROM generate_series(1, ${params.add(count, 'int')})`,
    params: params.values,
  };
}

export interface BatchWrite {
  schemaVersion: number;
  event: RowEvent;
}

/** Deletes rows (already locked at their expected versions) with a `delete` history entry per cell; returns their ids. */
export function deleteRows(table: PhysicalTable, write: BatchWrite, rowIds: readonly string[]): Statement {
  const params = new Params();
  const bound = bindEvent(params, write.event);
  const cells = table.fields.map((field) => `(s.id, s.version, ${params.add(field.id, 'text')}, 'null'::jsonb)`);
  const sql = `WITH removed AS (
      DELETE FROM ${rowsTableOf(table.databaseId, table.tableId)} r
       WHERE r.id = ANY(${params.add(rowIds, 'bpchar[]')}) AND ${schemaGuard(params, table.tableId, write.schemaVersion)}
      RETURNING r.id, r.version + 1 AS version
    ), history AS (${historyInsert(table, bound, 'delete', 'removed s', `VALUES ${cells.join(', ')}`)})
    SELECT id FROM removed`;
  return { sql, params: params.values };
}

export interface ChangedRow {
  /** The row's full new values, keyed by column (`rowPayload`), plus `version`: the new version. */
  payload: RowPayload;
  /** Ids of the fields whose value changed: the history gets an entry for each of them only. */
  changedFieldIds: readonly string[];
}

/**
 * Updates rows (already locked at their expected versions) to their full new values and version, with a history
 * entry for every changed cell. The caller computed both in memory from the locked rows, so this is one UPDATE …
 * FROM the batch's recordset. Returns the ids written.
 */
export function updateRows(table: PhysicalTable, write: BatchWrite, rows: readonly ChangedRow[]): Statement {
  const params = new Params();
  const bound = bindEvent(params, write.event);
  const fields = writable(table.fields);
  const payloads = rows.map((row) => ({ ...row.payload, changed: row.changedFieldIds }));
  const assignments = fields.map((field) => `${columnOf(field.id)} = u.${columnOf(field.id)}`);
  const cells = fields.map((field) => {
    const fieldId = params.add(field.id, 'text');
    return `SELECT s.id, s.version, ${fieldId}::bpchar, s.payload->'${columnKeyOf(field.id)}' WHERE s.payload->'changed' ? ${fieldId}`;
  });
  const payload = params.add(JSON.stringify(payloads), 'jsonb');
  const sql = `WITH source AS (
      SELECT u.*, e.payload FROM ${recordset(payload, fields, 'u', ['version bigint'])}
        JOIN jsonb_array_elements(${payload}) AS e(payload) ON e.payload->>'id' = u.id
    ), updated AS (
      UPDATE ${rowsTableOf(table.databaseId, table.tableId)} r SET version = u.version, updated_at = ${bound.at}${assignments.map((set) => `, ${set}`).join('')}
        FROM source u
       WHERE r.id = u.id AND ${schemaGuard(params, table.tableId, write.schemaVersion)}
      RETURNING r.id
    ), history AS (${historyInsert(table, bound, 'update', 'source s JOIN updated w ON w.id = s.id', cells.join(' UNION ALL '))})
    SELECT id FROM updated`;
  return { sql, params: params.values };
}

/** Inserts new rows (every field's value known, generated ones drawn) at version 1, with a history entry per cell. */
export function insertRows(table: PhysicalTable, write: BatchWrite, rows: readonly RowPayload[]): Statement {
  const params = new Params();
  const bound = bindEvent(params, write.event);
  const columns = table.fields.map((field) => columnOf(field.id));
  const cells = table.fields.map(
    (field) => `(s.id, 1::bigint, ${params.add(field.id, 'text')}, e.payload->'${columnKeyOf(field.id)}')`,
  );
  const payload = params.add(JSON.stringify(rows), 'jsonb');
  const sql = `WITH inserted AS (
      INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)} (id, created_at, updated_at${columns.map((column) => `, ${column}`).join('')})
      SELECT r.id, ${bound.at}, ${bound.at}${columns.map((column) => `, r.${column}`).join('')}
        FROM ${recordset(payload, table.fields, 'r')}
       WHERE ${schemaGuard(params, table.tableId, write.schemaVersion)}
      RETURNING id
    ), history AS (${historyInsert(table, bound, 'create', `inserted s JOIN jsonb_array_elements(${payload}) AS e(payload) ON e.payload->>'id' = s.id`, `VALUES ${cells.join(', ')}`)})
    SELECT count(*)::int AS count FROM inserted`;
  return { sql, params: params.values };
}

/** The batch's one `records.changed` event, with the number of rows it changed (and the row, when it is one). */
export function batchActivity(
  table: PhysicalTable,
  event: RowEvent,
  affectedRows: number,
  rowId: string | null,
): Statement {
  const params = new Params();
  const bound = bindEvent(params, event);
  const sql = activityInsertSql({
    ...rowActivity(params, table, event, bound),
    rowId: params.add(rowId, 'text'),
    affectedRows: params.add(affectedRows, 'int'),
  });
  return { sql, params: params.values };
}

/**
 * The commit guard of a batch: its net new rows against the table's limit (raises WDS01 when they do not fit).
 * Parameter-free, as it travels with COMMIT: only a checked ULID and integers go into its text.
 */
export function claimRowsCapacity(tableId: string, delta: number, rowLimit: number): string {
  if (!isId(tableId)) throw new Error(`Not an id: ${JSON.stringify(tableId)}`);
  if (!Number.isSafeInteger(delta) || !Number.isSafeInteger(rowLimit)) throw new Error('Not a row count');
  return `SELECT public.wds_claim_rows('${tableId}', ${delta}, ${rowLimit})`;
}
