import { typeSpecOf, type FieldDefinition, type FieldOptions } from '../../../data/field-types.ts';
import {
  columnOf,
  foreignKeyConstraintOf,
  rowsTableOf,
  schemaOf,
  sequenceOf,
  uniqueIndexOf,
} from '../../../data/identifiers.ts';
import { Params, type Statement } from '../../../data/statement.ts';
import { isId } from '../../../kernel/ids.ts';

/**
 * SQL of schema changes. Identifiers come from IDs only (the shadow column, side table and trigger of a conversion
 * are named after its job); values are bound, except in trigger bodies, where the server quotes them first.
 */
const plain = (sql: string): Statement => ({ sql, params: [] });

function lower(id: string): string {
  if (!isId(id)) throw new Error(`Not an id: ${id}`);
  return id.toLowerCase();
}

export const shadowColumnOf = (jobId: string) => `x_${lower(jobId)}`;
// A conversion's side table and trigger function live in the database's own schema, beside the table whose trigger
// writes and whose report joins them: on Citus the schema is one worker's, and anything elsewhere is out of reach
// of a trigger on that worker (docs/decisions/citus.md).
export const failuresTableOf = (databaseId: string, jobId: string) => `${schemaOf(databaseId)}.y_${lower(jobId)}`;
export const triggerFunctionOf = (databaseId: string, jobId: string) => `${schemaOf(databaseId)}.c_${lower(jobId)}`;
export const triggerOf = (jobId: string) => `c_${lower(jobId)}`;

/** The table's catalog row, locked: schema changes of one table take turns, row creates wait (they update it). */
export function lockCatalogRow(tableId: string): Statement {
  return {
    sql: `SELECT schema_version FROM public.data_tables WHERE id = $1::bpchar AND state = 'active' FOR UPDATE`,
    params: [tableId],
  };
}

export function bumpSchemaVersion(tableId: string): Statement {
  return {
    sql: `UPDATE public.data_tables SET schema_version = schema_version + 1, version = version + 1, updated_at = now()
           WHERE id = $1::bpchar RETURNING schema_version`,
    params: [tableId],
  };
}

/** SHARE mode: row writes wait (reads do not) until the change commits, so a verification cannot go stale. */
export function blockWrites(databaseId: string, tableId: string): Statement {
  return plain(`LOCK TABLE ${rowsTableOf(databaseId, tableId)} IN SHARE MODE`);
}

export function hasRows(databaseId: string, tableId: string): Statement {
  return plain(`SELECT EXISTS (SELECT 1 FROM ${rowsTableOf(databaseId, tableId)}) AS present`);
}

export function insertField(tableId: string, field: Omit<FieldDefinition, 'position'>): Statement {
  return {
    sql: `INSERT INTO public.fields (id, table_id, name, type, required, options, position)
          VALUES ($1::bpchar, $2::bpchar, $3, $4, $5, $6::jsonb,
                  (SELECT coalesce(max(position) + 1, 0) FROM public.fields WHERE table_id = $2::bpchar))`,
    params: [field.id, tableId, field.name, field.type, field.required, JSON.stringify(field.options)],
  };
}

export function addColumn(databaseId: string, tableId: string, field: Omit<FieldDefinition, 'position'>): Statement[] {
  const spec = typeSpecOf(field.type);
  const table = rowsTableOf(databaseId, tableId);
  if (spec.generated) {
    const options = field.options as FieldOptions<'autoNumber'>;
    const sequence = sequenceOf(databaseId, field.id);
    const column = columnOf(field.id);
    // Existing rows are numbered in id (creation) order, then the default serves new rows. Not one `ADD COLUMN …
    // NOT NULL DEFAULT nextval(…)`: Citus refuses a nextval default on a table with rows and a volatile function in
    // an UPDATE of a distributed table (docs/decisions/citus.md). The numbers are drawn from the sequence first, on
    // the coordinator, so an exhausted sequence still raises 2200H and new rows continue after them.
    return [
      plain(
        `CREATE SEQUENCE ${sequence} AS bigint MINVALUE 0 MAXVALUE ${Number(options.max)} START WITH ${Number(options.start)} NO CYCLE`,
      ),
      plain(`ALTER TABLE ${table} ADD COLUMN ${column} bigint`),
      // Two queries, not one: Citus would send a query naming both the table and the sequence to the worker, where
      // the sequence does not exist until it becomes the column's default.
      plain(`DO $number$ DECLARE existing bigint; BEGIN
        SELECT count(*) INTO existing FROM ${table};
        PERFORM nextval('${sequence}') FROM generate_series(1, existing);
      END $number$`),
      plain(`UPDATE ${table} AS t SET ${column} = n.number
        FROM (SELECT id, ${Number(options.start)} - 1 + row_number() OVER (ORDER BY id) AS number FROM ${table}) AS n
        WHERE t.id = n.id`),
      plain(`ALTER TABLE ${table} ALTER COLUMN ${column} SET DEFAULT nextval('${sequence}')`),
      plain(`ALTER TABLE ${table} ALTER COLUMN ${column} SET NOT NULL`),
    ];
  }
  return [
    plain(
      `ALTER TABLE ${table} ADD COLUMN ${columnOf(field.id)} ${spec.column(field.options)}${field.required ? ' NOT NULL' : ''}`,
    ),
  ];
}

export function renameField(fieldId: string, name: string): Statement {
  return { sql: 'UPDATE public.fields SET name = $2 WHERE id = $1::bpchar', params: [fieldId, name] };
}

export function updateRuleWhere(ruleId: string, where: unknown): Statement {
  return {
    sql: 'UPDATE public.unique_rules SET "where" = $2::jsonb WHERE id = $1::bpchar',
    params: [ruleId, JSON.stringify(where)],
  };
}

export function updateFieldSettings(fieldId: string, type: string, required: boolean, options: unknown): Statement {
  return {
    sql: 'UPDATE public.fields SET type = $2, required = $3, options = $4::jsonb WHERE id = $1::bpchar',
    params: [fieldId, type, required, JSON.stringify(options)],
  };
}

export function setRequired(databaseId: string, tableId: string, fieldId: string, required: boolean): Statement {
  return plain(
    `ALTER TABLE ${rowsTableOf(databaseId, tableId)} ALTER COLUMN ${columnOf(fieldId)} ${required ? 'SET' : 'DROP'} NOT NULL`,
  );
}

/**
 * Rows whose value breaks the new settings of a field: `{count, sample}` (up to 20 row ids). The same checks a
 * row write makes, as SQL over the stored values.
 */
export function selectViolations(
  databaseId: string,
  tableId: string,
  field: FieldDefinition,
  required: boolean,
  options: Record<string, unknown>,
): Statement {
  const params = new Params();
  const column = `r.${columnOf(field.id)}`;
  const broken: string[] = [];
  if (required) broken.push(`${column} IS NULL`);
  const { min, max, maxLength, maxBytes, choices } = options as {
    min?: number;
    max?: number;
    maxLength?: number;
    maxBytes?: number;
    choices?: string[];
  };
  if (maxLength !== undefined) broken.push(`char_length(${column}) > ${params.add(maxLength, 'integer')}`);
  if (min !== undefined && (field.type === 'integer' || field.type === 'number'))
    broken.push(`${column} < ${params.add(min, 'numeric')}`);
  if (max !== undefined && (field.type === 'integer' || field.type === 'number'))
    broken.push(`${column} > ${params.add(max, 'numeric')}`);
  if (maxBytes !== undefined) broken.push(`public.wds_json_bytes(${column}) > ${params.add(maxBytes, 'integer')}`);
  if (choices !== undefined && field.type === 'select')
    broken.push(`${column} <> ALL(${params.add(choices, 'text[]')})`);
  if (choices !== undefined && field.type === 'multiSelect')
    broken.push(`NOT (${column} <@ ${params.add(choices, 'text[]')})`);
  if (broken.length === 0) return plain(`SELECT 0 AS count, ARRAY[]::text[] AS sample`);
  const where = broken.map((condition) => `(${condition})`).join(' OR ');
  return {
    sql: `SELECT count(*)::int AS count, (array_agg(r.id ORDER BY r.id))[1:20]::text[] AS sample
            FROM ${rowsTableOf(databaseId, tableId)} r WHERE ${where}`,
    params: params.values,
  };
}

export function deleteField(databaseId: string, tableId: string, field: FieldDefinition): Statement[] {
  const statements: Statement[] = [
    { sql: 'DELETE FROM public.fields WHERE id = $1::bpchar', params: [field.id] },
    // Positions stay dense and unique: move the later fields through negative numbers (the unique index is checked per row).
    {
      sql: 'UPDATE public.fields SET position = -position - 1 WHERE table_id = $1::bpchar AND position > $2',
      params: [tableId, field.position],
    },
    {
      sql: 'UPDATE public.fields SET position = -position - 2 WHERE table_id = $1::bpchar AND position < 0',
      params: [tableId],
    },
    plain(`ALTER TABLE ${rowsTableOf(databaseId, tableId)} DROP COLUMN ${columnOf(field.id)}`),
  ];
  if (typeSpecOf(field.type).generated) statements.push(dropSequence(databaseId, field.id));
  return statements;
}

/** An autoNumber field's sequence, once no column default uses it (it is not owned by the column). */
export function dropSequence(databaseId: string, fieldId: string): Statement {
  return plain(`DROP SEQUENCE IF EXISTS ${sequenceOf(databaseId, fieldId)}`);
}

export function reorderFields(tableId: string, fieldIds: readonly string[]): Statement[] {
  return [
    { sql: 'UPDATE public.fields SET position = -1 - position WHERE table_id = $1::bpchar', params: [tableId] },
    {
      sql: `UPDATE public.fields f SET position = x.ord - 1
              FROM unnest($2::text[]) WITH ORDINALITY AS x(id, ord)
             WHERE f.table_id = $1::bpchar AND f.id = x.id::bpchar`,
      params: [tableId, fieldIds],
    },
  ];
}

/** The column of a field as the conversion trigger sees it: the row being written. */
export const triggerSourceOf = (fieldId: string) => `NEW.${columnOf(fieldId)}`;

/** A dollar-quoted body whose tag does not occur in it (choice literals are user text and may hold `$fn$`). */
function dollarQuoted(body: string): string {
  let tag = '$fn$';
  for (let n = 0; body.includes(tag); n += 1) tag = `$fn${n}$`;
  return `${tag}${body}${tag}`;
}

/**
 * The start of a conversion: a shadow column of the target type, and a trigger that fills it on every insert and
 * update from now on (so writes during the backfill are never lost) and records rows whose value cannot convert.
 * `conversion` reads the source through `triggerSourceOf`, with its literals already inlined.
 */
export function startConversion(
  databaseId: string,
  tableId: string,
  jobId: string,
  source: FieldDefinition,
  targetColumn: string,
  conversion: string,
): Statement[] {
  const table = rowsTableOf(databaseId, tableId);
  const shadow = shadowColumnOf(jobId);
  const failures = failuresTableOf(databaseId, jobId);
  const body = `
      BEGIN
        NEW.${shadow} := ${conversion};
        IF ${triggerSourceOf(source.id)} IS NOT NULL AND NEW.${shadow} IS NULL THEN
          INSERT INTO ${failures} (row_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
        END IF;
        RETURN NEW;
      END `;
  return [
    plain(`ALTER TABLE ${table} ADD COLUMN ${shadow} ${targetColumn}`),
    plain(`CREATE TABLE ${failures} (row_id char(26) PRIMARY KEY)`),
    plain(
      `CREATE FUNCTION ${triggerFunctionOf(databaseId, jobId)}() RETURNS trigger LANGUAGE plpgsql AS ${dollarQuoted(body)}`,
    ),
    plain(
      `CREATE TRIGGER ${triggerOf(jobId)} BEFORE INSERT OR UPDATE ON ${table} FOR EACH ROW EXECUTE FUNCTION ${triggerFunctionOf(databaseId, jobId)}()`,
    ),
  ];
}

/** One backfill batch: the next `limit` rows by id after `afterId` go through the trigger. Returns their ids. */
export function backfillBatch(
  databaseId: string,
  tableId: string,
  sourceFieldId: string,
  afterId: string,
  limit: number,
): Statement {
  const table = rowsTableOf(databaseId, tableId);
  const source = columnOf(sourceFieldId);
  return {
    sql: `UPDATE ${table} t SET ${source} = t.${source}
            FROM (SELECT id FROM ${table} WHERE id > $1::bpchar ORDER BY id LIMIT ${Number(limit)}) batch
           WHERE t.id = batch.id
       RETURNING t.id`,
    params: [afterId],
  };
}

/** Rows whose current value cannot convert (only rows that ever failed are looked at: the side table). */
export function selectUnconvertible(
  databaseId: string,
  tableId: string,
  jobId: string,
  sourceField: FieldDefinition,
  limit: number,
): Statement {
  return {
    sql: `SELECT t.id, ${typeSpecOf(sourceField.type).read(`t.${columnOf(sourceField.id)}`)} AS value
            FROM ${failuresTableOf(databaseId, jobId)} f JOIN ${rowsTableOf(databaseId, tableId)} t ON t.id = f.row_id
           WHERE t.${columnOf(sourceField.id)} IS NOT NULL AND t.${shadowColumnOf(jobId)} IS NULL
           ORDER BY t.id LIMIT ${Number(limit)}`,
    params: [],
  };
}

export function countUnconvertible(
  databaseId: string,
  tableId: string,
  jobId: string,
  sourceFieldId: string,
): Statement {
  return plain(`SELECT count(*)::int AS count
                  FROM ${failuresTableOf(databaseId, jobId)} f JOIN ${rowsTableOf(databaseId, tableId)} t ON t.id = f.row_id
                 WHERE t.${columnOf(sourceFieldId)} IS NOT NULL AND t.${shadowColumnOf(jobId)} IS NULL`);
}

/** The cutover: the shadow column takes the field's place (its column name), the old column goes. */
export function swapColumns(databaseId: string, tableId: string, jobId: string, fieldId: string): Statement[] {
  const table = rowsTableOf(databaseId, tableId);
  return [
    plain(`DROP TRIGGER ${triggerOf(jobId)} ON ${table}`),
    plain(`DROP FUNCTION ${triggerFunctionOf(databaseId, jobId)}()`),
    plain(`ALTER TABLE ${table} DROP COLUMN ${columnOf(fieldId)}`),
    plain(`ALTER TABLE ${table} RENAME COLUMN ${shadowColumnOf(jobId)} TO ${columnOf(fieldId)}`),
    plain(`DROP TABLE ${failuresTableOf(databaseId, jobId)}`),
  ];
}

/** Undoes a conversion that will not cut over (cancelled, failed): the table is as it was. */
export function abandonConversion(databaseId: string, tableId: string, jobId: string): Statement[] {
  const table = rowsTableOf(databaseId, tableId);
  return [
    plain(`DROP TRIGGER IF EXISTS ${triggerOf(jobId)} ON ${table}`),
    plain(`DROP FUNCTION IF EXISTS ${triggerFunctionOf(databaseId, jobId)}()`),
    plain(`ALTER TABLE ${table} DROP COLUMN IF EXISTS ${shadowColumnOf(jobId)}`),
    plain(`DROP TABLE IF EXISTS ${failuresTableOf(databaseId, jobId)}`),
  ];
}

export function countRows(databaseId: string, tableId: string): Statement {
  return plain(`SELECT count(*)::int AS count FROM ${rowsTableOf(databaseId, tableId)}`);
}

/** Built without blocking writes; a unique value written meanwhile that collides fails the build (23505). */
export function buildUniqueIndex(
  databaseId: string,
  tableId: string,
  ruleId: string,
  fieldIds: readonly string[],
  predicate: string | null,
): Statement {
  const where = predicate ? ` WHERE ${predicate}` : '';
  return plain(
    `CREATE UNIQUE INDEX CONCURRENTLY ${uniqueIndexOf(ruleId)} ON ${rowsTableOf(databaseId, tableId)} (${fieldIds.map(columnOf).join(', ')})${where}`,
  );
}

/** An interrupted concurrent build leaves an INVALID index behind; it is dropped before the build starts again. */
export function dropUniqueIndex(databaseId: string, ruleId: string, concurrently: boolean): Statement {
  return plain(
    `DROP INDEX ${concurrently ? 'CONCURRENTLY ' : ''}IF EXISTS ${schemaOf(databaseId)}.${uniqueIndexOf(ruleId)}`,
  );
}

export function uniqueIndexIsValid(databaseId: string, ruleId: string): Statement {
  return {
    sql: `SELECT coalesce((SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)), false) AS valid`,
    params: [`${schemaOf(databaseId)}.${uniqueIndexOf(ruleId)}`],
  };
}

export function insertUniqueRule(
  ruleId: string,
  tableId: string,
  fieldIds: readonly string[],
  where: unknown,
  enforcement: string,
): Statement {
  return {
    sql: `INSERT INTO public.unique_rules (id, table_id, field_ids, "where", enforcement) VALUES ($1::bpchar, $2::bpchar, $3::bpchar[], $4::jsonb, $5::text)`,
    params: [
      ruleId,
      tableId,
      fieldIds,
      where === null || where === undefined ? null : JSON.stringify(where),
      enforcement,
    ],
  };
}

/** NOT VALID: enforced for new writes at once, existing rows checked by VALIDATE without blocking writes. */
export function addForeignKeyNotValid(
  databaseId: string,
  tableId: string,
  foreignKeyId: string,
  fieldIds: readonly string[],
  referencedTableId: string,
  referencedFieldIds: readonly string[],
): Statement[] {
  const table = rowsTableOf(databaseId, tableId);
  return [
    plain(`ALTER TABLE ${table} DROP CONSTRAINT IF EXISTS ${foreignKeyConstraintOf(foreignKeyId)}`),
    plain(
      `ALTER TABLE ${table} ADD CONSTRAINT ${foreignKeyConstraintOf(foreignKeyId)} FOREIGN KEY (${fieldIds.map(columnOf).join(', ')})` +
        ` REFERENCES ${rowsTableOf(databaseId, referencedTableId)} (${referencedFieldIds.map(columnOf).join(', ')}) NOT VALID`,
    ),
  ];
}

export function validateForeignKey(databaseId: string, tableId: string, foreignKeyId: string): Statement {
  return plain(
    `ALTER TABLE ${rowsTableOf(databaseId, tableId)} VALIDATE CONSTRAINT ${foreignKeyConstraintOf(foreignKeyId)}`,
  );
}

export function dropForeignKeyIfExists(databaseId: string, tableId: string, foreignKeyId: string): Statement {
  return plain(
    `ALTER TABLE ${rowsTableOf(databaseId, tableId)} DROP CONSTRAINT IF EXISTS ${foreignKeyConstraintOf(foreignKeyId)}`,
  );
}

export function insertForeignKey(
  foreignKeyId: string,
  tableId: string,
  fieldIds: readonly string[],
  referencedTableId: string,
  referencedRuleId: string,
): Statement {
  return {
    sql: `INSERT INTO public.foreign_keys (id, table_id, field_ids, referenced_table_id, referenced_rule_id)
          VALUES ($1::bpchar, $2::bpchar, $3::bpchar[], $4::bpchar, $5::bpchar)`,
    params: [foreignKeyId, tableId, fieldIds, referencedTableId, referencedRuleId],
  };
}
