import { deleteCatalogRow, deleteForeignKeysOf } from '../../../catalog/trash.ts';
import { DeleteTableResult } from './results.ts';
import type { JobHandler } from '../../engine/handler.ts';
import { claimEntry, deleteCatalog, dropInSteps, dropPlan, PurgePayload, type PurgeJournal } from './purge.ts';

/** Purges a table from the trash once its retention has passed (issue 13): its rows, history, sequences, catalog. */
export const deleteTable: JobHandler<PurgePayload, PurgeJournal, DeleteTableResult> = {
  kind: 'deleteTable',
  payload: PurgePayload,
  result: DeleteTableResult,
  // Spec §6 gives deleteTable no `succeeded` suffix: the plain kind marks the purge done.
  successEvent: () => 'table.delete',
  describe: (payload) => `Purge of table ${payload.name} from the trash`,
  async run(run) {
    const tableId = run.payload.tableId!;
    if (!run.journal.phase) await claimEntry(run, 'table', tableId);
    if (run.journal.phase === 'drop')
      await dropInSteps(run, dropPlan(run.payload.databaseId, run.journal.tables ?? []));
    if (run.journal.phase === 'catalog')
      await deleteCatalog(run, [deleteForeignKeysOf([tableId]), deleteCatalogRow('table', tableId)]);
    return { state: 'succeeded', result: { purged: true, tableId }, summary: `Purged table ${run.payload.name}` };
  },
};
