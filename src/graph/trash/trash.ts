import { z } from 'zod';
import type { TransactionClient } from '../../db/prisma.ts';
import { prismaExecutor } from '../../db/sql.ts';
import {
  restoreDatabase,
  restoreTable,
  selectTrashEntry,
  selectTrashPage,
  type TrashEntryRow,
} from '../../catalog/trash.ts';
import { notFound } from '../../kernel/errors.ts';
import { cancelQueued, requestCancel } from '../../jobs/engine/sql/queue.ts';
import { recordActivity } from '../../catalog/activity.ts';
import type { Caller } from '../../kernel/caller.ts';
import { requireCaller } from '../server/guards.ts';
import { builder } from '../server/builder.ts';
import { Id, Timestamp } from '../../kernel/formats.ts';
import { Cursor, cursorKey, decodeCursor, DEFAULT_PAGE_SIZE, encodeCursor, PageLimit } from '../../catalog/cursor.ts';
import { nameTaken } from '../databases/databases.ts';
import { idempotent } from '../../idempotency/run.ts';
import { pageOf, pageRef } from '../shared/pages.ts';
import { isUniqueViolation } from '../../db/pg-errors.ts';
import { toTrashEntryShape, TrashEntry } from './entries.ts';

/**
 * The org's trash (issue 13): what can still be restored, and the restore itself. A restore flips the catalog rows
 * back (rows, history, rules, keys, views and schema version never moved) and cancels the scheduled purge.
 */
export type RestoredShape = {
  id: string;
  kind: string;
  name: string;
  databaseId: string | null;
  version: string;
  restoredTables: number;
};

const Restored = builder.objectRef<RestoredShape>('RestoredEntry').implement({
  description: 'A database or table brought back from the trash, exactly as it was.',
  fields: (t) => ({
    id: t.exposeID('id'),
    kind: t.exposeString('kind', { description: '`database` or `table`' }),
    name: t.exposeString('name'),
    databaseId: t.exposeID('databaseId', { nullable: true }),
    version: t.exposeString('version'),
    restoredTables: t.exposeInt('restoredTables', {
      description: 'Tables that came back with a database (they were trashed with it); 1 for a table.',
    }),
  }),
});

const TrashPage = pageRef('TrashPage', TrashEntry, 'A page of the trash, most recently deleted first.');
const TrashPosition = z.strictObject({ deletedAt: Timestamp, id: Id });

async function restore(tx: TransactionClient, caller: Caller, orgId: string, id: string): Promise<RestoredShape> {
  const [entry] = await prismaExecutor(tx).run<TrashEntryRow>(selectTrashEntry(orgId, id));
  if (!entry) throw notFound('trash entry');
  const statements = entry.kind === 'database' ? restoreDatabase(id) : [restoreTable(id)];
  let restoredTables = entry.kind === 'table' ? 1 : 0;
  try {
    await tx.$executeRaw`SAVEPOINT restore_entry`;
    const [restored] = await prismaExecutor(tx).run(statements[0]!);
    // No row: the purge job claimed it between the read and this UPDATE; it is going, as if already purged.
    if (!restored) throw notFound('trash entry');
    if (statements[1]) restoredTables = (await prismaExecutor(tx).run(statements[1])).length;
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    await tx.$executeRaw`ROLLBACK TO SAVEPOINT restore_entry`;
    throw nameTaken(entry.kind, entry.name);
  }
  // A purge still waiting is cancelled; one a worker has just claimed stops at its first step (the entry is no
  // longer in the trash under its id).
  const [cancelled] = await prismaExecutor(tx).run(cancelQueued(entry.purgeJobId));
  if (!cancelled) await prismaExecutor(tx).run(requestCancel(entry.purgeJobId));
  const databaseId = entry.kind === 'database' ? id : entry.databaseId!;
  await recordActivity(tx, caller, {
    orgId,
    category: 'schema',
    event: entry.kind === 'database' ? 'database.restore' : 'table.update',
    databaseId,
    ...(entry.kind === 'table' ? { tableId: id } : {}),
    summary: `Restored ${entry.kind} ${entry.name} from the trash`,
  });
  const version =
    entry.kind === 'database'
      ? (await tx.database.findUniqueOrThrow({ where: { id }, select: { version: true } })).version
      : (await tx.dataTable.findUniqueOrThrow({ where: { id }, select: { version: true } })).version;
  return {
    id,
    kind: entry.kind,
    name: entry.name,
    databaseId: entry.databaseId,
    version: version.toString(),
    restoredTables,
  };
}

builder.queryFields((t) => ({
  trash: t.field({
    type: TrashPage,
    description: 'Databases and tables in the trash: who deleted them, when, and until when they can be restored.',
    args: {
      orgId: t.arg.id({ required: true, validate: Id }),
      limit: t.arg.int({ validate: PageLimit.optional() }),
      cursor: t.arg.string({ validate: Cursor.optional() }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'databases:read' }),
    resolve: async (_root, args, context) => {
      const orgId = String(args.orgId);
      const limit = args.limit ?? DEFAULT_PAGE_SIZE;
      const key = await cursorKey(context.prisma);
      const scope = `trash:${orgId}`;
      const after = args.cursor ? decodeCursor(key, scope, args.cursor, TrashPosition) : null;
      const statement = selectTrashPage(orgId, after, limit + 1);
      const rows = await context.prisma.$queryRawUnsafe<TrashEntryRow[]>(statement.sql, ...statement.params);
      return pageOf(
        rows,
        limit,
        (row) => toTrashEntryShape(orgId, row),
        (last) => {
          const entry = toTrashEntryShape(orgId, last);
          return encodeCursor(key, scope, { deletedAt: entry.deletedAt, id: entry.id });
        },
      );
    },
  }),
}));

builder.mutationFields((t) => ({
  restoreFromTrash: t.field({
    type: Restored,
    description:
      'Brings a database (with the tables trashed with it) or a table back exactly as it was, and cancels its purge. ' +
      'After the purge: 404. Its name taken meanwhile: 409 UNIQUE_CONFLICT.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      orgId: t.arg.id({ required: true, validate: Id }),
      id: t.arg.id({ required: true, validate: Id }),
    },
    authScopes: (_root, { orgId }) => ({
      org: { orgId: String(orgId), capability: 'manage' },
      oauth: 'databases:manage',
    }),
    resolve: (_root, args, context) => {
      const [orgId, id] = [String(args.orgId), String(args.id)];
      return idempotent(
        context,
        { operation: 'restoreFromTrash', key: args.idempotencyKey, input: { orgId, id } },
        (tx) => restore(tx, requireCaller(context), orgId, id),
      );
    },
  }),
}));
