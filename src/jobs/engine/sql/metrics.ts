import type { Statement } from '../../../data/statement.ts';

export interface JobCountRow {
  kind: string;
  state: 'queued' | 'running' | 'failed';
  count: number;
}

/** Seconds of failures that /metrics counts: long enough for a 1-minute scrape to see every one more than once. */
export const FAILED_WINDOW_SECONDS = 3600;

/**
 * Jobs queued and running, and failed in the last hour, by kind: what an operator alerts on. Each branch reads a
 * partial index (`jobs_org_active_idx`, `jobs_failed_finished_at_idx`), so a scrape costs what is active, not the
 * table's history.
 */
export function jobCountsByKind(): Statement {
  return {
    sql: `SELECT kind, state::text AS state, count(*)::int AS count
            FROM public.jobs WHERE state IN ('queued', 'running') GROUP BY kind, state
          UNION ALL
          SELECT kind, 'failed', count(*)::int
            FROM public.jobs WHERE state = 'failed' AND finished_at > now() - make_interval(secs => $1::int) GROUP BY kind`,
    params: [FAILED_WINDOW_SECONDS],
  };
}
