import { lockActiveTable, selectKeysReferencingTable, selectTrashedTable } from '../../catalog/tables.ts';
import { prismaExecutor } from '../../db/sql.ts';
import type { TransactionClient } from '../../db/prisma.ts';
import { trashTable } from '../../catalog/trash.ts';
import { DomainError, notFound } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { recordActivity } from '../../catalog/activity.ts';
import type { Caller } from '../../kernel/caller.ts';
import { requireCaller } from '../server/guards.ts';
import { builder } from '../server/builder.ts';
import type { Context } from '../server/context.ts';
import { DeleteInput, versionConflict } from '../databases/database-changes.ts';
import { nameTaken } from '../databases/databases.ts';
import { UpdateTableBody } from '../../contracts/tables.ts';
import { idempotent } from '../../idempotency/run.ts';
import { isUniqueViolation } from '../../db/pg-errors.ts';
import { purgeTime, schedulePurge, toTrashEntryShape, TrashEntry, type TrashEntryShape } from '../trash/entries.ts';
import { addressOf, tableAddressArgs } from './address.ts';
import type { TableAddress } from '../../catalog/table-schema.ts';
import { lockTableForSchemaChange } from './schema-endpoint.ts';
import { Table, toTableShape, withFields, type TableShape } from './tables.ts';

/**
 * Renaming a table (`table.update`) and moving it to the trash (`table.delete`, issue 13). A rename touches only
 * the catalog row, so it is immediate rather than an `updateTable` job, and leaves `schemaVersion` alone: rows,
 * views and imports address fields by id, never by the table's name.
 */
const UpdateTableInput = builder
  .inputType('UpdateTableInput', {
    fields: (t) => ({ expectedVersion: t.string({ required: true }), name: t.string({ required: true }) }),
  })
  .validate(UpdateTableBody);

/** The active table, locked (row writes and schema changes wait), at the caller's version. */
async function lockTable(tx: TransactionClient, address: TableAddress, expectedVersion: string) {
  const [row] = await tx.$queryRaw<{ version: bigint; name: string }[]>(lockActiveTable(address));
  if (!row) throw notFound('table');
  if (row.version.toString() !== expectedVersion) throw versionConflict('table', expectedVersion, row.version);
  return row;
}

async function renameTable(
  tx: TransactionClient,
  caller: Caller,
  address: TableAddress,
  body: UpdateTableBody,
): Promise<TableShape> {
  const before = await lockTable(tx, address, body.expectedVersion);
  try {
    await tx.$executeRaw`SAVEPOINT rename_table`;
    await tx.dataTable.update({ where: { id: address.tableId }, data: { name: body.name, version: { increment: 1 } } });
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    await tx.$executeRaw`ROLLBACK TO SAVEPOINT rename_table`;
    throw nameTaken('table', body.name);
  }
  await recordActivity(tx, caller, {
    orgId: address.orgId,
    category: 'schema',
    event: 'table.update',
    summary: `Renamed table ${before.name} to ${body.name}`,
    databaseId: address.databaseId,
    tableId: address.tableId,
  });
  return toTableShape(await tx.dataTable.findUniqueOrThrow({ where: { id: address.tableId }, include: withFields }));
}

/**
 * Foreign keys of other tables that reference this one (a table's keys to itself go with it). Keys of tables in
 * the trash count too: their constraints stay in force until they are purged, so that a restore is exact.
 */
async function refuseIfReferenced(tx: TransactionClient, tableId: string): Promise<void> {
  const keys = await tx.$queryRaw<{ id: string; tableId: string; tableName: string; tableState: string }[]>(
    selectKeysReferencingTable(tableId),
  );
  if (keys.length === 0) return;
  throw new DomainError(
    'FOREIGN_KEY_CONFLICT',
    'Foreign keys of other tables reference this table; delete those keys first.',
    {
      details: {
        foreignKeys: keys.map((key) => ({
          id: key.id,
          tableId: key.tableId,
          tableName: key.tableName,
          trashed: key.tableState !== 'active',
        })),
      },
    },
  );
}

async function trash(
  tx: TransactionClient,
  context: Context,
  caller: Caller,
  address: TableAddress,
  expectedVersion: string,
): Promise<TrashEntryShape> {
  // Takes the catalog row lock and refuses while a schema change of the table is queued or running.
  await lockTableForSchemaChange(tx, address);
  const { name } = await lockTable(tx, address, expectedVersion);
  await refuseIfReferenced(tx, address.tableId);
  const purgeAfter = purgeTime(context);
  const purgeJobId = newId();
  await prismaExecutor(tx).run(
    trashTable(address.tableId, { actorId: caller.actorId, actorName: caller.name, purgeAfter, purgeJobId }),
  );
  await recordActivity(tx, caller, {
    orgId: address.orgId,
    category: 'schema',
    event: 'table.delete',
    databaseId: address.databaseId,
    tableId: address.tableId,
    summary: `Moved table ${name} to the trash until ${purgeAfter.toISOString()}`,
  });
  await schedulePurge(
    tx,
    context,
    caller,
    { kind: 'table', orgId: address.orgId, databaseId: address.databaseId, tableId: address.tableId, name },
    purgeAfter,
    purgeJobId,
  );
  const [row] = await tx.$queryRaw<{ version: bigint; deleted_at: Date; database_name: string }[]>(
    selectTrashedTable(address.tableId),
  );
  return toTrashEntryShape(address.orgId, {
    kind: 'table',
    id: address.tableId,
    name,
    databaseId: address.databaseId,
    databaseName: row!.database_name,
    version: row!.version.toString(),
    deletedAt: row!.deleted_at,
    deletedById: caller.actorId,
    deletedByName: caller.name,
    purgeAfter,
    purgeJobId,
  });
}

builder.mutationFields((t) => ({
  updateTable: t.field({
    type: Table,
    description:
      'Renames a table still at `expectedVersion` (event `table.update`); schemaVersion is unchanged. Needs schema-management authority.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      input: t.arg({ type: UpdateTableInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'manage' }, oauth: 'tables:manage' }),
    resolve: (_root, { input: body, ...args }, context) => {
      const address = addressOf(args);
      return idempotent(
        context,
        { operation: 'updateTable', key: args.idempotencyKey, input: { ...address, ...body } },
        (tx) => renameTable(tx, requireCaller(context), address, body),
      );
    },
  }),
  deleteTable: t.field({
    type: TrashEntry,
    description:
      'Moves a table to the trash at once (event `table.delete`); the `deleteTable` job purges it after ' +
      'TRASH_RETENTION_DAYS unless it is restored first. Refused (409 FOREIGN_KEY_CONFLICT) while another table’s foreign key references it.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      input: t.arg({ type: DeleteInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'manage' }, oauth: 'tables:manage' }),
    resolve: (_root, { input: body, ...args }, context) => {
      const address = addressOf(args);
      return idempotent(
        context,
        { operation: 'deleteTable', key: args.idempotencyKey, input: { ...address, ...body } },
        (tx) => trash(tx, context, requireCaller(context), address, body.expectedVersion),
      );
    },
  }),
}));
