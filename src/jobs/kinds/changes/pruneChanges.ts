import { pruneChanges } from '../../../catalog/changes.ts';
import type { SqlExecutor } from '../../../db/sql.ts';

const BATCH = 1_000;

/**
 * The change feed's retention (CHANGE_RETENTION_DAYS): removes commits older than the retention, a batch of 1,000
 * commits per statement so that no sweep holds long locks, and records per database what it removed, so a cursor
 * from before answers 410. Run by the worker's sweeper, like the other retention sweeps; every step is one
 * committed statement, so a killed sweep loses nothing and the next one carries on. Returns the commits removed.
 */
export async function pruneChangeFeed(sql: SqlExecutor, retentionDays: number, now = new Date()): Promise<number> {
  const cutoff = new Date(now.getTime() - retentionDays * 86_400_000);
  let removed = 0;
  for (;;) {
    const statement = pruneChanges(cutoff, BATCH);
    const [row] = await sql.run<{ commits: number }>(statement);
    removed += row?.commits ?? 0;
    if ((row?.commits ?? 0) < BATCH) return removed;
  }
}
