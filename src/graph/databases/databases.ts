import type { TransactionClient } from '../../db/prisma.ts';
import { createDatabaseSchema } from '../../data/ddl.ts';
import { DomainError, notFound } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { recordActivity } from '../../catalog/activity.ts';
import type { Caller } from '../../kernel/caller.ts';
import { requireCaller } from '../server/guards.ts';
import { builder } from '../server/builder.ts';
import { Id } from '../../kernel/formats.ts';
import { idempotent } from '../../idempotency/run.ts';
import { pageRef, type PageArgs } from '../shared/pages.ts';
import { pageArgs, pageById } from '../server/paged.ts';
import type { Context } from '../server/context.ts';
import { isUniqueViolation } from '../../db/pg-errors.ts';
import { CreateDatabaseBody } from '../../contracts/databases.ts';

/** A workspace database: a named container of tables, stored as one PostgreSQL schema (DESIGN §2). */
export interface DatabaseShape {
  [key: string]: string;
  id: string;
  orgId: string;
  name: string;
  state: string;
  version: string;
  createdAt: string;
  updatedAt: string;
}

export const Database = builder.objectRef<DatabaseShape>('Database').implement({
  description: 'A workspace database. Its tables live in their own PostgreSQL schema.',
  fields: (t) => ({
    id: t.exposeID('id'),
    orgId: t.exposeID('orgId'),
    name: t.exposeString('name'),
    state: t.exposeString('state', { description: '`active`' }),
    version: t.exposeString('version'),
    createdAt: t.field({ type: 'Timestamp', resolve: (database) => database.createdAt }),
    updatedAt: t.field({ type: 'Timestamp', resolve: (database) => database.updatedAt }),
  }),
});

export const DatabasePage = pageRef('DatabasePage', Database, 'A page of databases, oldest first.');

const CreateDatabaseInput = builder
  .inputType('CreateDatabaseInput', { fields: (t) => ({ name: t.string({ required: true }) }) })
  .validate(CreateDatabaseBody);

interface DatabaseRow {
  id: string;
  orgId: string;
  name: string;
  state: string;
  version: bigint;
  createdAt: Date;
  updatedAt: Date;
}

export function toDatabaseShape(row: DatabaseRow): DatabaseShape {
  return {
    id: row.id,
    orgId: row.orgId,
    name: row.name,
    state: row.state,
    version: row.version.toString(),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

export function nameTaken(kind: string, name: string): DomainError {
  return new DomainError(
    'UNIQUE_CONFLICT',
    `A ${kind} named "${name}" already exists here; names are unique ignoring case.`,
    {
      details: { resource: kind, fields: ['name'], name },
    },
  );
}

async function createDatabase(
  tx: TransactionClient,
  caller: Caller,
  orgId: string,
  name: string,
): Promise<DatabaseShape> {
  const id = newId();
  try {
    await tx.$executeRaw`SAVEPOINT create_database`;
    const row = await tx.database.create({ data: { id, orgId, name } });
    for (const statement of createDatabaseSchema(id)) await tx.$executeRawUnsafe(statement.sql, ...statement.params);
    await recordActivity(tx, caller, {
      orgId,
      category: 'schema',
      event: 'database.create',
      summary: `Created database ${name}`,
      databaseId: id,
    });
    return toDatabaseShape(row);
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    await tx.$executeRaw`ROLLBACK TO SAVEPOINT create_database`;
    throw nameTaken('database', name);
  }
}

/** The org's active databases, oldest first: the `databases` query and the `Org.databases` edge. */
export function listDatabases(context: Context, orgId: string, page: PageArgs) {
  return pageById(context, page, {
    scope: `databases:${orgId}`,
    fetch: ({ after, limit }) =>
      context.prisma.database.findMany({
        where: { orgId, state: 'active', ...(after ? { id: { gt: after } } : {}) },
        orderBy: { id: 'asc' },
        take: limit + 1,
      }),
    toItem: toDatabaseShape,
  });
}

builder.queryFields((t) => ({
  database: t.field({
    type: Database,
    args: { orgId: t.arg.id({ required: true, validate: Id }), databaseId: t.arg.id({ required: true, validate: Id }) },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'databases:read' }),
    resolve: async (_root, { orgId, databaseId }, context) => {
      const row = await context.prisma.database.findFirst({
        where: { id: String(databaseId), orgId: String(orgId), state: 'active' },
      });
      if (!row) throw notFound('database');
      return toDatabaseShape(row);
    },
  }),
  databases: t.field({
    type: DatabasePage,
    args: {
      orgId: t.arg.id({ required: true, validate: Id }),
      ...pageArgs,
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'databases:read' }),
    resolve: (_root, args, context) => listDatabases(context, String(args.orgId), args),
  }),
}));

builder.mutationFields((t) => ({
  createDatabase: t.field({
    type: Database,
    description: 'Creates a database (event `database.create`). Needs schema-management authority.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      orgId: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: CreateDatabaseInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({
      org: { orgId: String(orgId), capability: 'manage' },
      oauth: 'databases:manage',
    }),
    resolve: (_root, { idempotencyKey, orgId, input }, context) => {
      const target = String(orgId);
      return idempotent(
        context,
        { operation: 'createDatabase', key: idempotencyKey, input: { orgId: target, ...input } },
        (tx) => createDatabase(tx, requireCaller(context), target, input.name),
      );
    },
  }),
}));
