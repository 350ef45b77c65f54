import type { Statement } from '../data/statement.ts';
import { signatureOf, type IndexKey } from '../data/sort-indexes.ts';

/**
 * The catalog side of sort indexes (issue 14), as named statements: the `table_indexes` rows that resolvers and
 * jobs change together with the index itself. Every change of the rows bumps `data_tables.index_version`, which
 * makes row reads pick up the new set without moving `schemaVersion`.
 */
export interface IndexRow {
  id: string;
  keys: IndexKey[];
  signature: string;
  origin: 'explicit' | 'automatic';
  state: 'building' | 'ready';
  method: IndexMethod;
}

/** btree: sort keys (issue 14); trigram and search: GIN trigram indexes over folded text (issue 28). */
export type IndexMethod = 'btree' | 'trigram' | 'search';

/** One index per method and keys: a text index's signature carries its method, so it never matches a sort order. */
export const indexSignatureOf = (method: IndexMethod, keys: readonly IndexKey[]): string =>
  method === 'btree' ? signatureOf(keys) : `${method}:${signatureOf(keys)}`;

/** Serialises changes to one table's indexes (view saves, add_index, drop_index), so the cap cannot be overrun. */
export function lockTableIndexes(tableId: string): Statement {
  return {
    sql: `SELECT pg_advisory_xact_lock(hashtextextended('table-indexes:' || $1::text, 0))::text AS locked`,
    params: [tableId],
  };
}

export function selectTableIndexes(tableId: string): Statement {
  return {
    sql: 'SELECT id, keys, signature, origin, state, method FROM table_indexes WHERE table_id = $1::bpchar ORDER BY id',
    params: [tableId],
  };
}

export function selectTableIndex(indexId: string): Statement {
  return {
    sql: 'SELECT id, keys, signature, origin, state, method FROM table_indexes WHERE id = $1::bpchar',
    params: [indexId],
  };
}

/** The stored orderBy of every shared view of the table: what automatic indexes serve. */
export function selectSharedOrders(tableId: string): Statement {
  return {
    sql: `SELECT definition->'query'->'orderBy' AS "orderBy" FROM saved_views WHERE table_id = $1::bpchar AND visibility = 'shared'`,
    params: [tableId],
  };
}

/**
 * A new index row in state building. An explicit one over keys an index already has adopts that index (it stays,
 * now declared) instead of building a second: the answer is whichever row holds the keys.
 */
export function insertTableIndex(
  indexId: string,
  tableId: string,
  keys: readonly IndexKey[],
  origin: IndexRow['origin'],
  method: IndexMethod = 'btree',
): Statement {
  return {
    sql: `INSERT INTO table_indexes (id, table_id, keys, signature, origin, state, method) VALUES ($1::bpchar, $2::bpchar, $3::jsonb, $4, $5, 'building', $6)
          ON CONFLICT (table_id, signature) DO UPDATE SET origin = CASE WHEN EXCLUDED.origin = 'explicit' THEN 'explicit' ELSE table_indexes.origin END
          RETURNING id, keys, signature, origin, state, method`,
    params: [indexId, tableId, JSON.stringify(keys), indexSignatureOf(method, keys), origin, method],
  };
}

export function setIndexState(indexId: string, state: IndexRow['state']): Statement {
  return { sql: 'UPDATE table_indexes SET state = $2 WHERE id = $1::bpchar RETURNING id', params: [indexId, state] };
}

export function setIndexOrigin(indexId: string, origin: IndexRow['origin']): Statement {
  return { sql: 'UPDATE table_indexes SET origin = $2 WHERE id = $1::bpchar', params: [indexId, origin] };
}

export function deleteTableIndex(indexId: string): Statement {
  return { sql: 'DELETE FROM table_indexes WHERE id = $1::bpchar RETURNING id', params: [indexId] };
}

/** The indexes over a field: PostgreSQL drops them with its column, so their rows go with the field. */
export function deleteIndexesOnField(tableId: string, fieldId: string): Statement {
  return {
    sql: `DELETE FROM table_indexes WHERE table_id = $1::bpchar AND keys @> jsonb_build_array(jsonb_build_object('fieldId', $2::text)) RETURNING id`,
    params: [tableId, fieldId],
  };
}

export function selectIndexesOnField(tableId: string, fieldId: string): Statement {
  return {
    sql: `SELECT id, keys, signature, origin, state, method FROM table_indexes
           WHERE table_id = $1::bpchar AND keys @> jsonb_build_array(jsonb_build_object('fieldId', $2::text))`,
    params: [tableId, fieldId],
  };
}

export function bumpIndexVersion(tableId: string): Statement {
  return {
    sql: 'UPDATE data_tables SET index_version = index_version + 1 WHERE id = $1::bpchar RETURNING index_version',
    params: [tableId],
  };
}

/** Removes the row of a build that will not finish (never a ready one), moving `index_version` when it did. */
export function discardBuildingIndex(indexId: string, origins: readonly IndexRow['origin'][]): Statement {
  return {
    sql: `WITH gone AS (DELETE FROM table_indexes WHERE id = $1::bpchar AND state = 'building' AND origin = ANY($2::text[]) RETURNING table_id)
          UPDATE data_tables SET index_version = index_version + 1 WHERE id IN (SELECT table_id FROM gone) RETURNING id`,
    params: [indexId, origins],
  };
}
