import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import type { Config } from '../../../kernel/config.ts';
import { nextRuns } from '../../../kernel/cron.ts';
import { inPgTransaction, type SqlExecutor } from '../../../db/sql.ts';
import { newId } from '../../../kernel/ids.ts';
import type { Logger } from '../../../kernel/log.ts';
import { insertJob, lockAndCountQueued, notifyWorkers } from '../../engine/sql/queue.ts';
import { insertActivity } from '../../../data/activity.ts';

/**
 * The backup scheduler, run by every worker process. Each tick, in one transaction per due schedule:
 * - claims the schedule row (FOR UPDATE SKIP LOCKED: two workers never hold the same one);
 * - enqueues `runDatabaseBackup` for the latest due instant only — after downtime one catch-up run, not a burst —
 *   guarded by the primary key (database, instant) of `backup_runs`, so an instant runs once however many workers
 *   look at it, even one whose clock runs behind;
 * - moves `next_run_at` to the first instant after now.
 * It also raises `backup.overdue.detected` (last success older than the schedule's interval plus
 * BACKUP_OVERDUE_GRACE_MINUTES) and `backup.failed.detected` (the last finished backup failed); a successful
 * backup resolves both (run-backup.ts).
 */

interface ScheduleRow {
  database_id: string;
  org_id: string;
  name: string;
  cron: string;
  timezone: string;
  next_run_at: Date;
  actor_id: string;
  actor_kind: string;
  actor_key: string | null;
  actor_name: string;
}

/** "Now" for the scheduler: the clock, or the instant written in BACKUP_SCHEDULER_CLOCK_FILE (tests move it). */
export async function schedulerNow(config: Config): Promise<Date> {
  if (!config.BACKUP_SCHEDULER_CLOCK_FILE) return new Date();
  const text = (await readFile(config.BACKUP_SCHEDULER_CLOCK_FILE, 'utf8').catch(() => '')).trim();
  const instant = new Date(text);
  return Number.isNaN(instant.getTime()) ? new Date() : instant;
}

/** The latest due instant at or before `now`, counting from `nextRunAt` (itself due). */
function latestDue(cron: string, timezone: string, nextRunAt: Date, now: Date): Date {
  let due = nextRunAt;
  // Bounded: a minutely schedule after a year of downtime is ~500,000 instants; past that, the last one seen.
  for (let batches = 0; batches < 5_000; batches += 1) {
    const runs = nextRuns(cron, timezone, due, 100).filter((run) => run <= now);
    if (runs.length === 0) return due;
    due = runs.at(-1)!;
    if (runs.length < 100) return due;
  }
  return due;
}

const actorOf = (row: ScheduleRow) => ({
  id: row.actor_id.trim(),
  kind: row.actor_kind,
  key: row.actor_key,
  name: row.actor_name,
});

/**
 * A scheduled run counts against the org's queue cap like any other job (issue 26 §7): with JOB_QUEUE_LIMIT_PER_ORG
 * jobs already queued the instant is skipped, not queued beyond the cap; the overdue alert reports the gap.
 */
async function queueIsFull(sql: SqlExecutor, orgId: string, queueLimit: number): Promise<boolean> {
  const [lock, count] = lockAndCountQueued(orgId);
  await sql.query(lock!.sql, lock!.params);
  const [row] = await sql.query<{ queued: number }>(count!.sql, count!.params);
  return (row?.queued ?? 0) >= queueLimit;
}

async function enqueueDue(sql: SqlExecutor, row: ScheduleRow, now: Date, queueLimit: number): Promise<boolean> {
  const databaseId = row.database_id.trim();
  const orgId = row.org_id.trim();
  const due = latestDue(row.cron, row.timezone, row.next_run_at, now);
  const [following] = nextRuns(row.cron, row.timezone, now, 1);
  await sql.query(
    'UPDATE public.backup_settings SET next_run_at = $2, updated_at = now() WHERE database_id = $1::bpchar',
    [databaseId, following!],
  );
  if (await queueIsFull(sql, orgId, queueLimit)) return false;
  const jobId = newId();
  const claimed = await sql.query(
    'INSERT INTO public.backup_runs (database_id, scheduled_for, job_id) VALUES ($1::bpchar, $2, $3::bpchar) ON CONFLICT DO NOTHING RETURNING job_id',
    [databaseId, due, jobId],
  );
  if (claimed.length === 0) return false;
  const actor = actorOf(row);
  const scheduledFor = due.toISOString();
  const job = insertJob({
    id: jobId,
    orgId,
    kind: 'runDatabaseBackup',
    databaseId,
    tableId: null,
    payload: { scheduledFor },
    serialKey: null,
    maxAttempts: 5,
    actor,
    runAt: null,
  });
  const event = insertActivity({
    id: newId(),
    orgId,
    category: 'backups',
    event: 'job.runDatabaseBackup.queued',
    summary: `Queued the scheduled backup of ${row.name} for ${scheduledFor}`,
    jobId,
    databaseId,
    tableId: null,
    affectedRows: null,
    fileName: null,
    actor,
  });
  for (const statement of [job, event, notifyWorkers()]) await sql.run(statement);
  return true;
}

const DUE = `SELECT s.database_id, s.org_id, d.name, s.cron, s.timezone, s.next_run_at, s.actor_id, s.actor_kind, s.actor_key, s.actor_name
               FROM public.backup_settings s JOIN public.databases d ON d.id = s.database_id AND d.state = 'active'
              WHERE s.cron IS NOT NULL AND s.next_run_at <= $1`;

/** Enqueues every due run that fits its org's queue cap; answers how many were enqueued. */
export async function enqueueDueBackups(pool: pg.Pool, now: Date, queueLimit: number): Promise<number> {
  let enqueued = 0;
  for (;;) {
    const done = await inPgTransaction(pool, [], async (sql) => {
      const [row] = await sql.query<ScheduleRow>(`${DUE} ORDER BY s.next_run_at LIMIT 1 FOR UPDATE OF s SKIP LOCKED`, [
        now,
      ]);
      if (!row) return { value: true };
      if (await enqueueDue(sql, row, now, queueLimit)) enqueued += 1;
      return { value: false };
    });
    if (done) return enqueued;
  }
}

/** The interval of a schedule around `reference`: the gap between its next two runs. */
function intervalOf(cron: string, timezone: string, reference: Date): number {
  const [first, second] = nextRuns(cron, timezone, reference, 2);
  return second!.getTime() - first!.getTime();
}

async function detectOverdue(sql: SqlExecutor, now: Date, graceMs: number): Promise<void> {
  const rows = await sql.query<ScheduleRow & { reference: Date }>(
    `SELECT s.database_id, s.org_id, d.name, s.cron, s.timezone, s.actor_id, s.actor_kind, s.actor_key, s.actor_name,
            coalesce(s.last_success_at, s.created_at) AS reference
       FROM public.backup_settings s JOIN public.databases d ON d.id = s.database_id AND d.state = 'active'
      WHERE s.cron IS NOT NULL AND s.overdue_since IS NULL
      FOR UPDATE OF s SKIP LOCKED`,
  );
  for (const row of rows) {
    if (now.getTime() - row.reference.getTime() <= intervalOf(row.cron, row.timezone, row.reference) + graceMs)
      continue;
    const databaseId = row.database_id.trim();
    await sql.query(
      'UPDATE public.backup_settings SET overdue_since = $2, updated_at = now() WHERE database_id = $1::bpchar',
      [databaseId, now],
    );
    const event = insertActivity({
      id: newId(),
      orgId: row.org_id.trim(),
      category: 'backups',
      event: 'backup.overdue.detected',
      databaseId,
      jobId: null,
      actor: actorOf(row),
      summary: `No backup of ${row.name} since ${row.reference.toISOString()}`,
    });
    await sql.run(event);
  }
}

async function detectFailures(sql: SqlExecutor): Promise<void> {
  const rows = await sql.query<ScheduleRow & { job_id: string }>(
    `SELECT s.database_id, s.org_id, d.name, s.actor_id, s.actor_kind, s.actor_key, s.actor_name, last.id AS job_id
       FROM public.backup_settings s JOIN public.databases d ON d.id = s.database_id
       CROSS JOIN LATERAL (SELECT j.id, j.state, j.finished_at FROM public.jobs j
                            WHERE j.database_id = s.database_id AND j.kind = 'runDatabaseBackup' AND j.state IN ('succeeded', 'failed')
                            ORDER BY j.finished_at DESC LIMIT 1) last
      WHERE s.failed_job_id IS NULL AND last.state = 'failed'
        -- A success is recorded (its backup row) a moment before its job is marked succeeded: a failure older
        -- than the newest backup is already resolved, not new.
        AND last.finished_at > coalesce((SELECT max(b.created_at) FROM public.backups b WHERE b.database_id = s.database_id), '-infinity')
      FOR UPDATE OF s SKIP LOCKED`,
  );
  for (const row of rows) {
    const databaseId = row.database_id.trim();
    await sql.query(
      'UPDATE public.backup_settings SET failed_job_id = $2::bpchar, updated_at = now() WHERE database_id = $1::bpchar',
      [databaseId, row.job_id],
    );
    const event = insertActivity({
      id: newId(),
      orgId: row.org_id.trim(),
      category: 'backups',
      event: 'backup.failed.detected',
      databaseId,
      jobId: row.job_id.trim(),
      actor: actorOf(row),
      summary: `The backup of ${row.name} failed`,
    });
    await sql.run(event);
  }
}

export async function schedulerTick(pool: pg.Pool, config: Config): Promise<void> {
  const now = await schedulerNow(config);
  // Overdue before enqueueing: a catch-up run after downtime is late by definition, whichever worker runs it first.
  await inPgTransaction(pool, [], async (sql) => {
    await detectFailures(sql);
    await detectOverdue(sql, now, config.BACKUP_OVERDUE_GRACE_MINUTES * 60_000);
    return { value: undefined };
  });
  await enqueueDueBackups(pool, now, config.JOB_QUEUE_LIMIT_PER_ORG);
}

export function startBackupScheduler(pool: pg.Pool, config: Config, log: Logger): { stop(): Promise<void> } {
  const abort = new AbortController();
  const loop = (async () => {
    while (!abort.signal.aborted) {
      try {
        await schedulerTick(pool, config);
      } catch (error) {
        log.error({ err: error }, 'backup scheduler tick failed');
      }
      await sleep(config.BACKUP_SCHEDULER_INTERVAL_MS, undefined, { signal: abort.signal }).catch(() => undefined);
    }
  })();
  return {
    stop: async () => {
      abort.abort();
      await loop;
    },
  };
}
