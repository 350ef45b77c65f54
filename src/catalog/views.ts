import type { Statement } from '../data/statement.ts';
import { visibleViewSql } from '../data/view-visibility.ts';

/** One table's next page of views: its position and how many to fetch (the page size + 1). */
export interface ViewPageKey {
  orgId: string;
  tableId: string;
  afterId: string | null;
  take: number;
}

/** The views the caller may see (shared, and its own personal ones) of every requested table, in one statement. */
export function selectViewPageIds(keys: readonly ViewPageKey[], userId: string | null): Statement {
  return {
    sql: `
  SELECT k.i::int AS "index", v.id
    FROM unnest($1::text[], $2::text[], $3::text[], $4::int[]) WITH ORDINALITY AS k(org_id, table_id, after_id, take, i)
   CROSS JOIN LATERAL (
         SELECT id FROM saved_views
          WHERE org_id = k.org_id::bpchar AND table_id = k.table_id::bpchar
            AND ${visibleViewSql('', '$5::bpchar')}
            AND (k.after_id IS NULL OR id > k.after_id::bpchar)
          ORDER BY id LIMIT k.take) v`,
    params: [
      keys.map((key) => key.orgId),
      keys.map((key) => key.tableId),
      keys.map((key) => key.afterId),
      keys.map((key) => key.take),
      userId,
    ],
  };
}

/** A view as the rows read path needs it: plain SQL on the pool (Prisma's findFirst cost ~2 ms of a ~9 ms page). */
export function selectViewForRows(viewId: string, tableId: string, orgId: string): Statement {
  return {
    sql: `SELECT id, visibility, owner_user_id AS "ownerUserId", version::text AS version, definition
       FROM saved_views WHERE id = $1::bpchar AND table_id = $2::bpchar AND org_id = $3::bpchar`,
    params: [viewId, tableId, orgId],
  };
}

/** Serialises view creates of one scope (a table's shared views, or one user's personal views of it). */
export function lockViewScope(tableId: string, ownerUserId: string | null): Statement {
  const scope = ownerUserId === null ? 'shared' : `user:${ownerUserId}`;
  return { sql: 'SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', params: [`views:${tableId}:${scope}`] };
}
