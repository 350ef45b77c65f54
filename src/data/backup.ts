import { columnOf, historyTableOf, rowsTableOf, schemaOf, sequenceOf } from './identifiers.ts';
import type { Statement } from './statement.ts';

/**
 * SQL of backups and restores (issue 16), built from IDs only. A backup reads the catalog rows of one database as
 * JSON (`to_jsonb` of whole rows, so columns other features add later are carried without this file knowing them)
 * and streams each physical table with COPY; a restore writes them back with `jsonb_populate_recordset` and COPY.
 */

const plain = (sql: string): Statement => ({ sql, params: [] });

/** Fixed columns of every rows table, in the order backups store them, before the fields in position order. */
export const ROW_COLUMNS = ['id', 'version', 'created_at', 'updated_at'] as const;
export const HISTORY_COLUMNS = [
  'row_id',
  'version',
  'field_id',
  'operation',
  'value',
  'mutation_id',
  'actor_id',
  'actor_kind',
  'actor_name',
  'changed_at',
] as const;

/** Text output that reads back identically whatever the server's or the restoring session's settings. */
export const EXACT_TEXT_SETTINGS = [
  "SET LOCAL DateStyle = 'ISO, YMD'",
  "SET LOCAL TimeZone = 'UTC'",
  'SET LOCAL extra_float_digits = 3',
  "SET LOCAL IntervalStyle = 'iso_8601'",
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
  return {
    sql: `SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.id), '[]'::jsonb) AS rows FROM public.${part} x WHERE ${PART_FILTER[part]}`,
    params: [databaseId],
  };
}

export function deleteCatalogParts(databaseId: string): Statement[] {
  const tables = 'SELECT id FROM public.data_tables WHERE database_id = $1::bpchar';
  return [
    { sql: `DELETE FROM public.saved_views WHERE table_id IN (${tables})`, params: [databaseId] },
    {
      sql: `DELETE FROM public.foreign_keys WHERE table_id IN (${tables}) OR referenced_table_id IN (${tables})`,
      params: [databaseId],
    },
    { sql: `DELETE FROM public.unique_rules WHERE table_id IN (${tables})`, params: [databaseId] },
    { sql: `DELETE FROM public.fields WHERE table_id IN (${tables})`, params: [databaseId] },
    { sql: 'DELETE FROM public.data_tables WHERE database_id = $1::bpchar', params: [databaseId] },
  ];
}

export function insertCatalogPart(part: CatalogPart, rows: string): Statement {
  return {
    sql: `INSERT INTO public.${part} SELECT * FROM jsonb_populate_recordset(NULL::public.${part}, $1::jsonb)`,
    params: [rows],
  };
}

/**
 * What enforces a database's rules, as PostgreSQL prints it, in the order a restore recreates it: a hashed rule's
 * key type (r_…), lock function (l_…) and trigger, the unique btree indexes (u_…), the hashed rules' exclusion
 * constraints (u_…), then the foreign keys (k_…), which need the unique indexes they reference.
 */
export function selectConstraintDefinitions(databaseId: string): Statement {
  const hashed = `SELECT k.conrelid, k.conname, k.oid, k.connamespace FROM pg_constraint k
                   WHERE k.connamespace = to_regnamespace($1) AND k.contype = 'x' AND k.conname LIKE 'u\\_%'`;
  return {
    sql: `WITH hashed AS (${hashed}),
          key_lock AS (SELECT g.oid, g.tgrelid, g.tgname, g.tgfoid FROM pg_trigger g JOIN hashed h ON h.conrelid = g.tgrelid AND h.conname = g.tgname)
          SELECT kind, table_name, name, definition FROM (
            SELECT 1 AS step, 'keyType' AS kind, c.relname AS table_name, t.typname AS name,
                   format('CREATE TYPE %I.%I AS (%s)', n.nspname, t.typname, (
                     SELECT string_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum)
                       FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped)) AS definition
              FROM hashed h JOIN pg_class c ON c.oid = h.conrelid JOIN pg_namespace n ON n.oid = h.connamespace
              JOIN pg_type t ON t.typnamespace = h.connamespace AND t.typname = 'r' || substr(h.conname, 2)
            UNION ALL
            SELECT 2, 'keyLock', c.relname, p.proname, pg_get_functiondef(p.oid)
              FROM key_lock g JOIN pg_class c ON c.oid = g.tgrelid JOIN pg_proc p ON p.oid = g.tgfoid
            UNION ALL
            SELECT 3, 'keyTrigger', c.relname, g.tgname, pg_get_triggerdef(g.oid)
              FROM key_lock g JOIN pg_class c ON c.oid = g.tgrelid
            UNION ALL
            SELECT 4, 'index', c.relname, i.relname, pg_get_indexdef(i.oid)
              FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class c ON c.oid = x.indrelid
             WHERE c.relnamespace = to_regnamespace($1) AND i.relname LIKE 'u\\_%' AND x.indisvalid AND NOT x.indisexclusion
            UNION ALL
            SELECT 5, 'exclusion', c.relname, h.conname, pg_get_constraintdef(h.oid)
              FROM hashed h JOIN pg_class c ON c.oid = h.conrelid
            UNION ALL
            SELECT 6, 'foreignKey', c.relname, k.conname, pg_get_constraintdef(k.oid)
              FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
             WHERE k.connamespace = to_regnamespace($1) AND k.contype = 'f' AND k.convalidated
          ) definitions ORDER BY step, name`,
    params: [schemaOf(databaseId).replaceAll('"', '')],
  };
}

export function selectSequenceState(databaseId: string, fieldId: string): Statement {
  return plain(`SELECT last_value::text AS last_value, is_called FROM ${sequenceOf(databaseId, fieldId)}`);
}

export function setSequenceState(databaseId: string, fieldId: string, lastValue: string, isCalled: boolean): Statement {
  return {
    sql: 'SELECT setval($1::regclass, $2::bigint, $3)::text AS value',
    params: [sequenceOf(databaseId, fieldId).replaceAll('"', ''), lastValue, isCalled],
  };
}

export function dropSchemaIfExists(databaseId: string): Statement {
  return plain(`DROP SCHEMA IF EXISTS ${schemaOf(databaseId)} CASCADE`);
}

export function renameSchema(fromDatabaseId: string, toDatabaseId: string): Statement {
  return plain(`ALTER SCHEMA ${schemaOf(fromDatabaseId)} RENAME TO ${schemaOf(toDatabaseId)}`);
}

/**
 * A restore in place keeps the database's change feed: the restored schema's own (empty) feed is dropped and the
 * live one moved into it, so every cursor and webhook position stays valid and the restore's `schema.changed`
 * changes follow the database's earlier changes (docs/decisions/changes.md). Catalog-only: no change is copied.
 */
export function moveChangeFeed(fromDatabaseId: string, toDatabaseId: string): Statement[] {
  const [from, to] = [schemaOf(fromDatabaseId), schemaOf(toDatabaseId)];
  return [
    plain(`DROP TABLE ${to}.changes, ${to}.change_commits, ${to}.change_feed`),
    plain(`DROP SEQUENCE ${to}.change_seq`),
    ...['changes', 'change_commits', 'change_feed'].map((table) =>
      plain(`ALTER TABLE ${from}.${table} SET SCHEMA ${to}`),
    ),
    plain(`ALTER SEQUENCE ${from}.change_seq SET SCHEMA ${to}`),
  ];
}

/** Waits for statements in flight on these tables to end, and holds new ones until the swap commits. */
export function lockTables(databaseId: string, tableIds: readonly string[]): Statement | null {
  if (tableIds.length === 0) return null;
  const tables = tableIds.flatMap((tableId) => [rowsTableOf(databaseId, tableId), historyTableOf(databaseId, tableId)]);
  return plain(`LOCK TABLE ${tables.join(', ')} IN ACCESS EXCLUSIVE MODE`);
}

/** Restoring under new ids (a `new-database` copy): history names fields by id. */
export function remapHistoryFields(
  databaseId: string,
  tableId: string,
  oldIds: readonly string[],
  newIds: readonly string[],
): Statement {
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
  return definition.replace(/\b([dthfsukrl])_([0-9a-z]{26})\b/g, (whole, prefix: string, id: string) => {
    const next = ids.get(id.toUpperCase());
    return next === undefined ? whole : `${prefix}_${next.toLowerCase()}`;
  });
}
