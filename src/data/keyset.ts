import { typeSpecOf, type FieldDefinition } from './field-types.ts';
import { columnOf } from './identifiers.ts';
import { ID, type Params } from './statement.ts';

/**
 * Keyset pagination over a user-chosen order. Every order ends with the row id, so positions are total.
 * NULLs sort as the largest value, matching PostgreSQL's defaults: last when ascending, first when descending.
 */
export interface SortKey {
  field: FieldDefinition;
  direction: 'asc' | 'desc';
}

/** Where the previous page ended: each sort key's value as read (text, or null), then the row id. */
export interface Position {
  values: (string | null)[];
  rowId: string;
}

/** One direction's ordering, NULLs included; sort indexes are built with exactly this (src/data/sort-indexes.ts). */
export const orderingOf = (direction: SortKey['direction']): string =>
  direction === 'asc' ? 'ASC NULLS LAST' : 'DESC NULLS FIRST';

export function orderByClause(keys: readonly SortKey[], alias: string): string {
  const parts = keys.map(({ field, direction }) => `${alias}.${columnOf(field.id)} ${orderingOf(direction)}`);
  return [...parts, `${alias}.id ASC`].join(', ');
}

/** The text form of each sort key in a row projection, so a page's last row can become the next cursor. */
export function sortKeyProjection(keys: readonly SortKey[], alias: string): string[] {
  return keys.map(({ field }, index) => `${alias}.${columnOf(field.id)}::text AS k${index}`);
}

function strictlyAfter(column: string, key: SortKey, value: string | null, params: Params): string {
  const cast = typeSpecOf(key.field.type).cast;
  if (key.direction === 'asc')
    return value === null ? 'false' : `(${column} > ${params.add(value, cast)} OR ${column} IS NULL)`;
  return value === null ? `${column} IS NOT NULL` : `${column} < ${params.add(value, cast)}`;
}

function equalTo(column: string, key: SortKey, value: string | null, params: Params): string {
  return value === null ? `${column} IS NULL` : `${column} = ${params.add(value, typeSpecOf(key.field.type).cast)}`;
}

/** Rows strictly after `position` in the order of `keys` then id. */
export function afterPosition(keys: readonly SortKey[], position: Position, alias: string, params: Params): string {
  let condition = `${alias}.id > ${params.add(position.rowId, ID)}`;
  for (let index = keys.length - 1; index >= 0; index -= 1) {
    const key = keys[index]!;
    const column = `${alias}.${columnOf(key.field.id)}`;
    const value = position.values[index] ?? null;
    condition = `(${strictlyAfter(column, key, value, params)} OR (${equalTo(column, key, value, params)} AND ${condition}))`;
  }
  return condition;
}

const notNull = (key: SortKey): boolean => key.field.required || Boolean(typeSpecOf(key.field.type).generated);

/**
 * Rows strictly after `position`, as disjoint ranges listed in the order of `keys` then id: each range is an
 * equality on a prefix of the keys and one bound on the next key (or on the id), so each is a single range of a
 * btree over (keys…, id) and PostgreSQL starts its scan right at the position. The OR of `afterPosition` is the
 * same set, but no index can start a scan at it (NULLs sort last ascending, so "after v" is `> v OR IS NULL`):
 * with it, page 100 reads the 99 pages before it (docs/decisions/indexes.md).
 */
export function rangesAfter(keys: readonly SortKey[], position: Position, alias: string, params: Params): string[] {
  const columns = keys.map((key) => `${alias}.${columnOf(key.field.id)}`);
  const values = keys.map((key, index) => {
    const value = position.values[index] ?? null;
    return value === null ? null : params.add(value, typeSpecOf(key.field.type).cast);
  });
  const prefix = (length: number) =>
    columns
      .slice(0, length)
      .map((column, index) => (values[index] === null ? `${column} IS NULL` : `${column} = ${values[index]}`));
  const ranges = [[...prefix(keys.length), `${alias}.id > ${params.add(position.rowId, ID)}`].join(' AND ')];
  for (let index = keys.length - 1; index >= 0; index -= 1) {
    const key = keys[index]!;
    const column = columns[index]!;
    const value = values[index] ?? null;
    const bounds =
      key.direction === 'desc'
        ? [value === null ? `${column} IS NOT NULL` : `${column} < ${value}`]
        : value === null
          ? []
          : [`${column} > ${value}`, ...(notNull(key) ? [] : [`${column} IS NULL`])];
    for (const bound of bounds) ranges.push([...prefix(index), bound].join(' AND '));
  }
  return ranges;
}
