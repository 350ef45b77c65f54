import type { TransactionClient } from '../db/prisma.ts';
import { prismaExecutor } from '../db/sql.ts';
import { insertActivity, type Actor } from '../data/activity.ts';
import type { ActivityCategory } from '../kernel/formats.ts';
import { newId } from '../kernel/ids.ts';
import type { Caller } from '../kernel/caller.ts';

/** The event kinds of spec §6 that are not a job's; job events are listed with the job kinds (src/jobs/engine/kinds.ts). */
export const PLAIN_EVENTS = [
  'backup.failed.detected',
  'backup.failed.resolved',
  'backup.overdue.detected',
  'backup.overdue.resolved',
  'database.backup.prune',
  'database.backup_policy.update',
  'database.backup_schedule.update',
  'database.backup_schedule.delete',
  'database.create',
  'database.delete',
  'database.restore',
  'database.update',
  'field.create',
  'field.convert',
  'field.delete',
  'field.update',
  'fields.reorder',
  'records.changed',
  'table.create',
  'table.delete',
  'table.update',
  'foreign-key.create',
  'foreign-key.delete',
  'rule.create',
  'rule.delete',
  'webhook.create',
  'webhook.update',
  'webhook.delete',
  'webhook.enable',
  'webhook.disable',
  'webhook.rotate_secret',
  'webhook.replay',
] as const;

export interface ActivityInput {
  orgId: string;
  category: ActivityCategory;
  /** One of the event kinds of spec §6. */
  event: string;
  summary: string;
  databaseId?: string;
  tableId?: string;
  rowId?: string;
  affectedRows?: number;
  jobId?: string;
  fileName?: string;
  mutationId?: string;
}

/** The audit feed's view of a caller: who it was at the time, kept even if they are renamed or removed later. */
export function actorOf(caller: Caller): Actor {
  return { id: caller.actorId, kind: caller.kind, name: caller.name, key: caller.credential.prefix };
}

/** Writes an activity event in the caller's transaction, so it exists exactly when the change does (DESIGN §4). */
export async function recordActivity(tx: TransactionClient, caller: Caller, input: ActivityInput): Promise<void> {
  await prismaExecutor(tx).run(
    insertActivity({ id: newId(), occurredAt: new Date().toISOString(), ...input, actor: actorOf(caller) }),
  );
}
