import { z } from 'zod';
import type { SqlExecutor } from '../../../db/sql.ts';
import { newId } from '../../../kernel/ids.ts';
import { RunDatabaseBackupResult } from './results.ts';
import type { JobHandler, JobOutcome, JobRun } from '../../engine/handler.ts';
import { succeededEvent } from '../../engine/handler.ts';
import { destinationOf } from './destination.ts';
import { FORMAT_VERSION, locationOf } from './archive-format.ts';
import { writeBackup, type WrittenBackup } from './snapshot.ts';
import { insertBackup, pruneBackups, recordSuccess } from './catalog-statements.ts';
import { insertActivity } from '../../../data/activity.ts';

/**
 * runDatabaseBackup: one consistent snapshot of a database written to the backup destination (the backup's id is
 * the job's). Killed while writing, the rerun removes what the last attempt left and writes again from the start:
 * the snapshot must be one instant, so half of an older snapshot cannot be reused. The backup exists for readers
 * only once the step that records it has committed; retention then prunes older ones (`database.backup.prune`).
 */
export const RunBackupPayload = z.strictObject({
  /** The schedule's due instant for a scheduled run; absent for "run now". */
  scheduledFor: z.string().nullable().optional(),
});
type RunBackupPayload = z.infer<typeof RunBackupPayload>;

type Journal = {
  phase: 'recorded';
  outcome: JobOutcome<RunDatabaseBackupResult>;
  pruned: { id: string; location: string }[];
};

async function record(
  sql: SqlExecutor,
  run: JobRun<RunBackupPayload, Journal>,
  written: WrittenBackup,
  destination: string,
): Promise<Journal> {
  const { job } = run;
  const databaseId = job.databaseId!;
  const location = locationOf(job.orgId, databaseId, job.id);
  const insert = insertBackup({
    id: job.id,
    orgId: job.orgId,
    databaseId,
    formatVersion: FORMAT_VERSION,
    destination,
    location,
    sizeBytes: written.sizeBytes,
    sha256: written.manifestSha256,
    tables: written.manifest.tables.length,
    rows: written.rows,
    scheduledFor: run.payload.scheduledFor ?? null,
    createdAt: written.manifest.snapshotAt,
    ttlDaysFallback: run.config.BACKUP_TTL_DAYS,
  });
  await sql.run(insert);
  const event = (name: string, summary: string, affectedRows?: number) =>
    insertActivity({
      id: newId(),
      orgId: job.orgId,
      category: 'backups',
      event: name,
      summary,
      databaseId,
      jobId: job.id,
      affectedRows: affectedRows ?? null,
      actor: job.actor,
    });
  const scheduledFor = run.payload.scheduledFor ?? written.manifest.snapshotAt;
  const success = recordSuccess(
    databaseId,
    // biome-ignore lint/complexity/useMathMinMax: ISO timestamps compare as strings; Math.max would answer NaN
    scheduledFor > written.manifest.snapshotAt ? scheduledFor : written.manifest.snapshotAt,
  );
  const [alerts] = await sql.run<{ was_failed: boolean; was_overdue: boolean }>(success);
  for (const statement of [
    ...(alerts?.was_failed
      ? [event('backup.failed.resolved', `Backups of ${written.manifest.databaseName} succeed again`)]
      : []),
    ...(alerts?.was_overdue
      ? [event('backup.overdue.resolved', `Backups of ${written.manifest.databaseName} are up to date again`)]
      : []),
  ])
    await sql.run(statement);
  const prune = pruneBackups(databaseId, {
    maxCount: run.config.BACKUP_RETAIN_MAX_COUNT,
    maxBytes: run.config.BACKUP_RETAIN_MAX_BYTES,
  });
  const pruned = (await sql.run<{ id: string; location: string; created_at: Date }>(prune)).map((row) => ({
    id: row.id.trim(),
    location: row.location,
    createdAt: row.created_at.toISOString(),
  }));
  if (pruned.length > 0) {
    const removed = event(
      'database.backup.prune',
      `Removed ${pruned.length} old backup(s) of ${written.manifest.databaseName}: ${pruned.map((backup) => backup.id).join(', ')}`,
      pruned.length,
    );
    await sql.run(removed);
  }
  const result: RunDatabaseBackupResult = {
    backupId: job.id,
    databaseId,
    createdAt: written.manifest.snapshotAt,
    sizeBytes: written.sizeBytes,
    sha256: written.manifestSha256,
    tables: written.manifest.tables.length,
    rows: written.rows,
    pruned: pruned.map(({ id, createdAt }) => ({ id, createdAt })),
  };
  return {
    phase: 'recorded',
    pruned: pruned.map(({ id, location: where }) => ({ id, location: where })),
    outcome: {
      state: 'succeeded',
      result,
      summary: `Backup of ${written.manifest.databaseName}`,
      affectedRows: written.rows,
    },
  };
}

export const runDatabaseBackup: JobHandler<RunBackupPayload, Journal, RunDatabaseBackupResult> = {
  kind: 'runDatabaseBackup',
  payload: RunBackupPayload,
  result: RunDatabaseBackupResult,
  successEvent: () => succeededEvent('runDatabaseBackup'),
  describe: (payload) => (payload.scheduledFor ? `Scheduled backup for ${payload.scheduledFor}` : 'Backup'),
  async run(run) {
    const destination = destinationOf(run.config, run.signal);
    const location = locationOf(run.job.orgId, run.job.databaseId!, run.job.id);
    if (run.journal.phase !== 'recorded') {
      await destination.removePrefix(location);
      const written = await writeBackup(
        run.pool,
        destination,
        { backupId: run.job.id, orgId: run.job.orgId, databaseId: run.job.databaseId!, prefix: location },
        () => run.throwIfCancelled(),
      );
      await run.step(async (sql) => {
        const journal = await record(sql, run, written, destination.kind);
        return { journal, progress: { done: written.rows, total: written.rows } };
      });
    }
    const journal = run.journal as Journal;
    // Files of pruned backups go after the commit that marks them: a crash here leaves files a rerun removes.
    for (const backup of journal.pruned) await destination.removePrefix(backup.location);
    return journal.outcome;
  },
  async discard(run) {
    if (run.journal.phase !== 'recorded')
      await destinationOf(run.config).removePrefix(locationOf(run.job.orgId, run.job.databaseId!, run.job.id));
  },
};
