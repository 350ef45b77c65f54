import type { FieldProblem } from '../kernel/errors.ts';
import { typeSpecOf, type FieldDefinition } from './field-types.ts';
import { resolveField } from './filter.ts';
import { columnOf, rowsTableOf, schemaOf, sortIndexOf } from './identifiers.ts';
import { orderingOf, type SortKey } from './keyset.ts';
import type { Statement } from './statement.ts';
import { foldedField, searchDocument } from './search.ts';

/**
 * Sort indexes (issue 14): a btree over a table's sort keys then the row id, with each key's NULL placement exactly
 * as row pages order (`orderingOf`), so `ORDER BY … LIMIT` and the keyset ranges read it in order. Built and
 * dropped CONCURRENTLY, outside any transaction, so row reads and writes go on meanwhile.
 */
export interface IndexKey {
  fieldId: string;
  direction: SortKey['direction'];
}

/** At most this many sort indexes per table, declared and automatic together (each one slows every row write). */
export const MAX_INDEXES_PER_TABLE = 8;

/** One order, one index: the keys as `<fieldId>:<direction>,…` (the catalog's unique `signature`). */
export const signatureOf = (keys: readonly IndexKey[]): string =>
  keys.map((key) => `${key.fieldId}:${key.direction}`).join(',');

/** btree entries must fit a third of a page (2704 bytes): the keys get what the row id (26) and headers leave. */
export const INDEX_KEY_BUDGET_BYTES = 2_550;

/**
 * The index keys of an order (`[{field, direction}]`, fields by id or exact name), with every reason it cannot be
 * indexed at its position: an unknown or repeated field, a type without a btree order (longText, multiSelect,
 * json), or keys that could exceed a btree entry (text counts 4 bytes per character of maxLength).
 */
export function indexKeysOf(
  fields: readonly FieldDefinition[],
  order: readonly { field: string; direction: IndexKey['direction'] }[],
  path: (string | number)[],
): { keys: IndexKey[]; problems: FieldProblem[] } {
  const problems: FieldProblem[] = [];
  const keys: IndexKey[] = [];
  let bytes = 0;
  order.forEach((item, index) => {
    const field = resolveField(fields, item.field);
    const at = [...path, index, 'field'];
    if (!field) problems.push({ path: at, message: 'is not a field of this table' });
    else if (keys.some((key) => key.fieldId === field.id))
      problems.push({ path: at, message: 'names a field twice', fieldId: field.id });
    else {
      const size = typeSpecOf(field.type).indexBytes(field.options);
      if (size === null)
        problems.push({ path: at, message: `${field.type} fields cannot be indexed`, fieldId: field.id });
      else bytes += size;
      keys.push({ fieldId: field.id, direction: item.direction });
    }
  });
  if (problems.length === 0 && bytes > INDEX_KEY_BUDGET_BYTES) {
    problems.push({
      path,
      message: `these fields can hold ${bytes} bytes together; an index may hold at most ${INDEX_KEY_BUDGET_BYTES} (lower a text maxLength)`,
    });
  }
  return { keys, problems };
}

/** The keys a shared view's stored orderBy needs an index for, or null when it has none or it cannot be indexed. */
export function viewIndexKeys(fields: readonly FieldDefinition[], orderBy: unknown): IndexKey[] | null {
  if (!Array.isArray(orderBy) || orderBy.length === 0) return null;
  const items = orderBy.filter(
    (item): item is { field: string; direction: IndexKey['direction'] } =>
      typeof item?.field === 'string' && (item.direction === 'asc' || item.direction === 'desc'),
  );
  if (items.length !== orderBy.length) return null;
  const { keys, problems } = indexKeysOf(fields, items, []);
  return problems.length === 0 ? keys : null;
}

const plain = (sql: string): Statement => ({ sql, params: [] });

export function createSortIndex(
  databaseId: string,
  tableId: string,
  indexId: string,
  keys: readonly IndexKey[],
): Statement {
  const columns = keys.map((key) => `${columnOf(key.fieldId)} ${orderingOf(key.direction)}`);
  return plain(
    `CREATE INDEX CONCURRENTLY ${sortIndexOf(indexId)} ON ${rowsTableOf(databaseId, tableId)} (${[...columns, 'id ASC'].join(', ')})`,
  );
}

/**
 * A GIN trigram index over folded text (issue 28): one field's (`trigram`, for similar rows) or the search document
 * of `fields` in their order (`search`), written exactly as src/data/search.ts writes them in queries, so PostgreSQL
 * matches the two. Built CONCURRENTLY, as sort indexes are; dropped with `dropSortIndex`.
 */
export function createTextIndex(
  databaseId: string,
  tableId: string,
  indexId: string,
  method: 'trigram' | 'search',
  fields: readonly FieldDefinition[],
): Statement {
  const expression = method === 'trigram' ? foldedField(fields[0]!, null) : searchDocument(fields, null);
  return plain(
    `CREATE INDEX CONCURRENTLY ${sortIndexOf(indexId)} ON ${rowsTableOf(databaseId, tableId)} USING gin ((${expression}) public.gin_trgm_ops)`,
  );
}

export function dropSortIndex(databaseId: string, indexId: string): Statement {
  return plain(`DROP INDEX CONCURRENTLY IF EXISTS ${schemaOf(databaseId)}.${sortIndexOf(indexId)}`);
}

/** `valid` false: a build that was interrupted (or failed) left an INVALID index behind; no row: none at all. */
export function sortIndexState(databaseId: string, indexId: string): Statement {
  return {
    sql: `SELECT i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
           WHERE c.relname = $1 AND c.relnamespace = $2::regnamespace`,
    params: [sortIndexOf(indexId).slice(1, -1), schemaOf(databaseId).slice(1, -1)],
  };
}
