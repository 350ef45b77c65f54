import { z } from 'zod';
import { outsideTransaction, pgExecutor } from '../../../db/sql.ts';
import { dropSortIndex } from '../../../data/sort-indexes.ts';
import * as catalog from '../../../catalog/table-indexes.ts';
import type { JobHandler, JobOutcome, JobRun } from '../../engine/handler.ts';
import { ensureSortIndex } from './index-changes.ts';
import { UpdateTableResult } from './results.ts';

/**
 * updateTable (`table.update`): the automatic index a shared view's order needs (issue 14). It builds the index its
 * row asks for and marks it ready, or drops it when its row is gone; it never moves `schemaVersion`.
 */
export const ViewIndexPayload = z.object({
  orgId: z.string(),
  databaseId: z.string(),
  tableId: z.string(),
  indexId: z.string(),
  summary: z.string(),
});
type ViewIndexPayload = z.infer<typeof ViewIndexPayload>;
type ViewIndexJournal = { phase: 'done'; outcome: JobOutcome<UpdateTableResult> };

async function syncViewIndex(run: JobRun<ViewIndexPayload, ViewIndexJournal>): Promise<JobOutcome<UpdateTableResult>> {
  const { databaseId, tableId, indexId, summary } = run.payload;
  const sql = pgExecutor(run.pool);
  const [row] = await sql.run<catalog.IndexRow>(catalog.selectTableIndex(indexId));
  if (row?.state === 'building') await ensureSortIndex(run.pool, { databaseId, tableId }, indexId, row.keys);
  let kept = false;
  if (row) {
    await run.step(async (tx) => {
      await tx.run(catalog.lockTableIndexes(tableId));
      const [marked] = await tx.run(catalog.setIndexState(indexId, 'ready'));
      kept = marked !== undefined;
      if (kept) await tx.run(catalog.bumpIndexVersion(tableId));
      const outcome: JobOutcome<UpdateTableResult> = {
        state: 'succeeded',
        result: { indexId, state: 'ready' },
        summary,
      };
      return { journal: { phase: 'done', outcome }, progress: { done: 1, total: 1 } };
    });
  }
  if (kept) return (run.journal as ViewIndexJournal).outcome;
  await outsideTransaction(run.pool, (client) => client.run(dropSortIndex(databaseId, indexId)));
  return { state: 'succeeded', result: { indexId, dropped: true }, summary };
}

export const updateTable: JobHandler<ViewIndexPayload, ViewIndexJournal, UpdateTableResult> = {
  kind: 'updateTable',
  payload: ViewIndexPayload,
  result: UpdateTableResult,
  successEvent: () => 'table.update',
  describe: (payload) => payload.summary,
  run: (run) => (run.journal.phase === 'done' ? Promise.resolve(run.journal.outcome!) : syncViewIndex(run)),
  async discard(run) {
    const { databaseId, indexId } = run.payload;
    const sql = pgExecutor(run.pool);
    await sql.run(catalog.discardBuildingIndex(indexId, ['automatic']));
    const [row] = await sql.run(catalog.selectTableIndex(indexId));
    if (!row) await outsideTransaction(run.pool, (client) => client.run(dropSortIndex(databaseId, indexId)));
  },
};
