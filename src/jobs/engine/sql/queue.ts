import type { Statement } from '../../../data/statement.ts';

/**
 * The queue's SQL as named pure functions (pg-boss plans.ts, Graphile Worker src/sql). Every statement that a
 * worker runs on a job it holds is fenced by the lease token it got when it claimed the job: a worker whose lease
 * ran out and was taken over changes nothing (its statements match no row) and stops.
 */

export type JobState = 'queued' | 'running' | 'succeeded' | 'failed' | 'partially_completed' | 'cancelled';
export const JOB_STATES: readonly JobState[] = [
  'queued',
  'running',
  'succeeded',
  'failed',
  'partially_completed',
  'cancelled',
];
export type TerminalState = Exclude<JobState, 'queued' | 'running'>;

export interface NewJob {
  id: string;
  orgId: string;
  kind: string;
  databaseId: string | null;
  tableId: string | null;
  payload: unknown;
  serialKey: string | null;
  maxAttempts: number;
  actor: { id: string; kind: string; key: string | null; name: string };
  /** When the job becomes due; null: at once. A trash purge is scheduled days ahead (issue 13). */
  runAt: Date | null;
}

export function insertJob(job: NewJob): Statement {
  return {
    sql: `INSERT INTO public.jobs (id, org_id, kind, database_id, table_id, payload, serial_key, max_attempts,
                                   actor_id, actor_kind, actor_key, actor_name, run_at)
          VALUES ($1::bpchar, $2::bpchar, $3, $4::bpchar, $5::bpchar, $6::jsonb, $7, $8, $9::bpchar, $10, $11, $12,
                  coalesce($13::timestamptz, now()))`,
    params: [
      job.id,
      job.orgId,
      job.kind,
      job.databaseId,
      job.tableId,
      JSON.stringify(job.payload),
      job.serialKey,
      job.maxAttempts,
      job.actor.id,
      job.actor.kind,
      job.actor.key,
      job.actor.name,
      job.runAt?.toISOString() ?? null,
    ],
  };
}

/** What a worker gets when it claims a job. */
export interface ClaimedJobRow {
  id: string;
  org_id: string;
  kind: string;
  database_id: string | null;
  table_id: string | null;
  payload: unknown;
  journal: Record<string, unknown>;
  attempts: number;
  max_attempts: number;
  lease_token: string;
  actor_id: string;
  actor_kind: string;
  actor_key: string | null;
  actor_name: string;
  /** True when the previous holder's lease expired: the job resumes from its journal. */
  reclaimed: boolean;
}

/** A job of one of `kinds` ($4), of none of the orgs `$5` (their slots here are full), that a worker may claim now. */
function dueJob(alias: string): string {
  return `${alias}.kind = ANY($4::text[]) AND ${alias}.org_id <> ALL($5::bpchar[])
               AND ((${alias}.state = 'queued' AND ${alias}.run_at <= now())
                 OR (${alias}.state = 'running' AND ${alias}.lease_expires_at < now()))`;
}

/**
 * Claims one job: a queued job that is due, or a running job whose lease expired (its worker died). SKIP LOCKED
 * lets any number of workers claim concurrently without waiting on each other. A reclaimed job counts as a new
 * attempt; past its last one the runner fails it (undoing its partial work) instead of running it.
 *
 * Fair across organisations (issue 18: org A's 23 queued previews held org B's one back 11 s): among the orgs with
 * a due job, the one with the fewest jobs running goes first, then the one whose last claim is oldest (never
 * claimed first) — round-robin when every org has the same number running, and a lone org still gets every free
 * slot. Within an org, jobs keep their order (run_at, id). "Last claim" is the latest first start of the org's
 * jobs (a reclaimed or retried job keeps its started_at). Both per-org figures are index probes
 * (jobs_org_active_idx, jobs_org_started_at_idx), made once per org that has due work, not once per job.
 *
 * `fullOrgs`: the orgs that already hold this worker's slots allowed per org (JOB_SLOTS_PER_ORG); their jobs wait
 * for another worker or a free slot of theirs, so that one org's long or hung jobs never take every slot.
 */
export function claimJob(
  owner: string,
  leaseToken: string,
  leaseSeconds: number,
  kinds: readonly string[],
  fullOrgs: readonly string[] = [],
): Statement {
  return {
    sql: `WITH due_orgs AS (
            SELECT DISTINCT org_id FROM public.jobs d WHERE ${dueJob('d')}
          ), turns AS (
            SELECT d.org_id,
                   (SELECT count(*) FROM public.jobs r
                     WHERE r.org_id = d.org_id AND r.state = 'running' AND r.lease_expires_at >= now()) AS running,
                   (SELECT max(s.started_at) FROM public.jobs s WHERE s.org_id = d.org_id) AS last_started
              FROM due_orgs d
          ), next AS (
            SELECT j.id, j.state = 'running' AS reclaimed FROM public.jobs j JOIN turns t ON t.org_id = j.org_id
             WHERE ${dueJob('j')}
             ORDER BY t.running, t.last_started NULLS FIRST, j.run_at, j.id
             LIMIT 1
               FOR UPDATE OF j SKIP LOCKED
          )
          UPDATE public.jobs j
             SET state = 'running', attempts = j.attempts + 1, lease_token = $2::bpchar, lease_owner = $1,
                 lease_expires_at = now() + make_interval(secs => $3), heartbeat_at = now(),
                 started_at = coalesce(j.started_at, now()), updated_at = now()
            FROM next
           WHERE j.id = next.id
       RETURNING j.id, j.org_id, j.kind, j.database_id, j.table_id, j.payload, j.journal, j.attempts, j.max_attempts,
                 j.lease_token, j.actor_id, j.actor_kind, j.actor_key, j.actor_name, next.reclaimed`,
    params: [owner, leaseToken, leaseSeconds, kinds, fullOrgs],
  };
}

/** Extends the lease. Returns `cancel_requested`, or no row when the lease was lost. */
export function heartbeat(jobId: string, leaseToken: string, leaseSeconds: number): Statement {
  return {
    sql: `UPDATE public.jobs SET lease_expires_at = now() + make_interval(secs => $3), heartbeat_at = now()
           WHERE id = $1::bpchar AND lease_token = $2::bpchar AND state = 'running'
       RETURNING cancel_requested`,
    params: [jobId, leaseToken, leaseSeconds],
  };
}

export interface Progress {
  done: number;
  total: number | null;
}

/**
 * Records a checkpoint: the journal and progress after a step. Runs first in the step's transaction, so it also
 * locks the job row (a competing reclaim waits) and proves the lease is still held before any work is written.
 */
export function checkpoint(
  jobId: string,
  leaseToken: string,
  leaseSeconds: number,
  journal: unknown,
  progress: Progress,
): Statement {
  return {
    sql: `UPDATE public.jobs
             SET journal = $3::jsonb, progress_done = $4, progress_total = $5, updated_at = now(),
                 lease_expires_at = now() + make_interval(secs => $6), heartbeat_at = now()
           WHERE id = $1::bpchar AND lease_token = $2::bpchar AND state = 'running'
       RETURNING cancel_requested`,
    params: [jobId, leaseToken, JSON.stringify(journal), progress.done, progress.total, leaseSeconds],
  };
}

export function finishJob(
  jobId: string,
  leaseToken: string,
  state: TerminalState,
  result: unknown,
  error: unknown,
): Statement {
  return {
    sql: `UPDATE public.jobs
             SET state = $3::"JobState", result = $4::jsonb, error = $5::jsonb, finished_at = now(), updated_at = now(),
                 lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, cancel_requested = false
           WHERE id = $1::bpchar AND lease_token = $2::bpchar AND state = 'running'
       RETURNING id`,
    params: [
      jobId,
      leaseToken,
      state,
      result === undefined ? null : JSON.stringify(result),
      error === undefined ? null : JSON.stringify(error),
    ],
  };
}

/** An unexpected failure with attempts left: back to the queue after `delaySeconds`, journal kept for the resume. */
export function retryLater(jobId: string, leaseToken: string, delaySeconds: number, lastError: string): Statement {
  return {
    sql: `UPDATE public.jobs
             SET state = 'queued', run_at = now() + make_interval(secs => $3), last_error = $4, updated_at = now(),
                 lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
           WHERE id = $1::bpchar AND lease_token = $2::bpchar AND state = 'running'
       RETURNING id`,
    params: [jobId, leaseToken, delaySeconds, lastError],
  };
}

/** Capped exponential backoff: 2 s, 4 s, 8 s, … at most 5 minutes. */
export function backoffSeconds(attempt: number): number {
  return Math.min(2 ** Math.max(attempt, 1), 300);
}

/**
 * Takes the org's enqueue lock for the rest of the transaction and counts its queued jobs, so that concurrent
 * enqueues cannot both pass the per-org cap (the same pattern as the saved-views cap). A job scheduled for later
 * and never attempted (a trash purge, days ahead) is not waiting for a worker yet, so it does not count.
 */
export function lockAndCountQueued(orgId: string): Statement[] {
  return [
    { sql: `SELECT pg_advisory_xact_lock(hashtextextended('jobs:' || $1::text, 0))::text AS locked`, params: [orgId] },
    {
      sql: `SELECT count(*)::int AS queued FROM public.jobs
             WHERE org_id = $1::bpchar AND state = 'queued' AND NOT (attempts = 0 AND run_at > now())`,
      params: [orgId],
    },
  ];
}

/** Cancelling a queued job is immediate; returns the job when it was queued. */
export function cancelQueued(jobId: string): Statement {
  return {
    sql: `UPDATE public.jobs SET state = 'cancelled', finished_at = now(), updated_at = now(), cancel_requested = false
           WHERE id = $1::bpchar AND state = 'queued' RETURNING id`,
    params: [jobId],
  };
}

/**
 * The job's step lock, taken first by each step (`lockForStep`) and by a cancel request (`requestCancel`): a
 * transaction advisory lock, which PostgreSQL grants in the order it was asked for. The job row alone is not fair: a
 * cancel waiting for the row while a step holds it could be passed by the next step, which asks for the row just
 * after the step before has committed and gets it before the cancel's backend has woken up; on a busy machine a
 * cancel then waited through step after step, to the end of the job. Behind the step lock it waits one step at most.
 */
const stepLock = (jobIdParam: string) =>
  `SELECT pg_advisory_xact_lock(hashtextextended('job-step:' || ${jobIdParam}, 0))`;

/**
 * Opens a step: its lock, then the job row, locked while the step's transaction lasts (a competing reclaim waits) and
 * matched by lease (a reclaimed job's old worker matches no row and writes nothing). Answers `cancel_requested`.
 */
export function lockForStep(jobId: string, leaseToken: string): Statement {
  return {
    sql: `WITH queued AS (${stepLock('$1::text')})
          SELECT j.cancel_requested FROM public.jobs j, queued
           WHERE j.id = $1::bpchar AND j.lease_token = $2::bpchar AND j.state = 'running'
             FOR UPDATE OF j`,
    params: [jobId, leaseToken],
  };
}

/**
 * A running job is cancelled by its worker at its next step, which then undoes its partial work. Queued behind the
 * step in progress by the step lock, so it is seen by the step after it.
 */
export function requestCancel(jobId: string): Statement {
  return {
    sql: `WITH queued AS (${stepLock('$1::text')})
          UPDATE public.jobs SET cancel_requested = true, updated_at = now() FROM queued
           WHERE id = $1::bpchar AND state = 'running' RETURNING id`,
    params: [jobId],
  };
}

/** A failed or cancelled job runs again from the start (its partial work was undone when it stopped). */
export function requeue(jobId: string): Statement {
  return {
    sql: `UPDATE public.jobs
             SET state = 'queued', journal = '{}', progress_done = 0, progress_total = NULL, result = NULL, error = NULL,
                 attempts = 0, run_at = now(), started_at = NULL, finished_at = NULL, cancel_requested = false, updated_at = now()
           WHERE id = $1::bpchar AND state IN ('failed', 'cancelled') RETURNING id`,
    params: [jobId],
  };
}

/** Wakes idle workers at once instead of at their next poll; delivered when the enqueuing transaction commits. */
export const NOTIFY_CHANNEL = 'wds_jobs';
export function notifyWorkers(): Statement {
  return { sql: `SELECT pg_notify('${NOTIFY_CHANNEL}', '')::text AS notified`, params: [] };
}

/**
 * Notified with a job's id whenever its state or progress changes: by the trigger of migration
 * 20261125140000_job_update_notifications, so that no statement that moves a job can forget it.
 */
export const JOB_UPDATED_CHANNEL = 'wds_job_updated';
