import type { TransactionClient } from '../../db/prisma.ts';
import { DomainError, notFound } from '../../errors.ts';
import { builder } from '../builder.ts';
import { schemaMaintenance } from '../jobs/enqueue.ts';
import { Id } from '../common.ts';
import { dataPlane, type Context } from '../context.ts';
import type { Json } from '../idempotency.ts';
import { loadTableHead, type ForeignKeyDefinition, type TableAddress, type TableSchema, type UniqueRuleDefinition } from './loader.ts';
import { Field, toFieldShape, type FieldShape } from './tables.ts';

/** The schema endpoint: how clients discover a table's runtime definition (spec §1). */
export type UniqueRuleShape = {
  id: string;
  tableId: string;
  fieldIds: string[];
  where: Json;
  state: string;
  createdAt: string;
};

/** Spec 2.13. */
export type ForeignKeyShape = ForeignKeyDefinition;

export type TableSchemaShape = {
  tableId: string;
  schemaVersion: number;
  fields: FieldShape[];
  uniqueRules: UniqueRuleShape[];
  foreignKeys: ForeignKeyShape[];
};

export const UniqueRule = builder.objectRef<UniqueRuleShape>('UniqueRule').implement({
  description: 'No two rows may share values in these fields (rows with an empty field are exempt). With `where`, only rows matching it count.',
  fields: (t) => ({
    id: t.exposeID('id'),
    tableId: t.exposeID('tableId'),
    fieldIds: t.exposeIDList('fieldIds'),
    where: t.field({ type: 'JSON', nullable: true, description: 'A filter expression (spec 2.4), or null for an unconditional rule.', resolve: (rule) => rule.where }),
    state: t.exposeString('state'),
    createdAt: t.field({ type: 'Timestamp', resolve: (rule) => rule.createdAt }),
  }),
});

export const ForeignKey = builder.objectRef<ForeignKeyShape>('ForeignKey').implement({
  description: 'Values of `fieldIds` must exist in the referenced unconditional unique rule of a table in the same database (spec 2.13).',
  fields: (t) => ({
    id: t.exposeID('id'),
    tableId: t.exposeID('tableId'),
    fieldIds: t.exposeIDList('fieldIds'),
    referencedTableId: t.exposeID('referencedTableId'),
    referencedTableName: t.exposeString('referencedTableName'),
    referencedRuleId: t.exposeID('referencedRuleId'),
    referencedFieldIds: t.exposeIDList('referencedFieldIds'),
    referencedFieldNames: t.exposeStringList('referencedFieldNames'),
    state: t.exposeString('state', { description: '`active`' }),
  }),
});

const TableSchemaObject = builder.objectRef<TableSchemaShape>('TableSchema').implement({
  description: 'A table’s fields, unique rules and foreign keys at one schema version.',
  fields: (t) => ({
    tableId: t.exposeID('tableId'),
    schemaVersion: t.exposeInt('schemaVersion'),
    fields: t.field({ type: [Field], resolve: (schema) => schema.fields }),
    uniqueRules: t.field({ type: [UniqueRule], resolve: (schema) => schema.uniqueRules }),
    foreignKeys: t.field({ type: [ForeignKey], resolve: (schema) => schema.foreignKeys }),
  }),
});

export function toUniqueRuleShape(tableId: string, rule: UniqueRuleDefinition): UniqueRuleShape {
  return { id: rule.id, tableId, fieldIds: rule.fieldIds, where: (rule.where ?? null) as Json, state: rule.state, createdAt: rule.createdAt };
}

export function toForeignKeyShape(key: ForeignKeyDefinition): ForeignKeyShape {
  return { ...key };
}

export function toTableSchemaShape(schema: TableSchema): TableSchemaShape {
  return {
    tableId: schema.tableId,
    schemaVersion: schema.schemaVersion,
    fields: schema.fields.map(toFieldShape),
    uniqueRules: schema.uniqueRules.map((rule) => toUniqueRuleShape(schema.tableId, rule)),
    foreignKeys: schema.foreignKeys.map(toForeignKeyShape),
  };
}

/** The table's current definition (cached per schema version); 404 for a table outside this org and database. */
export async function currentSchema(context: Context, address: TableAddress): Promise<TableSchema> {
  const head = await loadTableHead(dataPlane(context), address);
  return context.schemas.get(context.prisma, head);
}

/**
 * For a row create, which names the schema version it expects: the cached definition when it is at exactly that
 * version, without a lookup. The insert re-checks the version (and that the table is still active) in the
 * database, so a stale cache can only produce the SCHEMA_VERSION_CONFLICT the client's stale version deserves.
 * A table never moves between orgs or databases, so the cached address is as good as a fresh one.
 */
export async function schemaExpecting(context: Context, address: TableAddress, expectedSchemaVersion: number): Promise<TableSchema> {
  const cached = context.schemas.peek(address.tableId);
  const usable = cached?.schemaVersion === expectedSchemaVersion && cached.orgId === address.orgId && cached.databaseId === address.databaseId;
  return usable ? cached : currentSchema(context, address);
}

/**
 * Locks the table's catalog row for a schema change and checks the caller's `expectedSchemaVersion`. The lock
 * makes schema changes of one table take turns, and makes row writes (which update the same row) wait for them.
 */
export async function lockTableForSchemaChange(tx: TransactionClient, address: TableAddress, expectedSchemaVersion?: number): Promise<number> {
  const [row] = await tx.$queryRaw<{ schema_version: number }[]>`
    SELECT schema_version FROM data_tables
     WHERE id = ${address.tableId} AND database_id = ${address.databaseId} AND org_id = ${address.orgId} AND state = 'active'
       FOR UPDATE`;
  if (!row) throw notFound('table');
  if (expectedSchemaVersion !== undefined && expectedSchemaVersion !== row.schema_version) throw schemaVersionConflict(expectedSchemaVersion, row.schema_version);
  // A schema-change job of this table would otherwise fail at its cutover (the version moved): refuse this one instead.
  const [active] = await tx.$queryRaw<{ id: string }[]>`
    SELECT id FROM jobs WHERE serial_key = ${`schema:${address.tableId}`} AND state IN ('queued', 'running')`;
  if (active) throw schemaMaintenance();
  return row.schema_version;
}

export function schemaVersionConflict(expected: number, current: number): DomainError {
  return new DomainError('SCHEMA_VERSION_CONFLICT', 'The table’s schema changed; read its schema again and retry.', {
    details: { expectedSchemaVersion: expected, currentSchemaVersion: current },
  });
}

/** Every schema change ends here: the new schema version invalidates cached definitions everywhere. */
export async function bumpSchemaVersion(tx: TransactionClient, tableId: string): Promise<number> {
  const [row] = await tx.$queryRaw<{ schema_version: number }[]>`
    UPDATE data_tables SET schema_version = schema_version + 1, version = version + 1, updated_at = now()
     WHERE id = ${tableId} RETURNING schema_version`;
  return row!.schema_version;
}

builder.queryFields((t) => ({
  tableSchema: t.field({
    type: TableSchemaObject,
    description: 'The runtime definition of a table: fields, unique rules and foreign keys.',
    args: {
      orgId: t.arg.id({ required: true, validate: Id }),
      databaseId: t.arg.id({ required: true, validate: Id }),
      tableId: t.arg.id({ required: true, validate: Id }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'schema:read' }),
    resolve: async (_root, args, context) =>
      toTableSchemaShape(await currentSchema(context, { orgId: String(args.orgId), databaseId: String(args.databaseId), tableId: String(args.tableId) })),
  }),
}));
