import { z } from 'zod';
import type { Statement } from '../../../data/statement.ts';
import { dropTableData, markPurging, selectPurgedTables, type TrashKind } from '../../../catalog/trash.ts';
import { JobCancelled, type JobRun } from '../../engine/handler.ts';
import { Id } from '../../../kernel/formats.ts';

/**
 * What the two purge jobs (`deleteDatabase`, `deleteTable`) share. A purge is scheduled at delete time for
 * `purgeAfter`; it first claims its trash entry (state `purging`), which only succeeds while the entry is still
 * in the trash under this job's id — after a restore it stops as cancelled. Then it drops the physical objects one
 * per step (each DROP … IF EXISTS, so a resumed purge repeats nothing harmful) and deletes the catalog rows last.
 */

export const PurgePayload = z.object({ orgId: Id, databaseId: Id, tableId: Id.optional(), name: z.string() });
export type PurgePayload = z.infer<typeof PurgePayload>;

/** `hashedRuleIds` is absent from the journals of purges started before hashed rules were dropped with their table. */
export type PurgedTable = { id: string; sequenceFieldIds: string[]; hashedRuleIds?: string[] };

/**
 * The purge kinds. Users neither cancel nor retry them: a cancelled purge would leave its entry in the trash with
 * nothing left to purge it, and a restore is the way to keep what is in the trash.
 */
export const PURGE_KINDS: ReadonlySet<string> = new Set(['deleteDatabase', 'deleteTable']);

export type PurgeJournal = {
  phase: 'drop' | 'catalog' | 'done';
  tables: PurgedTable[];
  /** Drop statements committed so far. */
  dropped: number;
};

/** Step 1: claims the entry and notes what there is to drop. A restored entry ends the job as cancelled. */
export async function claimEntry(run: JobRun<PurgePayload, PurgeJournal>, kind: TrashKind, id: string): Promise<void> {
  let claimed = true;
  await run.step(async (sql) => {
    claimed = (await sql.run(markPurging(kind, id, run.job.id))).length === 1;
    const tables = claimed
      ? await sql.query<PurgedTable>(selectPurgedTables(kind === 'database' ? 'database_id' : 'id', id).sql, [id])
      : [];
    return { journal: { phase: 'drop', tables, dropped: 0 }, progress: { done: 0, total: null } };
  });
  if (!claimed) throw new JobCancelled();
}

/** The drop statements in order: every table's data, then whatever `after` adds (a database's schema). */
export function dropPlan(databaseId: string, tables: readonly PurgedTable[], after: Statement[] = []): Statement[] {
  return [
    ...tables.flatMap((table) => dropTableData(databaseId, table.id, table.sequenceFieldIds, table.hashedRuleIds)),
    ...after,
  ];
}

/** One step per DROP, so that no step holds locks on more than one object, and a crash loses at most one. */
export async function dropInSteps(run: JobRun<PurgePayload, PurgeJournal>, plan: readonly Statement[]): Promise<void> {
  const journal = run.journal as PurgeJournal;
  for (let index = journal.dropped; index < plan.length; index += 1) {
    await run.step(async (sql) => {
      await sql.run(plan[index]!);
      const done = index + 1;
      return {
        journal: { ...journal, phase: done === plan.length ? 'catalog' : 'drop', dropped: done },
        progress: { done, total: plan.length + 1 },
      };
    });
  }
  if (plan.length === 0)
    await run.step(async () => ({ journal: { ...journal, phase: 'catalog' }, progress: { done: 0, total: 1 } }));
}

/** The last step: the catalog rows (fields, rules, keys, views follow by cascade). */
export async function deleteCatalog(
  run: JobRun<PurgePayload, PurgeJournal>,
  statements: readonly Statement[],
): Promise<void> {
  const journal = run.journal as PurgeJournal;
  await run.step(async (sql) => {
    await sql.runEach(statements);
    const total = journal.dropped + 1;
    return { journal: { ...journal, phase: 'done' }, progress: { done: total, total } };
  });
}
