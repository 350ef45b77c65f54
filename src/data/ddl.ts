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
 * The schema of a workspace database and its change feed: `changes` (one entry per change, written by triggers in
 * the writer's transaction), `change_commits` (one per writing transaction: its position, null until a reader
 * sequences it), `change_feed` (the head and the retention watermark) and `change_arm` (whether a reader waits for
 * a NOTIFY; starts armed, so the webhook deliverer learns of a new database from its first commit). The feed lives
 * beside the tables it records, so its triggers write nothing outside the schema (docs/decisions/changes.md).
 * Top-level statements, not a function: Citus distributes only a table created by a top-level statement, so only
 * then does the feed sit on the worker beside the schema's tables (docs/decisions/citus.md).
 */
export function createDatabaseSchema(databaseId: string): Statement[] {
  const schema = schemaOf(databaseId);
  return [
    plain(`CREATE SCHEMA ${schema}`),
    plain(`CREATE SEQUENCE ${schema}.change_seq AS bigint`),
    plain(`CREATE TABLE ${schema}.change_commits (
      txid xid8 PRIMARY KEY DEFAULT pg_current_xact_id(),
      position bigint UNIQUE,
      committed_at timestamptz(3))`),
    // The sequencer's look-up: the commits no reader has positioned yet (a handful, between two reads).
    plain(`CREATE INDEX change_commits_unpositioned ON ${schema}.change_commits (txid) WHERE position IS NULL`),
    plain(`CREATE INDEX change_commits_committed_at ON ${schema}.change_commits (committed_at)`),
    plain(`CREATE TABLE ${schema}.changes (
      txid xid8 NOT NULL DEFAULT pg_current_xact_id(),
      seq bigint NOT NULL DEFAULT nextval('${schema}.change_seq'),
      recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
      kind varchar(32) NOT NULL,
      table_id char(26) NOT NULL,
      row_id char(26),
      version bigint,
      schema_version integer,
      mutation_id char(26) NOT NULL,
      actor_id char(26) NOT NULL,
      actor_kind varchar(16) NOT NULL,
      "values" jsonb,
      previous jsonb,
      PRIMARY KEY (txid, seq))`),
    plain(`CREATE TABLE ${schema}.change_feed (
      singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
      head_position bigint NOT NULL DEFAULT 0,
      head_seq bigint NOT NULL DEFAULT 0,
      head_committed_at timestamptz(3),
      pruned_position bigint NOT NULL DEFAULT 0,
      pruned_seq bigint NOT NULL DEFAULT 0)`),
    plain(`INSERT INTO ${schema}.change_feed DEFAULT VALUES`),
    plain(`CREATE TABLE ${schema}.change_arm (
      singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
      armed boolean NOT NULL DEFAULT true)`),
    plain(`INSERT INTO ${schema}.change_arm DEFAULT VALUES`),
    plain(`CREATE CONSTRAINT TRIGGER committed AFTER INSERT ON ${schema}.change_commits DEFERRABLE INITIALLY DEFERRED
      FOR EACH ROW EXECUTE FUNCTION public.wds_changes_committed()`),
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
  // Every row write appends history, whatever its path: this trigger turns it into the change feed (issue 27). On
  // Citus it fires on the worker that holds the schema and writes the feed beside the table (docs/decisions/citus.md).
  const feed = plain(`CREATE TRIGGER record_changes AFTER INSERT ON ${historyTableOf(databaseId, tableId)}
    REFERENCING NEW TABLE AS new_cells FOR EACH STATEMENT EXECUTE FUNCTION public.wds_record_row_changes()`);
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
