import { lockActiveDatabase, selectTrashedDatabase } from '../../catalog/databases.ts';
import { prismaExecutor } from '../../db/sql.ts';
import type { TransactionClient } from '../../db/prisma.ts';
import { trashDatabase } from '../../catalog/trash.ts';
import { DomainError, notFound } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { recordActivity } from '../../catalog/activity.ts';
import type { Caller } from '../../kernel/caller.ts';
import { requireCaller } from '../server/guards.ts';
import { builder } from '../server/builder.ts';
import { Id } from '../../kernel/formats.ts';
import type { Context } from '../server/context.ts';
import { Database, nameTaken, toDatabaseShape, type DatabaseShape } from './databases.ts';
import { UpdateDatabaseBody } from '../../contracts/databases.ts';
import { DeleteBody } from '../../contracts/resources.ts';
import { idempotent } from '../../idempotency/run.ts';
import { isUniqueViolation } from '../../db/pg-errors.ts';
import { purgeTime, schedulePurge, toTrashEntryShape, TrashEntry, type TrashEntryShape } from '../trash/entries.ts';

/** Renaming a database (`database.update`) and moving it to the trash (`database.delete`, issue 13). */
const UpdateDatabaseInput = builder
  .inputType('UpdateDatabaseInput', {
    fields: (t) => ({ expectedVersion: t.string({ required: true }), name: t.string({ required: true }) }),
  })
  .validate(UpdateDatabaseBody);

export const DeleteInput = builder
  .inputType('DeleteInput', {
    description: 'Deletes the thing only while it is still at `expectedVersion` (else 409 ROW_VERSION_CONFLICT).',
    fields: (t) => ({ expectedVersion: t.string({ required: true }) }),
  })
  .validate(DeleteBody);

export function versionConflict(what: string, expected: string, current: bigint): DomainError {
  return new DomainError('ROW_VERSION_CONFLICT', `The ${what} was changed by someone else; reload it and retry.`, {
    details: { expectedVersion: expected, currentVersion: current.toString() },
  });
}

/** The active database, locked for the rest of the transaction and checked against the caller's version. */
async function lockDatabase(tx: TransactionClient, orgId: string, databaseId: string, expectedVersion: string) {
  const [row] = await tx.$queryRaw<{ version: bigint; name: string }[]>(lockActiveDatabase(orgId, databaseId));
  if (!row) throw notFound('database');
  if (row.version.toString() !== expectedVersion) throw versionConflict('database', expectedVersion, row.version);
  return row;
}

async function renameDatabase(
  tx: TransactionClient,
  caller: Caller,
  orgId: string,
  databaseId: string,
  body: UpdateDatabaseBody,
): Promise<DatabaseShape> {
  const before = await lockDatabase(tx, orgId, databaseId, body.expectedVersion);
  try {
    await tx.$executeRaw`SAVEPOINT rename_database`;
    const row = await tx.database.update({
      where: { id: databaseId },
      data: { name: body.name, version: { increment: 1 } },
    });
    await recordActivity(tx, caller, {
      orgId,
      category: 'schema',
      event: 'database.update',
      summary: `Renamed database ${before.name} to ${body.name}`,
      databaseId,
    });
    return toDatabaseShape(row);
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    await tx.$executeRaw`ROLLBACK TO SAVEPOINT rename_database`;
    throw nameTaken('database', body.name);
  }
}

async function trash(
  tx: TransactionClient,
  context: Context,
  caller: Caller,
  orgId: string,
  databaseId: string,
  expectedVersion: string,
): Promise<TrashEntryShape> {
  const { name } = await lockDatabase(tx, orgId, databaseId, expectedVersion);
  const purgeAfter = purgeTime(context);
  const purgeJobId = newId();
  const [database, tables] = trashDatabase(databaseId, {
    actorId: caller.actorId,
    actorName: caller.name,
    purgeAfter,
    purgeJobId,
  });
  await prismaExecutor(tx).run(database!);
  const trashedTables = await prismaExecutor(tx).run(tables!);
  await recordActivity(tx, caller, {
    orgId,
    category: 'schema',
    event: 'database.delete',
    databaseId,
    summary: `Moved database ${name} and its ${trashedTables.length} table(s) to the trash until ${purgeAfter.toISOString()}`,
  });
  await schedulePurge(tx, context, caller, { kind: 'database', orgId, databaseId, name }, purgeAfter, purgeJobId);
  const [row] = await tx.$queryRaw<{ version: bigint; deleted_at: Date }[]>(selectTrashedDatabase(databaseId));
  return toTrashEntryShape(orgId, {
    kind: 'database',
    id: databaseId,
    name,
    databaseId: null,
    databaseName: null,
    version: row!.version.toString(),
    deletedAt: row!.deleted_at,
    deletedById: caller.actorId,
    deletedByName: caller.name,
    purgeAfter,
    purgeJobId,
  });
}

const databaseArgs = builder.args((t) => ({
  idempotencyKey: t.string({ required: true }),
  orgId: t.id({ required: true, validate: Id }),
  databaseId: t.id({ required: true, validate: Id }),
}));

builder.mutationFields((t) => ({
  updateDatabase: t.field({
    type: Database,
    description:
      'Renames a database still at `expectedVersion` (event `database.update`). Needs schema-management authority.',
    args: { ...databaseArgs, input: t.arg({ type: UpdateDatabaseInput, required: true }) },
    authScopes: (_root, { orgId }) => ({
      org: { orgId: String(orgId), capability: 'manage' },
      oauth: 'databases:manage',
    }),
    resolve: (_root, args, context) => {
      const [orgId, databaseId] = [String(args.orgId), String(args.databaseId)];
      return idempotent(
        context,
        { operation: 'updateDatabase', key: args.idempotencyKey, input: { orgId, databaseId, ...args.input } },
        (tx) => renameDatabase(tx, requireCaller(context), orgId, databaseId, args.input),
      );
    },
  }),
  deleteDatabase: t.field({
    type: TrashEntry,
    description:
      'Moves a database and its tables to the trash at once (event `database.delete`); the `deleteDatabase` job ' +
      'purges it after TRASH_RETENTION_DAYS unless it is restored first.',
    args: { ...databaseArgs, input: t.arg({ type: DeleteInput, required: true }) },
    authScopes: (_root, { orgId }) => ({
      org: { orgId: String(orgId), capability: 'manage' },
      oauth: 'databases:manage',
    }),
    resolve: (_root, args, context) => {
      const [orgId, databaseId] = [String(args.orgId), String(args.databaseId)];
      return idempotent(
        context,
        { operation: 'deleteDatabase', key: args.idempotencyKey, input: { orgId, databaseId, ...args.input } },
        (tx) => trash(tx, context, requireCaller(context), orgId, databaseId, args.input.expectedVersion),
      );
    },
  }),
}));
