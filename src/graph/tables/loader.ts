import type { z } from 'zod';
import type { PrismaClient, TransactionClient } from '../../db/prisma.ts';
import type { SqlExecutor } from '../../db/sql.ts';
import { valueSchemaOf, type CellValue, type FieldDefinition, type FieldType } from '../../data/field-types.ts';
import type { PhysicalTable } from '../../data/rows.ts';
import { notFound } from '../../errors.ts';

/**
 * A table's definition at one schema version, as row writes and reads need it. Loaded in one statement (one
 * snapshot, so fields, rules and keys always belong to the version they are labelled with) and cached per table
 * until its `schemaVersion` moves: a row write costs one small lookup, not a re-read of the schema.
 */
export interface UniqueRuleDefinition {
  id: string;
  fieldIds: string[];
  where: unknown;
  state: string;
  createdAt: string;
}

/** Spec 2.13's foreign key, as cached and as answered. A type (not an interface) so it passes as JSON. */
export type ForeignKeyDefinition = {
  id: string;
  tableId: string;
  fieldIds: string[];
  referencedTableId: string;
  referencedTableName: string;
  referencedRuleId: string;
  referencedFieldIds: string[];
  referencedFieldNames: string[];
  state: string;
};

export interface TableSchema extends PhysicalTable {
  orgId: string;
  schemaVersion: number;
  fields: FieldDefinition[];
  uniqueRules: UniqueRuleDefinition[];
  foreignKeys: ForeignKeyDefinition[];
  fieldsById: ReadonlyMap<string, FieldDefinition>;
  fieldsByName: ReadonlyMap<string, FieldDefinition>;
  validators: ReadonlyMap<string, z.ZodType<CellValue>>;
}

/** The part of a table that is read on every request: enough to authorise and to check the cache. */
export interface TableHead {
  id: string;
  orgId: string;
  databaseId: string;
  name: string;
  schemaVersion: number;
}

/** Which table at which schema version: what the cache is keyed by. */
export type TableVersion = Pick<TableHead, 'id' | 'orgId' | 'databaseId' | 'schemaVersion'>;

export interface TableAddress {
  orgId: string;
  databaseId: string;
  tableId: string;
}

/** The table, if it is in that database of that org; anything else is a 404 (DESIGN §3). */
export async function loadTableHead(executor: SqlExecutor, address: TableAddress): Promise<TableHead> {
  const [head] = await executor.query<TableHead>(
    `SELECT id, org_id AS "orgId", database_id AS "databaseId", name, schema_version AS "schemaVersion"
       FROM data_tables
      WHERE id = $1::bpchar AND database_id = $2::bpchar AND org_id = $3::bpchar AND state = 'active'`,
    [address.tableId, address.databaseId, address.orgId]);
  if (!head) throw notFound('table');
  return head;
}

interface SchemaRow {
  schemaVersion: number;
  fields: (Omit<FieldDefinition, 'type'> & { type: FieldType })[];
  uniqueRules: UniqueRuleDefinition[];
  foreignKeys: ForeignKeyDefinition[];
}

export async function readSchema(db: PrismaClient | TransactionClient, head: TableVersion): Promise<TableSchema> {
  const [row] = await db.$queryRaw<SchemaRow[]>`
    SELECT t.schema_version AS "schemaVersion",
      (SELECT coalesce(json_agg(json_build_object('id', f.id, 'name', f.name, 'type', f.type, 'required', f.required,
                 'options', f.options, 'position', f.position) ORDER BY f.position), '[]')
         FROM fields f WHERE f.table_id = t.id) AS fields,
      (SELECT coalesce(json_agg(json_build_object('id', r.id, 'fieldIds', r.field_ids, 'where', r."where", 'state', r.state,
                 'createdAt', to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) ORDER BY r.id), '[]')
         FROM unique_rules r WHERE r.table_id = t.id) AS "uniqueRules",
      (SELECT coalesce(json_agg(json_build_object('id', k.id, 'tableId', k.table_id, 'fieldIds', k.field_ids,
                 'referencedTableId', k.referenced_table_id, 'referencedTableName', rt.name, 'referencedRuleId', k.referenced_rule_id,
                 'referencedFieldIds', rr.field_ids,
                 'referencedFieldNames', (SELECT array_agg(rf.name ORDER BY array_position(rr.field_ids, rf.id)) FROM fields rf WHERE rf.id = ANY(rr.field_ids)),
                 'state', k.state) ORDER BY k.id), '[]')
         FROM foreign_keys k JOIN data_tables rt ON rt.id = k.referenced_table_id JOIN unique_rules rr ON rr.id = k.referenced_rule_id
        WHERE k.table_id = t.id) AS "foreignKeys"
      FROM data_tables t WHERE t.id = ${head.id}`;
  if (!row) throw notFound('table');
  const { fields } = row;
  return {
    orgId: head.orgId,
    databaseId: head.databaseId,
    tableId: head.id,
    schemaVersion: row.schemaVersion,
    fields,
    uniqueRules: row.uniqueRules,
    foreignKeys: row.foreignKeys,
    fieldsById: new Map(fields.map((field) => [field.id, field])),
    fieldsByName: new Map(fields.map((field) => [field.name, field])),
    validators: new Map(fields.map((field) => [field.id, valueSchemaOf(field)])),
  };
}

/** Least-recently-used schemas by table id; an entry is only served for the schema version it was read at. */
export class SchemaCache {
  private readonly entries = new Map<string, TableSchema>();

  constructor(private readonly capacity = 1_000) {}

  async get(db: PrismaClient | TransactionClient, head: TableVersion): Promise<TableSchema> {
    const cached = this.entries.get(head.id);
    if (cached && cached.schemaVersion === head.schemaVersion) {
      this.entries.delete(head.id);
      this.entries.set(head.id, cached);
      return cached;
    }
    const schema = await readSchema(db, head);
    this.remember(schema);
    return schema;
  }

  /** The cached definition of a table at whatever version it was read, without asking the database. */
  peek(tableId: string): TableSchema | undefined {
    return this.entries.get(tableId);
  }

  private remember(schema: TableSchema): void {
    this.entries.delete(schema.tableId);
    this.entries.set(schema.tableId, schema);
    if (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
  }
}
