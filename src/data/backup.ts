import { columnOf, historyTableOf, rowsTableOf, schemaOf, sequenceOf } from './identifiers.ts';
import type { Statement } from './sql.ts';

/**
 * SQL of backups and restores (issue 16), built from IDs only. A backup reads the catalog rows of one database as
 * JSON (`to_jsonb` of whole rows, so columns other features add later are carried without this file knowing them)
 * and streams each physical table with COPY; a restore writes them back with `jsonb_populate_recordset` and COPY.
 */

const plain = (sql: string): Statement => ({ sql, params: [] });

/** Fixed columns of every rows table, in the order backups store them, before the fields in position order. */
export const ROW_COLUMNS = ['id', 'version', 'created_at', 'updated_at'] as const;
export const HISTORY_COLUMNS = ['row_id', 'version', 'field_id', 'operation', 'value', 'mutation_id', 'actor_id', 'actor_kind', 'actor_name', 'changed_at'] as const;

/** Text output that reads back identically whatever the server's or the restoring session's settings. */
export const EXACT_TEXT_SETTINGS = [
  "SET LOCAL DateStyle = 'ISO, YMD'", "SET LOCAL TimeZone = 'UTC'", 'SET LOCAL extra_float_digits = 3', "SET LOCAL IntervalStyle = 'iso_8601'",
];

function rowColumns(fieldIds: readonly string[]): string {
  return [...ROW_COLUMNS, ...fieldIds.map(columnOf)].join(', ');
}

export function copyRowsOut(databaseId: string, tableId: string, fieldIds: readonly string[]): string {
  return `COPY ${rowsTableOf(databaseId, tableId)} (${rowColumns(fieldIds)}) TO STDOUT`;
}

export function copyHistoryOut(databaseId: string, tableId: string): string {
  return `COPY ${historyTableOf(databaseId, tableId)} (${HISTORY_COLUMNS.join(', ')}) TO STDOUT`;
}

export function copyRowsIn(databaseId: string, tableId: string, fieldIds: readonly string[]): string {
  return `COPY ${rowsTableOf(databaseId, tableId)} (${rowColumns(fieldIds)}) FROM STDIN`;
}

export function copyHistoryIn(databaseId: string, tableId: string): string {
  return `COPY ${historyTableOf(databaseId, tableId)} (${HISTORY_COLUMNS.join(', ')}) FROM STDIN`;
}

/** The catalog tables a backup holds, in the order a restore inserts them (parents first). */
export const CATALOG_PARTS = ['data_tables', 'fields', 'unique_rules', 'foreign_keys', 'saved_views'] as const;
export type CatalogPart = (typeof CATALOG_PARTS)[number];

const PART_FILTER: Record<CatalogPart, string> = {
  data_tables: 'x.database_id = $1::bpchar',
  fields: 'x.table_id IN (SELECT id FROM public.data_tables WHERE database_id = $1::bpchar)',
  unique_rules: 'x.table_id IN (SELECT id FROM public.data_tables WHERE database_id = $1::bpchar)',
  foreign_keys: 'x.table_id IN (SELECT id FROM public.data_tables WHERE database_id = $1::bpchar)',
  saved_views: 'x.table_id IN (SELECT id FROM public.data_tables WHERE database_id = $1::bpchar)',
};

/** Whole catalog rows of one database as JSON, ordered by id so that two backups of the same state are equal. */
export function selectCatalogPart(part: CatalogPart, databaseId: string): Statement {
  return { sql: `SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.id), '[]'::jsonb) AS rows FROM public.${part} x WHERE ${PART_FILTER[part]}`, params: [databaseId] };
}

export function deleteCatalogParts(databaseId: string): Statement[] {
  const tables = 'SELECT id FROM public.data_tables WHERE database_id = $1::bpchar';
  return [
    { sql: `DELETE FROM public.saved_views WHERE table_id IN (${tables})`, params: [databaseId] },
    { sql: `DELETE FROM public.foreign_keys WHERE table_id IN (${tables}) OR referenced_table_id IN (${tables})`, params: [databaseId] },
    { sql: `DELETE FROM public.unique_rules WHERE table_id IN (${tables})`, params: [databaseId] },
    { sql: `DELETE FROM public.fields WHERE table_id IN (${tables})`, params: [databaseId] },
    { sql: 'DELETE FROM public.data_tables WHERE database_id = $1::bpchar', params: [databaseId] },
  ];
}

export function insertCatalogPart(part: CatalogPart, rows: string): Statement {
  return { sql: `INSERT INTO public.${part} SELECT * FROM jsonb_populate_recordset(NULL::public.${part}, $1::jsonb)`, params: [rows] };
}

/** The unique indexes (u_…) and foreign keys (k_…) of a database's schema, as PostgreSQL prints them. */
export function selectConstraintDefinitions(databaseId: string): Statement {
  return {
    sql: `SELECT 'index' AS kind, c.relname AS table_name, i.relname AS name, pg_get_indexdef(i.oid) AS definition
            FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class c ON c.oid = x.indrelid
           WHERE c.relnamespace = to_regnamespace($1) AND i.relname LIKE 'u\\_%' AND x.indisvalid
          UNION ALL
          SELECT 'foreignKey', c.relname, k.conname, pg_get_constraintdef(k.oid)
            FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
           WHERE k.connamespace = to_regnamespace($1) AND k.contype = 'f' AND k.convalidated
           ORDER BY 1 DESC, 3`,
    params: [schemaOf(databaseId).replaceAll('"', '')],
  };
}

export function selectSequenceState(databaseId: string, fieldId: string): Statement {
  return plain(`SELECT last_value::text AS last_value, is_called FROM ${sequenceOf(databaseId, fieldId)}`);
}

export function setSequenceState(databaseId: string, fieldId: string, lastValue: string, isCalled: boolean): Statement {
  return { sql: 'SELECT setval($1::regclass, $2::bigint, $3)::text AS value', params: [sequenceOf(databaseId, fieldId).replaceAll('"', ''), lastValue, isCalled] };
}

export function dropSchemaIfExists(databaseId: string): Statement {
  return plain(`DROP SCHEMA IF EXISTS ${schemaOf(databaseId)} CASCADE`);
}

export function renameSchema(fromDatabaseId: string, toDatabaseId: string): Statement {
  return plain(`ALTER SCHEMA ${schemaOf(fromDatabaseId)} RENAME TO ${schemaOf(toDatabaseId)}`);
}

/** Waits for statements in flight on these tables to end, and holds new ones until the swap commits. */
export function lockTables(databaseId: string, tableIds: readonly string[]): Statement | null {
  if (tableIds.length === 0) return null;
  const tables = tableIds.flatMap((tableId) => [rowsTableOf(databaseId, tableId), historyTableOf(databaseId, tableId)]);
  return plain(`LOCK TABLE ${tables.join(', ')} IN ACCESS EXCLUSIVE MODE`);
}

/** Restoring under new ids (a `new-database` copy): history names fields by id. */
export function remapHistoryFields(databaseId: string, tableId: string, oldIds: readonly string[], newIds: readonly string[]): Statement {
  return {
    sql: `UPDATE ${historyTableOf(databaseId, tableId)} h SET field_id = m.new_id
            FROM unnest($1::bpchar[], $2::bpchar[]) AS m(old_id, new_id) WHERE h.field_id = m.old_id`,
    params: [oldIds, newIds],
  };
}

/**
 * Rewrites every identifier derived from an id (`d_…`, `t_…`, `h_…`, `f_…`, `s_…`, `u_…`, `k_…`) in DDL that
 * PostgreSQL printed, from the ids of the backup to those of the restore. Only quoted or bare identifiers of our
 * own shape are touched: a ULID is 26 characters of [0-9a-z] after one of those prefixes.
 */
export function rewriteIdentifiers(definition: string, ids: ReadonlyMap<string, string>): string {
  return definition.replace(/\b([dthfsuk])_([0-9a-z]{26})\b/g, (whole, prefix: string, id: string) => {
    const next = ids.get(id.toUpperCase());
    return next === undefined ? whole : `${prefix}_${next.toLowerCase()}`;
  });
}
