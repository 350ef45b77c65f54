/** A statement and its bound values. Data-plane builders return these; only IDs ever shape the SQL text. */
export interface Statement {
  sql: string;
  params: unknown[];
}

/** Collects bound values and hands out `$n::cast` placeholders, so a builder never inlines a value. */
export class Params {
  readonly values: unknown[] = [];

  add(value: unknown, cast?: string): string {
    this.values.push(value);
    return cast ? `$${this.values.length}::${cast}` : `$${this.values.length}`;
  }
}

/**
 * The cast for an ID compared with a `char(26)` column. It must be the column's own type: `char = text` compares
 * as text, which casts the column and rules out its index (a row lookup by id became a sequential scan).
 */
export const ID = 'bpchar';

/** Renders a timestamptz column in the spec's UTC format (2.1), independent of the session's TimeZone. */
export function utcTimestamp(column: string): string {
  return `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
}
