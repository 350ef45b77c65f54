import { incrementSchemaVersion, lockTableSchemaVersion, selectActiveJobBySerialKey } from '../../catalog/tables.ts';
import type { TransactionClient } from '../../db/prisma.ts';
import { notFound } from '../../kernel/errors.ts';
import { builder } from '../server/builder.ts';
import { schemaMaintenance } from '../jobs/enqueue.ts';
import { Id, type Json } from '../../kernel/formats.ts';
import { dataPlane, type Context } from '../server/context.ts';
import { requestLoader } from '../server/loaders.ts';
import {
  loadTableHead,
  schemaVersionConflict,
  type ForeignKeyDefinition,
  type SortIndexDefinition,
  type TableVersion,
  type TableAddress,
  type TableSchema,
  type UniqueRuleDefinition,
} from '../../catalog/table-schema.ts';
import { Field, toFieldShape, type FieldShape } from './tables.ts';
import { schemaSerialKey } from '../../jobs/engine/kinds.ts';

/** The schema endpoint: how clients discover a table's runtime definition (spec §1). */
export type UniqueRuleShape = {
  id: string;
  tableId: string;
  fieldIds: string[];
  where: Json;
  state: string;
  /** Whether a foreign key can reference the rule: only a btree-enforced rule can (src/data/unique-keys.ts). */
  referenceable: boolean;
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
  indexes: SortIndexDefinition[];
};

export const UniqueRule = builder.objectRef<UniqueRuleShape>('UniqueRule').implement({
  description:
    'No two rows may share values in these fields (rows with an empty field are exempt). With `where`, only rows matching it count.',
  fields: (t) => ({
    id: t.exposeID('id'),
    tableId: t.exposeID('tableId'),
    fieldIds: t.exposeIDList('fieldIds'),
    where: t.field({
      type: 'JSON',
      nullable: true,
      description: 'A filter expression (spec 2.4), or null for an unconditional rule.',
      resolve: (rule) => rule.where,
    }),
    state: t.exposeString('state'),
    referenceable: t.exposeBoolean('referenceable', {
      description:
        'Whether a foreign key can reference this rule: false for a conditional rule, and for a key wider than a btree ' +
        'index entry (2,600 bytes), which is enforced through a hash.',
    }),
    createdAt: t.field({ type: 'Timestamp', resolve: (rule) => rule.createdAt }),
  }),
});

export const ForeignKey = builder.objectRef<ForeignKeyShape>('ForeignKey').implement({
  description:
    'Values of `fieldIds` must exist in the referenced unconditional unique rule of a table in the same database (spec 2.13).',
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

const IndexKey = builder.objectRef<SortIndexDefinition['keys'][number]>('IndexKey').implement({
  fields: (t) => ({
    fieldId: t.exposeID('fieldId'),
    direction: t.exposeString('direction', { description: '`asc` or `desc`' }),
  }),
});

export const SortIndex = builder.objectRef<SortIndexDefinition>('SortIndex').implement({
  description:
    'An index over `keys` then the row id, for reading rows in that order (issue 14). NULLs sort last ascending, first descending.',
  fields: (t) => ({
    id: t.exposeID('id'),
    keys: t.field({ type: [IndexKey], resolve: (index) => index.keys }),
    origin: t.exposeString('origin', {
      description: '`explicit` (add_index) or `automatic` (a shared view is sorted this way)',
    }),
    state: t.exposeString('state', { description: '`building` until the index can serve reads, then `ready`' }),
    method: t.exposeString('method', {
      description:
        '`btree` (sort keys), `trigram` (one text field’s folded text: similar rows) or `search` (the folded text of `keys`’ fields: search)',
    }),
    createdAt: t.field({ type: 'Timestamp', resolve: (index) => index.createdAt }),
  }),
});

export const TableSchemaObject = builder.objectRef<TableSchemaShape>('TableSchema').implement({
  description: 'A table’s fields, unique rules, foreign keys and sort indexes at one schema version.',
  fields: (t) => ({
    tableId: t.exposeID('tableId'),
    schemaVersion: t.exposeInt('schemaVersion'),
    fields: t.field({ type: [Field], resolve: (schema) => schema.fields }),
    uniqueRules: t.field({ type: [UniqueRule], resolve: (schema) => schema.uniqueRules }),
    foreignKeys: t.field({ type: [ForeignKey], resolve: (schema) => schema.foreignKeys }),
    indexes: t.field({ type: [SortIndex], resolve: (schema) => schema.indexes }),
  }),
});

export function toUniqueRuleShape(tableId: string, rule: UniqueRuleDefinition): UniqueRuleShape {
  return {
    id: rule.id,
    tableId,
    fieldIds: rule.fieldIds,
    where: (rule.where ?? null) as Json,
    state: rule.state,
    referenceable: rule.enforcement === 'btree' && (rule.where === null || rule.where === undefined),
    createdAt: rule.createdAt,
  };
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
    indexes: schema.indexes,
  };
}

/** The table's current definition (cached per schema version); 404 for a table outside this org and database. */
export async function currentSchema(context: Context, address: TableAddress): Promise<TableSchema> {
  const head = await loadTableHead(dataPlane(context), address);
  return context.schemas.get(context.prisma, head);
}

/**
 * The definition of a table the request already read (an edge's parent), at the version it was read: cached ones
 * cost nothing, and the rest of a page of tables is read in one statement (SchemaCache.getMany).
 */
export function schemaOfTable(context: Context, table: TableVersion): Promise<TableSchema> {
  const loader = requestLoader<TableVersion, TableSchema>(
    context,
    'tableSchemas',
    async (tables) => {
      const found = await context.schemas.getMany(context.prisma, tables);
      return tables.map((head) => found.get(head.id) ?? notFound('table'));
    },
    (head) => `${head.id}@${head.schemaVersion}`,
  );
  return loader.load(table);
}

/**
 * For a row create, which names the schema version it expects: the cached definition when it is at exactly that
 * version, without a lookup. The insert re-checks the version (and that the table is still active) in the
 * database, so a stale cache can only produce the SCHEMA_VERSION_CONFLICT the client's stale version deserves.
 * A table never moves between orgs or databases, so the cached address is as good as a fresh one.
 */
export async function schemaExpecting(
  context: Context,
  address: TableAddress,
  expectedSchemaVersion: number,
): Promise<TableSchema> {
  const cached = context.schemas.peek(address.tableId);
  const usable =
    cached?.schemaVersion === expectedSchemaVersion &&
    cached.orgId === address.orgId &&
    cached.databaseId === address.databaseId;
  return usable ? cached : currentSchema(context, address);
}

/**
 * Locks the table's catalog row for a schema change and checks the caller's `expectedSchemaVersion`. The lock
 * makes schema changes of one table take turns, and makes row writes (which update the same row) wait for them.
 */
export async function lockTableForSchemaChange(
  tx: TransactionClient,
  address: TableAddress,
  expectedSchemaVersion?: number,
): Promise<number> {
  const [row] = await tx.$queryRaw<{ schema_version: number }[]>(lockTableSchemaVersion(address));
  if (!row) throw notFound('table');
  if (expectedSchemaVersion !== undefined && expectedSchemaVersion !== row.schema_version)
    throw schemaVersionConflict(expectedSchemaVersion, row.schema_version);
  // A schema-change job of this table would otherwise fail at its cutover (the version moved): refuse this one instead.
  const [active] = await tx.$queryRaw<{ id: string }[]>(selectActiveJobBySerialKey(schemaSerialKey(address.tableId)));
  if (active) throw schemaMaintenance();
  return row.schema_version;
}

/** Every schema change ends here: the new schema version invalidates cached definitions everywhere. */
export async function bumpSchemaVersion(tx: TransactionClient, tableId: string): Promise<number> {
  const [row] = await tx.$queryRaw<{ schema_version: number }[]>(incrementSchemaVersion(tableId));
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
      toTableSchemaShape(
        await currentSchema(context, {
          orgId: String(args.orgId),
          databaseId: String(args.databaseId),
          tableId: String(args.tableId),
        }),
      ),
  }),
}));
