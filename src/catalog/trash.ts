import { historyTableOf, keyLockOf, keyTypeOf, rowsTableOf, schemaOf, sequenceOf } from '../data/identifiers.ts';
import type { Statement } from '../data/statement.ts';

/**
 * The trash (issue 13, DESIGN §6) as catalog statements. A trashed database or table keeps every catalog row and its
 * physical data; only its `state` and the trash columns change, so every read path (which already asks for
 * `state = 'active'`) stops seeing it at once, and a restore is one UPDATE that brings back exactly what was there.
 */

export type TrashKind = 'database' | 'table';

export interface TrashMark {
  actorId: string;
  actorName: string;
  purgeAfter: Date;
  purgeJobId: string;
}

const TRASH_MARK = `state = 'trashed', deleted_at = now(), deleted_by_id = $2::bpchar, deleted_by_name = $3, purge_after = $4::timestamptz`;
/** The deleted thing itself moves to a new version; the tables that only go along with their database do not. */
const TRASH_COLUMNS = `${TRASH_MARK}, version = version + 1, updated_at = now()`;

const markParams = (id: string, mark: TrashMark) => [
  id,
  mark.actorId,
  mark.actorName,
  mark.purgeAfter.toISOString(),
  mark.purgeJobId,
];

export function trashTable(tableId: string, mark: TrashMark): Statement {
  return {
    sql: `UPDATE public.data_tables SET ${TRASH_COLUMNS}, purge_job_id = $5::bpchar
           WHERE id = $1::bpchar AND state = 'active' RETURNING id`,
    params: markParams(tableId, mark),
  };
}

/**
 * The database and, with it, its active tables: they leave every read path with it and come back with it. Tables
 * trashed on their own before keep their own trash entry (and come back into the list when the database does).
 */
export function trashDatabase(databaseId: string, mark: TrashMark): Statement[] {
  return [
    {
      sql: `UPDATE public.databases SET ${TRASH_COLUMNS}, purge_job_id = $5::bpchar
             WHERE id = $1::bpchar AND state = 'active' RETURNING id`,
      params: markParams(databaseId, mark),
    },
    {
      sql: `UPDATE public.data_tables SET ${TRASH_MARK}, trashed_with_database = true
             WHERE database_id = $1::bpchar AND state = 'active' RETURNING id`,
      params: markParams(databaseId, mark).slice(0, 4),
    },
  ];
}

const RESTORE_MARK = `state = 'active', deleted_at = NULL, deleted_by_id = NULL, deleted_by_name = NULL, purge_after = NULL, purge_job_id = NULL`;
const RESTORE_COLUMNS = `${RESTORE_MARK}, version = version + 1, updated_at = now()`;

export function restoreTable(tableId: string): Statement {
  return {
    sql: `UPDATE public.data_tables SET ${RESTORE_COLUMNS}
           WHERE id = $1::bpchar AND state = 'trashed' AND NOT trashed_with_database RETURNING id`,
    params: [tableId],
  };
}

export function restoreDatabase(databaseId: string): Statement[] {
  return [
    {
      sql: `UPDATE public.databases SET ${RESTORE_COLUMNS} WHERE id = $1::bpchar AND state = 'trashed' RETURNING id`,
      params: [databaseId],
    },
    {
      sql: `UPDATE public.data_tables SET ${RESTORE_MARK}, trashed_with_database = false
             WHERE database_id = $1::bpchar AND state = 'trashed' AND trashed_with_database RETURNING id`,
      params: [databaseId],
    },
  ];
}

export interface TrashEntryRow {
  kind: TrashKind;
  id: string;
  name: string;
  databaseId: string | null;
  databaseName: string | null;
  version: string;
  deletedAt: Date;
  deletedById: string;
  deletedByName: string;
  purgeAfter: Date;
  purgeJobId: string;
}

/** One restorable entry of the org's trash (the restoring UPDATE then locks it against its purge job). */
export function selectTrashEntry(orgId: string, id: string): Statement {
  return {
    sql: `SELECT 'database' AS kind, d.id, d.name, NULL AS "databaseId", NULL AS "databaseName", d.version::text AS version,
                 d.deleted_at AS "deletedAt", d.deleted_by_id AS "deletedById", d.deleted_by_name AS "deletedByName",
                 d.purge_after AS "purgeAfter", d.purge_job_id AS "purgeJobId"
            FROM public.databases d WHERE d.id = $1::bpchar AND d.org_id = $2::bpchar AND d.state = 'trashed'
          UNION ALL
          SELECT 'table', t.id, t.name, t.database_id, d.name, t.version::text, t.deleted_at, t.deleted_by_id, t.deleted_by_name,
                 t.purge_after, t.purge_job_id
            FROM public.data_tables t JOIN public.databases d ON d.id = t.database_id
           WHERE t.id = $1::bpchar AND t.org_id = $2::bpchar AND t.state = 'trashed' AND NOT t.trashed_with_database
             AND d.state = 'active'`,
    params: [id, orgId],
  };
}

/**
 * One page of the org's trash, newest deletion first. A table whose database is itself in the trash is not
 * restorable on its own, so it is not listed (the database's entry stands for it).
 */
export function selectTrashPage(
  orgId: string,
  after: { deletedAt: string; id: string } | null,
  limit: number,
): Statement {
  const position = after ? `AND (deleted_at, id) < ($3::timestamptz, $4::bpchar)` : '';
  return {
    sql: `SELECT kind, id, name, "databaseId", "databaseName", version, deleted_at AS "deletedAt", "deletedById", "deletedByName",
                 "purgeAfter", "purgeJobId"
            FROM (
            SELECT 'database' AS kind, d.id, d.name, NULL::bpchar AS "databaseId", NULL::varchar AS "databaseName",
                   d.version::text AS version, d.deleted_at, d.deleted_by_id AS "deletedById", d.deleted_by_name AS "deletedByName",
                   d.purge_after AS "purgeAfter", d.purge_job_id AS "purgeJobId"
              FROM public.databases d WHERE d.org_id = $1::bpchar AND d.state = 'trashed'
            UNION ALL
            SELECT 'table', t.id, t.name, t.database_id, d.name, t.version::text, t.deleted_at, t.deleted_by_id, t.deleted_by_name,
                   t.purge_after, t.purge_job_id
              FROM public.data_tables t JOIN public.databases d ON d.id = t.database_id
             WHERE t.org_id = $1::bpchar AND t.state = 'trashed' AND NOT t.trashed_with_database AND d.state = 'active'
          ) entries
          WHERE true ${position}
          ORDER BY deleted_at DESC, id DESC
          LIMIT $2`,
    params: after ? [orgId, limit, after.deletedAt, after.id] : [orgId, limit],
  };
}

/**
 * The purge job's first step: claims the entry for purging, only if it is still in the trash under this job (a
 * restore cleared it, or a newer delete scheduled another job). No row: nothing to purge.
 */
export function markPurging(kind: TrashKind, id: string, jobId: string): Statement {
  const table = kind === 'database' ? 'public.databases' : 'public.data_tables';
  return {
    sql: `UPDATE ${table} SET state = 'purging', updated_at = now()
           WHERE id = $1::bpchar AND purge_job_id = $2::bpchar AND state IN ('trashed', 'purging') RETURNING id`,
    params: [id, jobId],
  };
}

/**
 * A table's physical objects: rows, cell history, autoNumber sequences, and each hashed rule's lock function and
 * key type (its constraint and trigger go with the table; the function and type live beside it in the schema).
 * IF EXISTS: a resumed purge repeats none.
 */
export function dropTableData(
  databaseId: string,
  tableId: string,
  sequenceFieldIds: readonly string[],
  hashedRuleIds: readonly string[] = [],
): Statement[] {
  return [
    { sql: `DROP TABLE IF EXISTS ${rowsTableOf(databaseId, tableId)}`, params: [] },
    { sql: `DROP TABLE IF EXISTS ${historyTableOf(databaseId, tableId)}`, params: [] },
    ...sequenceFieldIds.map((fieldId) => ({
      sql: `DROP SEQUENCE IF EXISTS ${sequenceOf(databaseId, fieldId)}`,
      params: [],
    })),
    ...hashedRuleIds.flatMap((ruleId) => [
      { sql: `DROP FUNCTION IF EXISTS ${keyLockOf(databaseId, ruleId)}()`, params: [] },
      { sql: `DROP TYPE IF EXISTS ${keyTypeOf(databaseId, ruleId)}`, params: [] },
    ]),
  ];
}

export function dropDatabaseSchema(databaseId: string): Statement {
  return { sql: `DROP SCHEMA IF EXISTS ${schemaOf(databaseId)} CASCADE`, params: [] };
}

/** The catalog rows go last; fields, rules, keys and views follow them by cascade. */
export function deleteCatalogRow(kind: TrashKind, id: string): Statement {
  const table = kind === 'database' ? 'public.databases' : 'public.data_tables';
  return { sql: `DELETE FROM ${table} WHERE id = $1::bpchar AND state = 'purging' RETURNING id`, params: [id] };
}

/** The tables a purge removes (a database's: all of them, trashed or not) and their autoNumber fields' sequences. */
export function selectPurgedTables(column: 'id' | 'database_id', id: string): Statement {
  return {
    sql: `SELECT t.id, coalesce(array_agg(f.id ORDER BY f.id) FILTER (WHERE f.type = 'autoNumber'), '{}') AS "sequenceFieldIds",
                 coalesce((SELECT array_agg(r.id ORDER BY r.id) FROM public.unique_rules r WHERE r.table_id = t.id AND r.enforcement = 'hash'), '{}')
                   AS "hashedRuleIds"
            FROM public.data_tables t LEFT JOIN public.fields f ON f.table_id = t.id
           WHERE t.${column} = $1::bpchar GROUP BY t.id ORDER BY t.id`,
    params: [id],
  };
}

/**
 * Foreign keys of the purged tables go before the catalog rows: they reference rules and tables with RESTRICT,
 * which PostgreSQL checks before the cascade from the table would remove them.
 */
export function deleteForeignKeysOf(tableIds: readonly string[]): Statement {
  return { sql: `DELETE FROM public.foreign_keys WHERE table_id = ANY($1::bpchar[])`, params: [tableIds] };
}

/** The purge jobs of tables that were trashed on their own inside a database being purged: nothing left for them. */
export function cancelTablePurges(databaseId: string): Statement {
  return {
    sql: `UPDATE public.jobs j SET state = 'cancelled', finished_at = now(), updated_at = now()
            FROM public.data_tables t
           WHERE t.database_id = $1::bpchar AND j.id = t.purge_job_id AND j.state = 'queued' RETURNING j.id`,
    params: [databaseId],
  };
}
