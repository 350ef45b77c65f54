import { typeSpecOf, type FieldDefinition } from '../../../data/field-types.ts';
import type { FilterExpression } from '../../../data/filter.ts';
import { compileFilter } from '../../../data/filter-sql.ts';
import { columnOf, historyTableOf, rowsTableOf } from '../../../data/identifiers.ts';
import { Params, type Statement } from '../../../data/statement.ts';
import type { ForeignKeyDefinition, TableSchema, UniqueRuleDefinition } from '../../../catalog/table-schema.ts';
import { isId } from '../../../kernel/ids.ts';

/**
 * An import's staging area: the file's rows as typed columns (`wds_jobs.s_<job>`) and the problems found
 * (`wds_jobs.p_<job>`). Uniqueness (within the file and against existing rows) and foreign keys are then checked
 * by set-based SQL over whole batches, with the same equality the table's own indexes use, and the import inserts
 * from here. Regular (logged) tables: they must survive a crash as the journal that points into them does.
 */
function jobName(prefix: 's' | 'p', jobId: string): string {
  if (!isId(jobId)) throw new Error(`Not a job id: ${jobId}`);
  return `wds_jobs.${prefix}_${jobId.toLowerCase()}`;
}

export const stagingOf = (jobId: string) => jobName('s', jobId);
export const problemsOf = (jobId: string) => jobName('p', jobId);

/** The fields an import can write: every field but the generated ones. */
export function importableFields(schema: TableSchema): FieldDefinition[] {
  return schema.fields.filter((field) => !typeSpecOf(field.type).generated);
}

export function createStaging(jobId: string, fields: readonly FieldDefinition[]): Statement[] {
  const columns = fields.map((field) => `${columnOf(field.id)} ${typeSpecOf(field.type).column(field.options)}`);
  return [
    { sql: `DROP TABLE IF EXISTS ${stagingOf(jobId)}, ${problemsOf(jobId)}`, params: [] },
    {
      sql: `CREATE TABLE ${stagingOf(jobId)} (line integer PRIMARY KEY, ok boolean NOT NULL, cells jsonb NOT NULL${columns.map((column) => `, ${column}`).join('')})`,
      params: [],
    },
    {
      sql: `CREATE TABLE ${problemsOf(jobId)} (seq bigserial PRIMARY KEY, line integer NOT NULL, label text, field_id char(26), code text NOT NULL, message text NOT NULL)`,
      params: [],
    },
    { sql: `CREATE INDEX ON ${problemsOf(jobId)} (line)`, params: [] },
  ];
}

export function dropStaging(jobId: string): Statement {
  return { sql: `DROP TABLE IF EXISTS ${stagingOf(jobId)}, ${problemsOf(jobId)}`, params: [] };
}

export interface StagedRow {
  line: number;
  ok: boolean;
  /** Canonical JSON of each mapped field's value (null for an empty or invalid cell). */
  cells: Record<string, unknown>;
  /** `cells` as JSON text, made once for the row size check and the staged jsonb. */
  json: string;
}

const COPY_ESCAPE = /[\\\n\r\t]/g;
const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** A column in COPY's text format: the characters that end a column or a row, and the backslash, escaped. */
function copyText(text: string): string {
  return text.replace(COPY_ESCAPE, (character) => COPY_ESCAPES[character]!);
}

/** A text[] literal: every element quoted, so no choice's commas, braces or spaces need thought. */
function arrayLiteral(values: readonly unknown[]): string {
  const element = (value: unknown) =>
    value === null
      ? 'NULL'
      : `"${(typeof value === 'string' ? value : JSON.stringify(value)).replace(/[\\"]/g, '\\$&')}"`;
  return `{${values.map(element).join(',')}}`;
}

/**
 * A cell in its column's type, as text that column's input function reads: the text `->>` gives of the cell's
 * canonical JSON (a string as it is, any other value as JSON), a json cell as JSON, a multiSelect as an array.
 */
function copyCell(field: FieldDefinition, value: unknown): string {
  if (value === null || value === undefined) return '\\N';
  if (field.type === 'multiSelect') return Array.isArray(value) ? copyText(arrayLiteral(value)) : '\\N';
  if (field.type === 'json' || typeof value !== 'string') return copyText(JSON.stringify(value));
  return copyText(value);
}

/**
 * Staging through COPY: each row's canonical cells once as jsonb and once in the typed columns. The values were
 * validated already, so every conversion succeeds. COPY parses its text straight into the column types; the
 * INSERT it replaced parsed one jsonb document per batch and took every typed value out of it again.
 */
export function copyStaging(jobId: string, fields: readonly FieldDefinition[]): string {
  return `COPY ${stagingOf(jobId)} (line, ok, cells${fields.map((field) => `, ${columnOf(field.id)}`).join('')}) FROM STDIN`;
}

/** Rows as `copyStaging`'s input. */
export function copyRows(fields: readonly FieldDefinition[], rows: readonly StagedRow[]): string {
  let text = '';
  for (const row of rows) {
    text += `${row.line}\t${row.ok ? 't' : 'f'}\t${copyText(row.json)}`;
    for (const field of fields) text += `\t${copyCell(field, row.cells[field.id])}`;
    text += '\n';
  }
  return text;
}

export interface Problem {
  line: number;
  label: string | null;
  fieldId: string | null;
  code: string;
  message: string;
}

export function insertProblems(jobId: string, problems: readonly Problem[]): Statement {
  return {
    sql: `INSERT INTO ${problemsOf(jobId)} (line, label, field_id, code, message)
          SELECT line, label, field_id, code, message
            FROM jsonb_to_recordset($1::jsonb) AS r(line integer, label text, field_id text, code text, message text)`,
    params: [
      JSON.stringify(
        problems.map((problem) => ({
          line: problem.line,
          label: problem.label,
          field_id: problem.fieldId,
          code: problem.code,
          message: problem.message,
        })),
      ),
    ],
  };
}

/** A constraint the file's rows must meet, checked once all rows are staged. */
export type Check =
  | { kind: 'unique'; rule: UniqueRuleDefinition; fields: FieldDefinition[]; label: string }
  | { kind: 'foreignKey'; key: ForeignKeyDefinition; fields: FieldDefinition[]; label: string };

/**
 * The checks an import must pass: unique rules and foreign keys over mapped fields only. A rule or key with an
 * unmapped field would see an empty value there, which both exempt (as the table's own constraints do); a rule
 * with a generated field always holds for new rows.
 */
export function checksFor(
  schema: TableSchema,
  mappedFieldIds: ReadonlySet<string>,
  labelOf: (fieldId: string) => string,
): Check[] {
  const byId = schema.fieldsById;
  const allMapped = (fieldIds: readonly string[]) => fieldIds.every((id) => mappedFieldIds.has(id));
  const unique: Check[] = schema.uniqueRules
    .filter((rule) => allMapped(rule.fieldIds))
    .map((rule) => ({
      kind: 'unique',
      rule,
      fields: rule.fieldIds.map((id) => byId.get(id)!),
      label: labelOf(rule.fieldIds[0]!),
    }));
  const keys: Check[] = schema.foreignKeys
    .filter((key) => allMapped(key.fieldIds))
    .map((key) => ({
      kind: 'foreignKey',
      key,
      fields: key.fieldIds.map((id) => byId.get(id)!),
      label: labelOf(key.fieldIds[0]!),
    }));
  return [...unique, ...keys];
}

/** An index per unique check, so the within-file duplicate probe is an index lookup per row. */
export function indexStaging(jobId: string, checks: readonly Check[]): Statement[] {
  return checks
    .filter((check) => check.kind === 'unique')
    .map((check) => ({
      sql: `CREATE INDEX ON ${stagingOf(jobId)} (${check.fields.map((field) => columnOf(field.id)).join(', ')}) WHERE ok`,
      params: [],
    }));
}

/** Statistics for the checks' plans, on the columns they use only (a full ANALYZE cost more than the checks). */
export function analyzeStaging(jobId: string, checks: readonly Check[]): Statement {
  const columns = new Set([
    'line',
    'ok',
    ...checks.flatMap((check) => check.fields.map((field) => columnOf(field.id))),
  ]);
  return { sql: `ANALYZE ${stagingOf(jobId)} (${[...columns].join(', ')})`, params: [] };
}

function notNull(alias: string, fields: readonly FieldDefinition[]): string {
  return fields.map((field) => `${alias}.${columnOf(field.id)} IS NOT NULL`).join(' AND ');
}

function sameKey(
  left: string,
  leftFields: readonly FieldDefinition[],
  right: string,
  rightFieldIds: readonly string[],
): string {
  return leftFields
    .map((field, index) => `${right}.${columnOf(rightFieldIds[index]!)} = ${left}.${columnOf(field.id)}`)
    .join(' AND ');
}

function predicate(params: Params, schema: TableSchema, where: unknown, alias: string): string {
  if (where === null || where === undefined) return 'true';
  return compileFilter(where as FilterExpression, schema.fields, (value, cast) => params.add(value, cast), alias);
}

/**
 * Records a problem for each staged, otherwise valid row in [fromLine, toLine) that breaks the check: a duplicate
 * of an existing row or of an earlier line of the file, or a reference to a row that does not exist.
 *
 * A unique check is set-wise: the earliest candidate line of each key (a window over the whole file, so a
 * duplicate of a line before the window is still found) and one semi-join of the keys that are first in the file
 * against the table, which the planner runs as a hash join or as probes of the rule's index, whichever is cheaper,
 * instead of two correlated lookups per line (one into the staging index, one into the table's).
 */
export function runCheck(
  jobId: string,
  schema: TableSchema,
  check: Check,
  fromLine: number,
  toLine: number,
  onlyClean = false,
): Statement {
  const params = new Params();
  const staging = stagingOf(jobId);
  // `onlyClean` re-checks rows about to be inserted; rows already reported are skipped, so nothing is reported twice.
  const clean = onlyClean ? ` AND NOT EXISTS (SELECT 1 FROM ${problemsOf(jobId)} p WHERE p.line = s.line)` : '';
  const from = params.add(fromLine, 'integer');
  const to = params.add(toLine, 'integer');
  const window = `s.ok AND s.line >= ${from} AND s.line < ${to} AND ${notNull('s', check.fields)}${clean}`;
  const label = params.add(check.label, 'text');
  const fieldId = params.add(check.fields[0]!.id, 'text');
  if (check.kind === 'unique') {
    const fieldIds = check.fields.map((field) => field.id);
    const columns = check.fields.map((field) => `s.${columnOf(field.id)}`).join(', ');
    const table = rowsTableOf(schema.databaseId, schema.tableId);
    const names = check.fields.map((field) => field.name).join(', ');
    const existing = params.add(`an existing row already has these values of ${names}`, 'text');
    const sql = `INSERT INTO ${problemsOf(jobId)} (line, label, field_id, code, message)
      WITH candidate AS MATERIALIZED (
        SELECT s.line, ${columns}, min(s.line) OVER (PARTITION BY ${columns}) AS first
          FROM ${staging} s
         WHERE s.ok AND ${notNull('s', check.fields)} AND ${predicate(params, schema, check.rule.where, 's')}
      )
      SELECT s.line, ${label}, ${fieldId}, 'UNIQUE_CONFLICT',
             ${params.add('line ', 'text')} || s.first::text || ${params.add(` already has these values of ${names}`, 'text')}
        FROM candidate s
       WHERE s.first < s.line AND s.line >= ${from} AND s.line < ${to}${clean}
      UNION ALL
      SELECT s.line, ${label}, ${fieldId}, 'UNIQUE_CONFLICT', ${existing}
        FROM candidate s
       WHERE s.first = s.line AND s.line >= ${from} AND s.line < ${to}${clean}
         AND EXISTS (SELECT 1 FROM ${table} r WHERE ${sameKey('s', check.fields, 'r', fieldIds)}
                        AND ${predicate(params, schema, check.rule.where, 'r')})`;
    return { sql, params: params.values };
  }
  const referenced = rowsTableOf(schema.databaseId, check.key.referencedTableId);
  const sql = `INSERT INTO ${problemsOf(jobId)} (line, label, field_id, code, message)
    SELECT s.line, ${label}, ${fieldId}, 'FOREIGN_KEY_CONFLICT',
           ${params.add(`no row of ${check.key.referencedTableName} has these values of ${check.key.referencedFieldNames.join(', ')}`, 'text')}
      FROM ${staging} s
     WHERE ${window}
       AND NOT EXISTS (SELECT 1 FROM ${referenced} x WHERE ${sameKey('s', check.fields, 'x', check.key.referencedFieldIds)})`;
  return { sql, params: params.values };
}

export function lastLine(jobId: string): Statement {
  return { sql: `SELECT coalesce(max(line), 0) AS last FROM ${stagingOf(jobId)}`, params: [] };
}

/**
 * Every line the report names is an invalid row, staged or not: a structural CSV error is reported on a line
 * that was never staged, and counts as a row too, so totalRows = validRows + invalidRows always holds.
 */
export function countOutcome(jobId: string): Statement {
  return {
    sql: `SELECT (SELECT count(*) FROM ${stagingOf(jobId)})::int
                   + (SELECT count(DISTINCT p.line) FROM ${problemsOf(jobId)} p
                       WHERE NOT EXISTS (SELECT 1 FROM ${stagingOf(jobId)} s WHERE s.line = p.line))::int AS total,
                 (SELECT count(DISTINCT line) FROM ${problemsOf(jobId)})::int AS invalid`,
    params: [],
  };
}

export function selectPreview(jobId: string, limit: number): Statement {
  return {
    sql: `SELECT s.line, s.cells, NOT EXISTS (SELECT 1 FROM ${problemsOf(jobId)} p WHERE p.line = s.line) AS valid
            FROM ${stagingOf(jobId)} s ORDER BY s.line LIMIT ${Number(limit)}`,
    params: [],
  };
}

export function selectProblems(jobId: string, limit: number): Statement {
  return {
    sql: `SELECT line, label, field_id, code, message FROM ${problemsOf(jobId)} ORDER BY line, seq LIMIT ${Number(limit)}`,
    params: [],
  };
}

/** Lines ready to insert: staged without problems, from `fromLine` on, in file order. */
export function selectInsertable(jobId: string, fromLine: number, limit: number): Statement {
  return {
    sql: `SELECT s.line FROM ${stagingOf(jobId)} s
           WHERE s.ok AND s.line >= $1::integer AND NOT EXISTS (SELECT 1 FROM ${problemsOf(jobId)} p WHERE p.line = s.line)
           ORDER BY s.line LIMIT ${Number(limit)}`,
    params: [fromLine],
  };
}

export interface ImportActor {
  id: string;
  kind: string;
  name: string;
}

/**
 * Inserts the staged rows of `lines` under the given row ids, with the initial history of every cell (generated
 * autoNumber values included), in one statement. A row that meets a unique value written since the check is
 * skipped (ON CONFLICT DO NOTHING); the caller reports the lines whose id did not come back.
 */
export function insertStaged(
  jobId: string,
  schema: TableSchema,
  rows: { id: string; line: number }[],
  mutationId: string,
  actor: ImportActor,
): Statement {
  const params = new Params();
  const importable = importableFields(schema);
  const generated = schema.fields.filter((field) => typeSpecOf(field.type).generated);
  const columns = importable.map((field) => columnOf(field.id));
  const empty = Object.fromEntries(schema.fields.map((field) => [field.id, null]));
  const ids = params.add(
    rows.map((row) => row.id),
    'text[]',
  );
  const lines = params.add(
    rows.map((row) => row.line),
    'integer[]',
  );
  const generatedCells = generated.map(
    (field) => `jsonb_build_object(${params.add(field.id, 'text')}, to_jsonb(ins.${columnOf(field.id)}))`,
  );
  const cells = [params.add(JSON.stringify(empty), 'jsonb'), 'src.cells', ...generatedCells].join(' || ');
  const sql = `WITH src AS (
      SELECT x.id, s.* FROM unnest(${ids}, ${lines}) AS x(id, line) JOIN ${stagingOf(jobId)} s ON s.line = x.line
    ), ins AS (
      INSERT INTO ${rowsTableOf(schema.databaseId, schema.tableId)} (id, created_at, updated_at${columns.map((column) => `, ${column}`).join('')})
      SELECT id, now(), now()${columns.map((column) => `, ${column}`).join('')} FROM src ORDER BY line
      ON CONFLICT DO NOTHING
      RETURNING id, version${generated.map((field) => `, ${columnOf(field.id)}`).join('')}
    ), history AS (
      INSERT INTO ${historyTableOf(schema.databaseId, schema.tableId)}
        (row_id, version, field_id, operation, value, mutation_id, actor_id, actor_kind, actor_name, changed_at)
      SELECT ins.id, ins.version, cell.key, 'create', cell.value, ${params.add(mutationId, 'text')}, ${params.add(actor.id, 'text')},
             ${params.add(actor.kind, 'text')}, ${params.add(actor.name, 'text')}, now()
        FROM ins JOIN src ON src.id = ins.id CROSS JOIN LATERAL jsonb_each(${cells}) AS cell
    )
    SELECT id FROM ins`;
  return { sql, params: params.values };
}

/**
 * Undoes the inserts of an import that stopped (cancelled, or failed on its last attempt): deletes the rows whose
 * cells the job created, appends a `delete` history entry for each of those cells (history is append-only, as for
 * a row delete), and takes them off the table's row_count. A retry or a new import of the same preview then starts
 * from a table without them instead of inserting them a second time. Run again, it finds nothing left to delete.
 * mutation_id is not indexed: this scans the table's history, which only a stopped import pays for.
 */
export function removeImported(jobId: string, databaseId: string, tableId: string, actor: ImportActor): Statement {
  const history = historyTableOf(databaseId, tableId);
  return {
    sql: `WITH created AS (
            SELECT row_id, array_agg(field_id) AS field_ids FROM ${history}
             WHERE mutation_id = $1::bpchar AND operation = 'create' GROUP BY row_id
          ), removed AS (
            DELETE FROM ${rowsTableOf(databaseId, tableId)} r USING created c WHERE r.id = c.row_id
            RETURNING r.id, r.version + 1 AS version, c.field_ids
          ), logged AS (
            INSERT INTO ${history} (row_id, version, field_id, operation, value, mutation_id, actor_id, actor_kind, actor_name, changed_at)
            SELECT removed.id, removed.version, cell.field_id, 'delete', 'null'::jsonb, $1::bpchar, $2::bpchar, $3, $4, now()
              FROM removed CROSS JOIN LATERAL unnest(removed.field_ids) AS cell(field_id)
          ), counted AS (
            UPDATE public.data_tables SET row_count = row_count - (SELECT count(*) FROM removed) WHERE id = $5::bpchar
          )
          SELECT count(*)::int AS removed FROM removed`,
    params: [jobId, actor.id, actor.kind, actor.name, tableId],
  };
}
