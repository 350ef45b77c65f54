import type { TransactionClient } from '../../db/prisma.ts';
import type { TrashEntryRow, TrashKind } from '../../catalog/trash.ts';
import { newId } from '../../kernel/ids.ts';
import type { Caller } from '../../kernel/caller.ts';
import { builder } from '../server/builder.ts';
import type { Context } from '../server/context.ts';
import { enqueueJob, statusUrlOf } from '../jobs/enqueue.ts';
import { schemaSerialKey } from '../../jobs/engine/kinds.ts';

/** One restorable thing in an org's trash: what it was, who deleted it, when, and until when it can come back. */
export type TrashEntryShape = {
  id: string;
  kind: TrashKind;
  name: string;
  databaseId: string | null;
  databaseName: string | null;
  version: string;
  deletedAt: string;
  deletedBy: { id: string; name: string };
  purgeAfter: string;
  purgeJobId: string;
  purgeJobUrl: string;
};

const TrashActor = builder.objectRef<TrashEntryShape['deletedBy']>('TrashActor').implement({
  fields: (t) => ({ id: t.exposeID('id'), name: t.exposeString('name') }),
});

export const TrashEntry = builder.objectRef<TrashEntryShape>('TrashEntry').implement({
  description:
    'A database or table in the trash (issue 13): restorable until `purgeAfter`, when its purge job removes it for good.',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'The database’s or table’s own id.' }),
    kind: t.exposeString('kind', { description: '`database` or `table`' }),
    name: t.exposeString('name'),
    databaseId: t.exposeID('databaseId', { nullable: true, description: 'The table’s database; null for a database.' }),
    databaseName: t.exposeString('databaseName', { nullable: true }),
    version: t.exposeString('version'),
    deletedAt: t.field({ type: 'Timestamp', resolve: (entry) => entry.deletedAt }),
    deletedBy: t.field({ type: TrashActor, resolve: (entry) => entry.deletedBy }),
    purgeAfter: t.field({ type: 'Timestamp', resolve: (entry) => entry.purgeAfter }),
    purgeJobId: t.exposeID('purgeJobId'),
    purgeJobUrl: t.exposeString('purgeJobUrl', { description: 'The purge job’s status address.' }),
  }),
});

export function toTrashEntryShape(orgId: string, row: TrashEntryRow): TrashEntryShape {
  return {
    id: row.id,
    kind: row.kind,
    name: row.name,
    databaseId: row.databaseId,
    databaseName: row.databaseName,
    version: row.version,
    deletedAt: new Date(row.deletedAt).toISOString(),
    deletedBy: { id: row.deletedById, name: row.deletedByName },
    purgeAfter: new Date(row.purgeAfter).toISOString(),
    purgeJobId: row.purgeJobId,
    purgeJobUrl: statusUrlOf(orgId, row.purgeJobId),
  };
}

export interface PurgeTarget {
  kind: TrashKind;
  orgId: string;
  databaseId: string;
  tableId?: string;
  name: string;
}

/** When a thing trashed now is purged: TRASH_RETENTION_DAYS from now (fractions allowed, so tests can use seconds). */
export function purgeTime(context: Context): Date {
  return new Date(Date.now() + context.config.TRASH_RETENTION_DAYS * 86_400_000);
}

/**
 * Schedules the purge of something just moved to the trash, in the same transaction: the job is due at
 * `purgeAfter` and does nothing unless the entry is still in the trash under this job's id when it runs.
 * A table's purge holds the table's schema-change key, so no schema change can be queued against it meanwhile.
 */
export async function schedulePurge(
  tx: TransactionClient,
  context: Context,
  caller: Caller,
  target: PurgeTarget,
  purgeAfter: Date,
  jobId = newId(),
) {
  const what = target.kind === 'database' ? 'database' : 'table';
  return enqueueJob(
    tx,
    caller,
    {
      kind: target.kind === 'database' ? 'deleteDatabase' : 'deleteTable',
      category: 'schema',
      orgId: target.orgId,
      databaseId: target.databaseId,
      ...(target.tableId ? { tableId: target.tableId, serialKey: schemaSerialKey(target.tableId) } : {}),
      payload: {
        orgId: target.orgId,
        databaseId: target.databaseId,
        ...(target.tableId ? { tableId: target.tableId } : {}),
        name: target.name,
      },
      summary: `Scheduled the purge of ${what} ${target.name} for ${purgeAfter.toISOString()}`,
      queueLimit: context.config.JOB_QUEUE_LIMIT_PER_ORG,
      runAt: purgeAfter,
    },
    jobId,
  );
}
