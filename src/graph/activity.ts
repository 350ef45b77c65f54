import type { TransactionClient } from '../db/prisma.ts';
import type { Actor } from '../data/rows.ts';
import { newId } from '../ids.ts';
import type { Caller } from './auth/caller.ts';

/** Spec 2.10 categories. */
export type ActivityCategory = 'records' | 'schema' | 'imports' | 'exports' | 'backups' | 'restores';

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
  mutationId?: string;
}

/** The audit feed's view of a caller: who it was at the time, kept even if they are renamed or removed later. */
export function actorOf(caller: Caller): Actor {
  return { id: caller.actorId, kind: caller.kind, name: caller.name, key: caller.credential.prefix };
}

/** Writes an activity event in the caller's transaction, so it exists exactly when the change does (DESIGN §4). */
export async function recordActivity(tx: TransactionClient, caller: Caller, input: ActivityInput): Promise<void> {
  const actor = actorOf(caller);
  await tx.activityEvent.create({
    data: { id: newId(), ...input, actorId: actor.id, actorKind: actor.kind, actorKey: actor.key, actorName: actor.name },
  });
}
