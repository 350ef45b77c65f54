import type { FilterExpression } from './filter.ts';
import { compileFilter } from './filter-sql.ts';
import { typeSpecOf, type FieldDefinition } from './field-types.ts';
import { columnOf, rowsTableOf } from './identifiers.ts';
import { orderByClause, type SortKey } from './keyset.ts';
import { jsonObject, jsonValue, type Statement } from './statement.ts';

/**
 * Export SQL: one `COPY (SELECT …) TO STDOUT` per table, so PostgreSQL formats every value and the worker only
 * moves bytes (issue 15 measured the COPY path against the raw `COPY` it is compared with). Each row is one line:
 * a CSV record, or one JSON document (JSONL rows, XLSX cells as a JSON array).
 *
 * COPY takes no bound parameters. Filter values and JSONL key names are therefore handed over as transaction-local
 * settings (`SET LOCAL`, the values bound and quoted by the server) and read back with `current_setting(…)`; the
 * SQL text still holds only IDs, casts and constants (DESIGN §2).
 */
export type ExportFormat = 'csv' | 'jsonl' | 'xlsx';

/** The documented multiSelect separator of CSV and XLSX cells. */
export const MULTI_SELECT_SEPARATOR = ', ';

/** Settings this transaction binds, in order: `[name, value]` pairs, each a `SET LOCAL name = value`. */
export class Settings {
  readonly values: [string, string][] = [];

  add(value: string): string {
    const name = `wds_export.v${this.values.length}`;
    this.values.push([name, value]);
    return `current_setting('${name}')`;
  }

  /**
   * One statement answering the `SET LOCAL` commands that bind every setting (or null when there are none), one
   * `command` per row, the value quoted by the server (`%L`). SET LOCAL rather than `set_config`: on Citus the COPY
   * runs on a worker, and `citus.propagate_set_commands = local` (src/db/prisma.ts) carries SET LOCAL there, never
   * a function call (docs/decisions/citus.md).
   */
  statement(): Statement | null {
    if (this.values.length === 0) return null;
    return {
      sql: `SELECT format('SET LOCAL %s = %L', s.name, s.value) AS command
              FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS s(name, value, position) ORDER BY s.position`,
      params: [this.values.map(([name]) => name), this.values.map(([, value]) => value)],
    };
  }
}

/**
 * jsonb's text form puts a space after `:` and `,`; this removes every space outside string literals, giving
 * compact JSON (JSON.stringify's form). A string literal is matched first, so spaces inside strings stay.
 */
const compactJson = (text: string) => `regexp_replace(${text}, '("(?:[^"\\\\]|\\\\.)*")| +', '\\1', 'g')`;

/**
 * A multiSelect cell as text: the choices joined by ", ", unless that could not be read back exactly (a choice
 * holding a comma or edge whitespace, a first choice starting with `[`), then the JSON array the importer also reads.
 */
function multiSelectText(column: string): string {
  return `CASE WHEN ${column} IS NULL THEN NULL
    WHEN ${column}[1] LIKE '[%' OR EXISTS (SELECT 1 FROM unnest(${column}) AS c(v) WHERE c.v ~ '(,|^\\s|\\s$)')
      THEN array_to_json(${column})::text
    ELSE array_to_string(${column}, '${MULTI_SELECT_SEPARATOR}') END`;
}

/**
 * The session settings every export statement assumes (set by the job's snapshot transaction): dates print as
 * `YYYY-MM-DD` with a plain cast, and timestamps are formatted in UTC without an `AT TIME ZONE` per value. Measured
 * on 300,000 rows: `to_char(date)` and `AT TIME ZONE` made the COPY ~2× the raw one; with these, ~1.5×.
 */
export const EXPORT_SESSION = ["SET LOCAL TimeZone = 'UTC'", "SET LOCAL DateStyle = 'ISO, YMD'"];

const utcText = (column: string) => `to_char(${column}, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * A cell as the text of a CSV field (NULL stays NULL: an empty, unquoted field). Integers, numbers and dates go to
 * COPY as they are: its output for them is exactly their text form under EXPORT_SESSION, and skipping the cast to
 * text saves a copy of every value (about 5% of the COPY on the benchmark's table).
 */
export function textCell(field: FieldDefinition, alias: string): string {
  const column = `${alias}.${columnOf(field.id)}`;
  switch (field.type) {
    case 'integer':
    case 'autoNumber':
    case 'date':
      return column;
    case 'datetime':
      return utcText(column);
    case 'number':
      // Written with the field's scale (1.50 in numeric(15,2)): the exact stored decimal, and the cheapest form.
      return column;
    case 'multiSelect':
      return multiSelectText(column);
    case 'json':
      return compactJson(`${column}::text`);
    default:
      return typeSpecOf(field.type).read(column);
  }
}

/** A cell as a value `to_json` turns into its JSON type: numbers, booleans, arrays and json keep theirs. */
function jsonCell(field: FieldDefinition, alias: string): string {
  const column = `${alias}.${columnOf(field.id)}`;
  switch (field.type) {
    case 'integer':
    case 'autoNumber':
    case 'boolean':
    case 'multiSelect':
    case 'json':
      return column;
    case 'number':
      // As the rows API answers it: the shortest exact form (1.5, not 1.50).
      return `trim_scale(${column})`;
    case 'date':
      return `${column}::text`;
    case 'datetime':
      return utcText(column);
    default:
      return typeSpecOf(field.type).read(column);
  }
}

/** A cell as compact JSON text (`null` when empty); json cells lose jsonb's spaces after `:` and `,`. */
function jsonCellText(field: FieldDefinition, alias: string): string {
  const json = jsonValue(jsonCell(field, alias));
  return field.type === 'json' ? compactJson(json) : json;
}

export interface ExportQuery {
  databaseId: string;
  tableId: string;
  /** Every field of the table (the filter may name fields that are not exported). */
  fields: readonly FieldDefinition[];
  /** The exported fields, in column order. */
  columns: readonly FieldDefinition[];
  where: FilterExpression | null;
  keys: readonly SortKey[];
}

function fromWhere(query: ExportQuery, settings: Settings): string {
  const where = query.where
    ? `WHERE ${compileFilter(query.where, query.fields, (value, cast) => (value === null ? `NULL::${cast}` : `${settings.add(String(value))}::${cast}`), 'r')}`
    : '';
  return `FROM ${rowsTableOf(query.databaseId, query.tableId)} r ${where}`;
}

export interface CopyPlan {
  /** Binds the settings the COPY reads (run first, in the same transaction). */
  settings: Statement | null;
  /** Counts the rows the COPY will write (the progress total), under the same settings. */
  count: string;
  copy: string;
}

function plan(query: ExportQuery, settings: Settings, projection: string, copyOptions: string): CopyPlan {
  const from = fromWhere(query, settings);
  const order = `ORDER BY ${orderByClause(query.keys, 'r')}`;
  return {
    settings: settings.statement(),
    count: `SELECT count(*)::bigint AS rows ${from}`,
    copy: `COPY (SELECT ${projection} ${from} ${order}) TO STDOUT WITH (${copyOptions})`,
  };
}

/**
 * Lines that are whole JSON documents. JSON escapes every control character, so no line holds a raw newline, a
 * 0x01 or a 0x02: with those as CSV quote and delimiter, COPY writes each document exactly as it is.
 */
const RAW_LINES = "FORMAT csv, QUOTE E'\\x01', DELIMITER E'\\x02'";

/**
 * OWASP's CSV injection defence: a text cell that begins with `=`, `+`, `-`, `@`, a tab or a carriage return is
 * written with a leading `'`, so a spreadsheet shows it as text instead of running it as a formula. Only cells of
 * text-valued types: numbers, dates and JSON keep their exact form (-5 is a number, not a formula).
 */
export const FORMULA_STARTS = ['=', '+', '-', '@', '\t', '\r'] as const;
export const FORMULA_PREFIX = "'";
const TEXT_VALUED: ReadonlySet<string> = new Set(['text', 'longText', 'email', 'url', 'select', 'multiSelect']);

function formulaSafe(text: string): string {
  return `CASE WHEN left(${text}, 1) IN ('=', '+', '-', '@', E'\\t', E'\\r') THEN '''' || ${text} ELSE ${text} END`;
}

/** CSV records of the exported fields (no header: the field names are written by the job); see FORMULA_STARTS. */
export function csvCopy(query: ExportQuery, escapeFormulas = true): CopyPlan {
  const cell = (field: FieldDefinition) =>
    escapeFormulas && TEXT_VALUED.has(field.type) ? formulaSafe(textCell(field, 'r')) : textCell(field, 'r');
  const projection = query.columns.length ? query.columns.map(cell).join(', ') : "''";
  return plan(query, new Settings(), projection, 'FORMAT csv');
}

/**
 * JSONL: `{id, version, values}` per row, `values` keyed by field id, or by field name (`byName`; names are user
 * text, so they travel as settings). Concatenated JSON text (`jsonObject`), not `json_build_object`: a function
 * takes at most 100 arguments, which failed every export of more than 50 fields, and concatenation is the cheaper.
 */
export function jsonlCopy(query: ExportQuery, byName: boolean): CopyPlan {
  const settings = new Settings();
  const pairs = query.columns.map(
    (field, index) =>
      `'${index === 0 ? '' : ','}' || ${byName ? `to_json(${settings.add(field.name)})::text` : `'"${field.id}"'`} || ':' || ${jsonCellText(field, 'r')}`,
  );
  const values = pairs.length ? `'{' || ${pairs.join(' || ')} || '}'` : `'{}'`;
  const document = jsonObject([
    ['id', jsonValue('r.id')],
    ['version', jsonValue('r.version::text')],
    ['values', values],
  ]);
  return plan(query, settings, document, RAW_LINES);
}

/** XLSX: each row as a JSON array of its cells, typed by the job (numbers, booleans, dates). */
export function arrayCopy(query: ExportQuery): CopyPlan {
  const cells = query.columns.map((field) =>
    field.type === 'json' ? jsonValue(textCell(field, 'r')) : jsonCellText(field, 'r'),
  );
  return plan(query, new Settings(), `'[' || ${cells.length ? cells.join(" || ',' || ") : "''"} || ']'`, RAW_LINES);
}
