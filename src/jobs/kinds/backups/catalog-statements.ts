import type { Statement } from '../../../data/statement.ts';

/** Catalog SQL of backups: the backups list, each database's settings, the scheduler's runs, and their events. */

export interface NewBackup {
  id: string;
  orgId: string;
  databaseId: string;
  formatVersion: number;
  destination: string;
  location: string;
  sizeBytes: number;
  sha256: string;
  tables: number;
  rows: number;
  scheduledFor: string | null;
  createdAt: string;
  ttlDaysFallback: number;
}

/** expires_at follows the database's keepDays policy, else BACKUP_TTL_DAYS. */
export function insertBackup(backup: NewBackup): Statement {
  return {
    sql: `INSERT INTO public.backups (id, org_id, database_id, format_version, destination, location, size_bytes, sha256, tables, rows,
                                      scheduled_for, created_at, expires_at)
          SELECT $1::bpchar, $2::bpchar, $3::bpchar, $4, $5, $6, $7, $8, $9, $10, $11::timestamptz, $12::timestamptz,
                 $12::timestamptz + make_interval(secs => coalesce((SELECT keep_days FROM public.backup_settings WHERE database_id = $3::bpchar) * 86400.0, $13 * 86400.0))
          ON CONFLICT (id) DO NOTHING`,
    params: [
      backup.id,
      backup.orgId,
      backup.databaseId,
      backup.formatVersion,
      backup.destination,
      backup.location,
      backup.sizeBytes,
      backup.sha256,
      backup.tables,
      backup.rows,
      backup.scheduledFor,
      backup.createdAt,
      backup.ttlDaysFallback,
    ],
  };
}

/**
 * Records a success and closes the open alerts; answers which alerts were open (each gets its `resolved` event).
 * A scheduled run counts as of its due instant when that is later than its snapshot (a worker whose clock runs
 * ahead, or the scheduler's test clock): the schedule was met for that instant.
 */
export function recordSuccess(databaseId: string, successAt: string): Statement {
  return {
    sql: `WITH old AS (SELECT database_id, failed_job_id, overdue_since FROM public.backup_settings WHERE database_id = $1::bpchar FOR UPDATE)
          UPDATE public.backup_settings s
             SET last_success_at = greatest(s.last_success_at, $2::timestamptz), failed_job_id = NULL, overdue_since = NULL, updated_at = now()
            FROM old WHERE s.database_id = old.database_id
       RETURNING old.failed_job_id IS NOT NULL AS was_failed, old.overdue_since IS NOT NULL AS was_overdue`,
    params: [databaseId, successAt],
  };
}

/**
 * Backups retention lets go, newest kept always: beyond the newest `keep_last`, past their expiry, or beyond the
 * operator's bounds whatever the policy (`maxCount` backups, `maxBytes` together, counted newest first; issue 26
 * §7). Marks them pruned (the rows stay, so their ids answer ARTIFACT_EXPIRED) and returns where their files are.
 */
export function pruneBackups(databaseId: string, bounds: { maxCount: number; maxBytes: number }): Statement {
  return {
    sql: `WITH ranked AS (
            SELECT b.id, row_number() OVER (ORDER BY b.created_at DESC, b.id DESC) AS rank, b.expires_at,
                   sum(b.size_bytes) OVER (ORDER BY b.created_at DESC, b.id DESC) AS bytes
              FROM public.backups b WHERE b.database_id = $1::bpchar AND b.pruned_at IS NULL
          ), doomed AS (
            SELECT r.id FROM ranked r LEFT JOIN public.backup_settings s ON s.database_id = $1::bpchar
             WHERE r.rank > 1 AND ((s.keep_last IS NOT NULL AND r.rank > s.keep_last) OR r.expires_at <= now()
                                   OR r.rank > $2::int OR r.bytes > $3::bigint)
          )
          UPDATE public.backups b SET pruned_at = now() FROM doomed WHERE b.id = doomed.id
      RETURNING b.id, b.location, b.created_at`,
    params: [databaseId, bounds.maxCount, bounds.maxBytes],
  };
}
