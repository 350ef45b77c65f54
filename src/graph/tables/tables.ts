import { pageById } from '../server/paged.ts';
import { selectTablePageIds, type TablePageKey } from '../../catalog/tables.ts';
import type { PrismaClient, TransactionClient } from '../../db/prisma.ts';
import { createTable as createTableDdl } from '../../data/ddl.ts';
import { type FieldInput, resolvedOptions, type FieldDefinition, type FieldType } from '../../data/field-types.ts';
import { notFound } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { recordActivity } from '../../catalog/activity.ts';
import type { Caller } from '../../kernel/caller.ts';
import { requireCaller } from '../server/guards.ts';
import { builder } from '../server/builder.ts';
import { Id, type Json } from '../../kernel/formats.ts';
import { Cursor, PageLimit } from '../../catalog/cursor.ts';
import { nameTaken } from '../databases/databases.ts';
import { CreateTableBody } from '../../contracts/tables.ts';
import { idempotent } from '../../idempotency/run.ts';
import { pageRef, type PageArgs, type PageShape } from '../shared/pages.ts';
import { dataPlane, type Context } from '../server/context.ts';
import { requestLoader } from '../server/loaders.ts';
import { isUniqueViolation } from '../../db/pg-errors.ts';

export type FieldShape = {
  id: string;
  name: string;
  type: FieldType;
  required: boolean;
  options: { [key: string]: Json };
  position: number;
};

export type TableShape = {
  id: string;
  orgId: string;
  databaseId: string;
  name: string;
  state: string;
  version: string;
  schemaVersion: number;
  /** Moves when the table's sort indexes change (issue 14), so cached definitions are re-read. */
  indexVersion: number;
  fields: FieldShape[];
  createdAt: string;
  updatedAt: string;
};

export const Field = builder.objectRef<FieldShape>('Field').implement({
  description: 'A typed field (column) of a table. Row values are keyed by field id.',
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    type: t.exposeString('type', {
      description:
        'text, longText, integer, number, boolean, date, datetime, email, url, select, multiSelect, json or autoNumber',
    }),
    required: t.exposeBoolean('required'),
    options: t.field({
      type: 'JSON',
      description: 'The type’s settings with their defaults applied.',
      resolve: (field) => field.options,
    }),
    position: t.exposeInt('position'),
  }),
});

export const Table = builder.objectRef<TableShape>('Table').implement({
  description: 'A table of a workspace database.',
  fields: (t) => ({
    id: t.exposeID('id'),
    orgId: t.exposeID('orgId'),
    databaseId: t.exposeID('databaseId'),
    name: t.exposeString('name'),
    state: t.exposeString('state', { description: '`active`' }),
    version: t.exposeString('version'),
    schemaVersion: t.exposeInt('schemaVersion', {
      description: 'Bumped by every schema change; row writes send it as `expectedSchemaVersion`.',
    }),
    fields: t.field({ type: [Field], resolve: (table) => table.fields }),
    createdAt: t.field({ type: 'Timestamp', resolve: (table) => table.createdAt }),
    updatedAt: t.field({ type: 'Timestamp', resolve: (table) => table.updatedAt }),
  }),
});

export const TablePage = pageRef('TablePage', Table, 'A page of tables, oldest first.');

const FieldDefinitionInput = builder.inputType('FieldDefinitionInput', {
  fields: (t) => ({
    name: t.string({ required: true }),
    type: t.string({ required: true }),
    required: t.boolean(),
    options: t.field({ type: 'JSON' }),
  }),
});

const CreateTableInput = builder
  .inputType('CreateTableInput', {
    fields: (t) => ({
      name: t.string({ required: true }),
      fields: t.field({ type: [FieldDefinitionInput], required: true }),
    }),
  })
  .validate(CreateTableBody);

interface TableRow {
  id: string;
  orgId: string;
  databaseId: string;
  name: string;
  state: string;
  version: bigint;
  schemaVersion: number;
  indexVersion: number;
  createdAt: Date;
  updatedAt: Date;
  fields: { id: string; name: string; type: string; required: boolean; options: unknown; position: number }[];
}

export function toFieldShape(field: TableRow['fields'][number] | FieldDefinition): FieldShape {
  return {
    id: field.id,
    name: field.name,
    type: field.type as FieldType,
    required: field.required,
    options: field.options as FieldShape['options'],
    position: field.position,
  };
}

export function toTableShape(row: TableRow): TableShape {
  return {
    id: row.id,
    orgId: row.orgId,
    databaseId: row.databaseId,
    name: row.name,
    state: row.state,
    version: row.version.toString(),
    schemaVersion: row.schemaVersion,
    indexVersion: row.indexVersion,
    fields: row.fields.map(toFieldShape),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

export const withFields = { fields: { orderBy: { position: 'asc' } } } as const;

export async function requireDatabase(
  db: PrismaClient | TransactionClient,
  orgId: string,
  databaseId: string,
): Promise<void> {
  const database = await db.database.findFirst({
    where: { id: databaseId, orgId, state: 'active' },
    select: { id: true },
  });
  if (!database) throw notFound('database');
}

async function createTable(
  tx: TransactionClient,
  caller: Caller,
  orgId: string,
  databaseId: string,
  body: CreateTableBody,
): Promise<TableShape> {
  await requireDatabase(tx, orgId, databaseId);
  const tableId = newId();
  const fields: FieldDefinition[] = body.fields.map((field, position) => {
    // FieldInput's zod union is declared loosely (one member per type); its output is this shape.
    const input = field as FieldInput;
    return {
      id: newId(),
      name: input.name,
      type: input.type,
      required: input.required ?? false,
      options: resolvedOptions(input.type, input.options),
      position,
    };
  });
  try {
    await tx.$executeRaw`SAVEPOINT create_table`;
    await tx.dataTable.create({ data: { id: tableId, orgId, databaseId, name: body.name } });
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    await tx.$executeRaw`ROLLBACK TO SAVEPOINT create_table`;
    throw nameTaken('table', body.name);
  }
  await tx.field.createMany({ data: fields.map((field) => ({ ...field, options: field.options as object, tableId })) });
  for (const statement of createTableDdl(databaseId, tableId, fields))
    await tx.$executeRawUnsafe(statement.sql, ...statement.params);
  await recordActivity(tx, caller, {
    orgId,
    category: 'schema',
    event: 'table.create',
    summary: `Created table ${body.name}`,
    databaseId,
    tableId,
  });
  const row = await tx.dataTable.findUniqueOrThrow({ where: { id: tableId }, include: withFields });
  return toTableShape(row);
}

async function loadTablePages(context: Context, keys: readonly TablePageKey[]): Promise<TableRow[][]> {
  const page = selectTablePageIds(keys);
  const picked = await dataPlane(context).run<{ index: number; id: string }>(page);
  const rows =
    picked.length === 0
      ? []
      : await context.prisma.dataTable.findMany({
          where: { id: { in: picked.map((pick) => pick.id) } },
          include: withFields,
          orderBy: { id: 'asc' },
        });
  const byId = new Map(rows.map((row) => [row.id, row]));
  const pages: TableRow[][] = keys.map(() => []);
  for (const pick of picked) {
    const row = byId.get(pick.id);
    if (row) pages[pick.index - 1]!.push(row);
  }
  return pages.map((page) => page.sort((a, b) => (a.id < b.id ? -1 : 1)));
}

/**
 * A page of a database's tables, oldest first: the `tables` query and the `Database.tables` edge. Pages of many
 * databases asked in one request are read together (two statements for any number of databases).
 */
export async function pageOfTables(
  context: Context,
  orgId: string,
  databaseId: string,
  page: PageArgs,
): Promise<PageShape<TableShape>> {
  const loader = requestLoader<TablePageKey, TableRow[]>(
    context,
    'tablePages',
    (keys) => loadTablePages(context, keys),
    (k) => JSON.stringify(k),
  );
  return pageById(context, page, {
    scope: `tables:${databaseId}`,
    fetch: ({ after, limit }) => loader.load({ orgId, databaseId, afterId: after ?? null, take: limit + 1 }),
    toItem: toTableShape,
  });
}

builder.queryFields((t) => ({
  table: t.field({
    type: Table,
    args: {
      orgId: t.arg.id({ required: true, validate: Id }),
      databaseId: t.arg.id({ required: true, validate: Id }),
      tableId: t.arg.id({ required: true, validate: Id }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'tables:read' }),
    resolve: async (_root, { orgId, databaseId, tableId }, context) => {
      const row = await context.prisma.dataTable.findFirst({
        where: { id: String(tableId), databaseId: String(databaseId), orgId: String(orgId), state: 'active' },
        include: withFields,
      });
      if (!row) throw notFound('table');
      return toTableShape(row);
    },
  }),
  tables: t.field({
    type: TablePage,
    args: {
      orgId: t.arg.id({ required: true, validate: Id }),
      databaseId: t.arg.id({ required: true, validate: Id }),
      limit: t.arg.int({ validate: PageLimit.optional() }),
      cursor: t.arg.string({ validate: Cursor.optional() }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'tables:read' }),
    resolve: async (_root, args, context) => {
      const [orgId, databaseId] = [String(args.orgId), String(args.databaseId)];
      await requireDatabase(context.prisma, orgId, databaseId);
      return pageOfTables(context, orgId, databaseId, args);
    },
  }),
}));

builder.mutationFields((t) => ({
  createTable: t.field({
    type: Table,
    description:
      'Creates a table with its fields at schemaVersion 1 (event `table.create`). Needs schema-management authority.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      orgId: t.arg.id({ required: true, validate: Id }),
      databaseId: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: CreateTableInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'manage' }, oauth: 'tables:manage' }),
    resolve: (_root, { idempotencyKey, orgId, databaseId, input: body }, context) => {
      const [org, database] = [String(orgId), String(databaseId)];
      return idempotent(
        context,
        { operation: 'createTable', key: idempotencyKey, input: { orgId: org, databaseId: database, ...body } },
        (tx) => createTable(tx, requireCaller(context), org, database, body),
      );
    },
  }),
}));
