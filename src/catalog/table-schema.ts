import type { z } from 'zod';
import type { PrismaClient, TransactionClient } from '../db/prisma.ts';
import type { SqlExecutor } from '../db/sql.ts';
import { valueSchemaOf, type CellValue, type FieldDefinition, type FieldType } from '../data/field-types.ts';
import type { PhysicalTable } from '../data/rows.ts';
import { DomainError, notFound } from '../kernel/errors.ts';

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
  /** btree or hash (src/data/unique-keys.ts). */
  enforcement: 'btree' | 'hash';
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

/** A sort index (issue 14): `keys` then the row id; `state` is building or ready. */
export type SortIndexDefinition = {
  id: string;
  keys: { fieldId: string; direction: 'asc' | 'desc' }[];
  origin: 'explicit' | 'automatic';
  state: 'building' | 'ready';
  /** btree: a sort index; trigram: one field's folded text; search: the search document of `keys`' fields (issue 28). */
  method: 'btree' | 'trigram' | 'search';
  createdAt: string;
};

export interface TableSchema extends PhysicalTable {
  orgId: string;
  schemaVersion: number;
  fields: FieldDefinition[];
  uniqueRules: UniqueRuleDefinition[];
  foreignKeys: ForeignKeyDefinition[];
  indexes: SortIndexDefinition[];
  indexVersion: number;
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
  indexVersion: number;
}

/** Which table at which schema version: what the cache is keyed by. */
export type TableVersion = Pick<TableHead, 'id' | 'orgId' | 'databaseId' | 'schemaVersion' | 'indexVersion'>;

export interface TableAddress {
  orgId: string;
  databaseId: string;
  tableId: string;
}

/** The table, if it is in that database of that org; anything else is a 404 (DESIGN §3). */
export async function loadTableHead(executor: SqlExecutor, address: TableAddress): Promise<TableHead> {
  const [head] = await executor.query<TableHead>(
    `SELECT id, org_id AS "orgId", database_id AS "databaseId", name, schema_version AS "schemaVersion",
            index_version AS "indexVersion"
       FROM data_tables
      WHERE id = $1::bpchar AND database_id = $2::bpchar AND org_id = $3::bpchar AND state = 'active'`,
    [address.tableId, address.databaseId, address.orgId],
  );
  if (!head) throw notFound('table');
  return head;
}

interface SchemaRow {
  tableId: string;
  schemaVersion: number;
  fields: (Omit<FieldDefinition, 'type'> & { type: FieldType })[];
  uniqueRules: UniqueRuleDefinition[];
  foreignKeys: ForeignKeyDefinition[];
  indexes: SortIndexDefinition[];
  indexVersion: number;
}

export async function readSchema(db: PrismaClient | TransactionClient, head: TableVersion): Promise<TableSchema> {
  const [schema] = await readSchemas(db, [head]);
  if (!schema) throw notFound('table');
  return schema;
}

/** Several tables' definitions in one statement (a GraphQL page of tables asks for all of their schemas at once). */
export async function readSchemas(
  db: PrismaClient | TransactionClient,
  heads: readonly TableVersion[],
): Promise<TableSchema[]> {
  const rows = await db.$queryRaw<SchemaRow[]>`
    SELECT t.id AS "tableId", t.schema_version AS "schemaVersion", t.index_version AS "indexVersion",
      (SELECT coalesce(json_agg(json_build_object('id', f.id, 'name', f.name, 'type', f.type, 'required', f.required,
                 'options', f.options, 'position', f.position) ORDER BY f.position), '[]')
         FROM fields f WHERE f.table_id = t.id) AS fields,
      (SELECT coalesce(json_agg(json_build_object('id', r.id, 'fieldIds', r.field_ids, 'where', r."where", 'state', r.state, 'enforcement', r.enforcement,
                 'createdAt', to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) ORDER BY r.id), '[]')
         FROM unique_rules r WHERE r.table_id = t.id) AS "uniqueRules",
      (SELECT coalesce(json_agg(json_build_object('id', k.id, 'tableId', k.table_id, 'fieldIds', k.field_ids,
                 'referencedTableId', k.referenced_table_id, 'referencedTableName', rt.name, 'referencedRuleId', k.referenced_rule_id,
                 'referencedFieldIds', rr.field_ids,
                 'referencedFieldNames', (SELECT array_agg(rf.name ORDER BY array_position(rr.field_ids, rf.id)) FROM fields rf WHERE rf.id = ANY(rr.field_ids)),
                 'state', k.state) ORDER BY k.id), '[]')
         FROM foreign_keys k JOIN data_tables rt ON rt.id = k.referenced_table_id JOIN unique_rules rr ON rr.id = k.referenced_rule_id
        WHERE k.table_id = t.id) AS "foreignKeys",
      (SELECT coalesce(json_agg(json_build_object('id', i.id, 'keys', i.keys, 'origin', i.origin, 'state', i.state, 'method', i.method,
                 'createdAt', to_char(i.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) ORDER BY i.id), '[]')
         FROM table_indexes i WHERE i.table_id = t.id) AS indexes
      FROM data_tables t WHERE t.id = ANY(${heads.map((head) => head.id)}::bpchar[])`;
  const byId = new Map(rows.map((row) => [row.tableId.trim(), row]));
  return heads.flatMap((head) => {
    const row = byId.get(head.id);
    return row ? [schemaOf(head, row)] : [];
  });
}

function schemaOf(head: TableVersion, row: SchemaRow): TableSchema {
  const { fields } = row;
  return {
    orgId: head.orgId,
    databaseId: head.databaseId,
    tableId: head.id,
    schemaVersion: row.schemaVersion,
    fields,
    uniqueRules: row.uniqueRules,
    foreignKeys: row.foreignKeys,
    indexes: row.indexes,
    indexVersion: row.indexVersion,
    fieldsById: new Map(fields.map((field) => [field.id, field])),
    fieldsByName: new Map(fields.map((field) => [field.name, field])),
    validators: new Map(fields.map((field) => [field.id, valueSchemaOf(field)])),
  };
}

/** A request or job that was checked against one schema version met another: 409 (DESIGN §2). */
export function schemaVersionConflict(expected: number, current: number): DomainError {
  return new DomainError('SCHEMA_VERSION_CONFLICT', 'The table’s schema changed; read its schema again and retry.', {
    details: { expectedSchemaVersion: expected, currentSchemaVersion: current },
  });
}

/** Least-recently-used schemas by table id; an entry is only served for the schema version it was read at. */
export class SchemaCache {
  private readonly entries = new Map<string, TableSchema>();

  constructor(private readonly capacity = 1_000) {}

  async get(db: PrismaClient | TransactionClient, head: TableVersion): Promise<TableSchema> {
    const cached = this.entries.get(head.id);
    if (cached && cached.schemaVersion === head.schemaVersion && cached.indexVersion === head.indexVersion) {
      this.entries.delete(head.id);
      this.entries.set(head.id, cached);
      return cached;
    }
    const schema = await readSchema(db, head);
    this.remember(schema);
    return schema;
  }

  /** Like `get` for many tables, reading every definition the cache lacks in one statement; absent tables are left out. */
  async getMany(
    db: PrismaClient | TransactionClient,
    heads: readonly TableVersion[],
  ): Promise<Map<string, TableSchema>> {
    const found = new Map<string, TableSchema>();
    const missing = heads.filter((head) => {
      const cached = this.entries.get(head.id);
      if (cached && cached.schemaVersion === head.schemaVersion && cached.indexVersion === head.indexVersion)
        found.set(head.id, cached);
      return !found.has(head.id);
    });
    for (const schema of missing.length ? await readSchemas(db, missing) : []) {
      this.remember(schema);
      found.set(schema.tableId, schema);
    }
    return found;
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
