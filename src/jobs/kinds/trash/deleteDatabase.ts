import {
  cancelTablePurges,
  deleteCatalogRow,
  deleteForeignKeysOf,
  dropDatabaseSchema,
} from '../../../catalog/trash.ts';
import { DeleteDatabaseResult } from './results.ts';
import type { JobHandler } from '../../engine/handler.ts';
import { claimEntry, deleteCatalog, dropInSteps, dropPlan, PurgePayload, type PurgeJournal } from './purge.ts';

/**
 * Purges a database from the trash once its retention has passed (issue 13): each table's data in its own step,
 * then the schema, then the catalog — including tables that had been trashed on their own, whose purges it cancels.
 */
export const deleteDatabase: JobHandler<PurgePayload, PurgeJournal, DeleteDatabaseResult> = {
  kind: 'deleteDatabase',
  payload: PurgePayload,
  result: DeleteDatabaseResult,
  // Spec §6 gives deleteDatabase no `succeeded` suffix: the plain kind marks the purge done.
  successEvent: () => 'database.delete',
  describe: (payload) => `Purge of database ${payload.name} from the trash`,
  async run(run) {
    const { databaseId } = run.payload;
    if (!run.journal.phase) await claimEntry(run, 'database', databaseId);
    const tables = run.journal.tables ?? [];
    if (run.journal.phase === 'drop')
      await dropInSteps(run, dropPlan(databaseId, tables, [dropDatabaseSchema(databaseId)]));
    if (run.journal.phase === 'catalog') {
      await deleteCatalog(run, [
        cancelTablePurges(databaseId),
        deleteForeignKeysOf(tables.map((table) => table.id)),
        deleteCatalogRow('database', databaseId),
      ]);
    }
    return {
      state: 'succeeded',
      result: { purged: true, databaseId, tables: tables.length },
      summary: `Purged database ${run.payload.name}`,
    };
  },
};
