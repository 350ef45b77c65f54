import { newId } from '../../../kernel/ids.ts';
import type { CatalogSnapshot } from './archive-format.ts';

/**
 * The ids a restore writes. `replace` keeps every id (the same database, exactly as it was); a `new-database`
 * copy sits beside the original, so its database, tables, fields, rules, keys and views need ids of their own.
 * Row ids and history stay as they were either way (they are unique per table, not globally).
 */
export type IdMap = ReadonlyMap<string, string>;

const ULID = /[0-9A-HJKMNP-TV-Z]{26}/g;

export function identityMap(): IdMap {
  return new Map();
}

export function freshIds(catalog: CatalogSnapshot, newDatabaseId: string): IdMap {
  const ids = new Map<string, string>([[catalog.database.id, newDatabaseId]]);
  for (const part of ['data_tables', 'fields', 'unique_rules', 'foreign_keys', 'saved_views']) {
    for (const row of catalog.parts[part] ?? []) ids.set(String(row.id), newId());
  }
  return ids;
}

export function mapped(ids: IdMap, id: string): string {
  return ids.get(id) ?? id;
}

/** Every id in the JSON of catalog rows (columns, field lists, view definitions, rule filters) mapped at once. */
export function remapJson(json: string, ids: IdMap): string {
  return ids.size === 0 ? json : json.replace(ULID, (id) => ids.get(id) ?? id);
}
