import { typeSpecOf, type FieldDefinition } from './field-types.ts';
import { columnOf } from './identifiers.ts';
import { ID, type Params } from './sql.ts';

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

export function orderByClause(keys: readonly SortKey[], alias: string): string {
  const parts = keys.map(({ field, direction }) =>
    `${alias}.${columnOf(field.id)} ${direction === 'asc' ? 'ASC NULLS LAST' : 'DESC NULLS FIRST'}`);
  return [...parts, `${alias}.id ASC`].join(', ');
}

/** The text form of each sort key in a row projection, so a page's last row can become the next cursor. */
export function sortKeyProjection(keys: readonly SortKey[], alias: string): string[] {
  return keys.map(({ field }, index) => `${alias}.${columnOf(field.id)}::text AS k${index}`);
}

function strictlyAfter(column: string, key: SortKey, value: string | null, params: Params): string {
  const cast = typeSpecOf(key.field.type).cast;
  if (key.direction === 'asc') return value === null ? 'false' : `(${column} > ${params.add(value, cast)} OR ${column} IS NULL)`;
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
