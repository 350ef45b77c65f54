import { typeSpecOf, type FieldDefinition, type FieldOptions } from './field-types.ts';
import { columnOf, foreignKeyConstraintOf, historyTableOf, rowsTableOf, schemaOf, sequenceOf } from './identifiers.ts';
import type { Statement } from './statement.ts';

/**
 * DDL for the data plane (DESIGN §2). Identifiers come from src/data/identifiers.ts; DDL cannot take bound
 * parameters, so the only values in it are integers we produced (sequence bounds) and literals that PostgreSQL
 * itself quoted (`quoteLiterals`, for conditional unique rules).
 */

const plain = (sql: string): Statement => ({ sql, params: [] });

/**
 * The schema of a workspace database and its change feed (`changes`, `change_commits`, `change_feed`, created by
 * `wds_create_change_feed` of the migration that also gave existing databases theirs): the feed lives beside the
 * tables it records, so its triggers write nothing outside the schema (docs/decisions/changes.md).
 */
export function createDatabaseSchema(databaseId: string): Statement[] {
  return [
    plain(`CREATE SCHEMA ${schemaOf(databaseId)}`),
    { sql: 'SELECT public.wds_create_change_feed($1::bpchar)', params: [databaseId] },
  ];
}

function integerLiteral(value: number): string {
  if (!Number.isSafeInteger(value)) throw new Error(`Not a safe integer: ${value}`);
  return String(value);
}

function columnDefinition(databaseId: string, field: FieldDefinition): string {
  const spec = typeSpecOf(field.type);
  const parts = [columnOf(field.id), spec.column(field.options)];
  if (spec.generated) parts.push(`NOT NULL DEFAULT nextval('${sequenceOf(databaseId, field.id)}')`);
  else if (field.required) parts.push('NOT NULL');
  return parts.join(' ');
}

function createSequence(databaseId: string, field: FieldDefinition): Statement {
  const options = field.options as FieldOptions<'autoNumber'>;
  // NO CYCLE: an exhausted sequence raises 2200H, reported as AUTO_INCREMENT_EXHAUSTED, never reuses a number.
  return plain(
    `CREATE SEQUENCE ${sequenceOf(databaseId, field.id)} AS bigint MINVALUE 0 MAXVALUE ${integerLiteral(options.max)}` +
      ` START WITH ${integerLiteral(options.start)} NO CYCLE`,
  );
}

/** The rows table, its cell history and the sequences of its autoNumber fields, for a new (empty) table. */
export function createTable(databaseId: string, tableId: string, fields: readonly FieldDefinition[]): Statement[] {
  const sequences = fields
    .filter((field) => typeSpecOf(field.type).generated)
    .map((field) => createSequence(databaseId, field));
  const columns = [
    'id char(26) PRIMARY KEY',
    'version bigint NOT NULL DEFAULT 1',
    'created_at timestamptz(3) NOT NULL',
    'updated_at timestamptz(3) NOT NULL',
    ...fields.map((field) => columnDefinition(databaseId, field)),
  ];
  const rows = plain(`CREATE TABLE ${rowsTableOf(databaseId, tableId)} (${columns.join(', ')})`);
  // Append-only: one entry per cell per row version. The key serves "history of a row, newest first".
  const history = plain(`CREATE TABLE ${historyTableOf(databaseId, tableId)} (
    row_id char(26) NOT NULL,
    version bigint NOT NULL,
    field_id char(26) NOT NULL,
    operation varchar(8) NOT NULL,
    value jsonb NOT NULL,
    mutation_id char(26) NOT NULL,
    actor_id char(26) NOT NULL,
    actor_kind varchar(16) NOT NULL,
    actor_name varchar(120) NOT NULL,
    changed_at timestamptz(3) NOT NULL,
    PRIMARY KEY (row_id, version, field_id))`);
  // Every row write appends history, whatever its path: this trigger turns it into the change feed (issue 27).
  // Not on Citus: the history table lives on a worker, whose trigger cannot write the coordinator's feed tables
  // (docs/decisions/citus.md); there the feed records table and schema changes only.
  const feed = plain(`DO $citus$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
      CREATE TRIGGER record_changes AFTER INSERT ON ${historyTableOf(databaseId, tableId)}
        REFERENCING NEW TABLE AS new_cells FOR EACH STATEMENT EXECUTE FUNCTION public.wds_record_row_changes();
    END IF;
  END $citus$`);
  return [...sequences, rows, history, feed];
}

export function dropForeignKey(databaseId: string, tableId: string, foreignKeyId: string): Statement {
  return plain(
    `ALTER TABLE ${rowsTableOf(databaseId, tableId)} DROP CONSTRAINT ${foreignKeyConstraintOf(foreignKeyId)}`,
  );
}

/**
 * Asks PostgreSQL to quote values for a DDL predicate: `quote_nullable` of each text value, in order. The caller
 * substitutes the results for `$n` placeholders with `inlineLiterals`. Values stay bound parameters up to the
 * server, which is the only party that knows its own quoting rules.
 */
export function quoteLiterals(values: readonly (string | null)[]): Statement {
  return {
    sql: 'SELECT coalesce(array_agg(quote_nullable(v) ORDER BY i), ARRAY[]::text[]) AS literals FROM unnest($1::text[]) WITH ORDINALITY AS u(v, i)',
    params: [values],
  };
}

/** Replaces `$1`, `$2`, … with the server-quoted literals; a placeholder is matched whole, so `$1` never eats into `$10`. */
export function inlineLiterals(sql: string, literals: readonly string[]): string {
  return sql.replace(/\$(\d+)(?!\d)/g, (_match, index: string) => {
    const literal = literals[Number(index) - 1];
    if (literal === undefined) throw new Error(`No literal for $${index}`);
    return literal;
  });
}
