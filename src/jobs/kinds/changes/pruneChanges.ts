import { pruneChanges, selectFeedDatabases, sequenceChanges } from '../../../catalog/changes.ts';
import { SQLSTATE, sqlStateOf } from '../../../db/pg-errors.ts';
import type { SqlExecutor } from '../../../db/sql.ts';

const BATCH = 1_000;

/**
 * The change feed's retention (CHANGE_RETENTION_DAYS), database by database (each keeps its feed in its own schema):
 * sequences what no reader has yet (so old commits have their place), then removes commits older than the
 * retention, a batch of 1,000 per statement so that no sweep holds long locks, and moves the database's watermark,
 * so a cursor from before answers 410. Run by the worker's sweeper, like the other retention sweeps; every step is
 * one committed statement, so a killed sweep loses nothing and the next one carries on. A database purged meanwhile
 * (its schema gone) is skipped. Returns the commits removed.
 */
export async function pruneChangeFeed(sql: SqlExecutor, retentionDays: number, now = new Date()): Promise<number> {
  const cutoff = new Date(now.getTime() - retentionDays * 86_400_000);
  let removed = 0;
  const list = selectFeedDatabases();
  for (const { id } of await sql.run<{ id: string }>(list)) {
    try {
      await sql.run(sequenceChanges(id));
      for (;;) {
        const statement = pruneChanges(id, cutoff, BATCH);
        const [row] = await sql.run<{ commits: number }>(statement);
        removed += row?.commits ?? 0;
        if ((row?.commits ?? 0) < BATCH) break;
      }
    } catch (error) {
      const state = sqlStateOf(error);
      if (state !== SQLSTATE.undefinedTable && state !== SQLSTATE.invalidSchemaName) throw error;
    }
  }
  return removed;
}
