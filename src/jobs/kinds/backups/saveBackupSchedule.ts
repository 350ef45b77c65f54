import { z } from 'zod';
import { nextRuns } from '../../../kernel/cron.ts';
import { SaveBackupScheduleResult } from './results.ts';
import type { JobHandler } from '../../engine/handler.ts';

/**
 * saveBackupSchedule (event `database.backup_schedule.update`): stores a database's cron schedule and its first
 * due instant. The request validated the expression with endpoint 7's parser; this job only writes, in one step,
 * so a rerun after a crash writes the same schedule again.
 */
export const SaveSchedulePayload = z.strictObject({ cron: z.string(), timezone: z.string() });
type SaveSchedulePayload = z.infer<typeof SaveSchedulePayload>;

export const saveBackupSchedule: JobHandler<SaveSchedulePayload, { nextRunAt: string }, SaveBackupScheduleResult> = {
  kind: 'saveBackupSchedule',
  payload: SaveSchedulePayload,
  result: SaveBackupScheduleResult,
  successEvent: () => 'database.backup_schedule.update',
  describe: (payload) => `Backup schedule "${payload.cron}" (${payload.timezone})`,
  async run(run) {
    const { cron, timezone } = run.payload;
    const { actor } = run.job;
    await run.step(async (sql) => {
      const [first] = nextRuns(cron, timezone, new Date(), 1);
      await sql.query(
        `INSERT INTO public.backup_settings (database_id, org_id, cron, timezone, next_run_at, actor_id, actor_kind, actor_key, actor_name)
         VALUES ($1::bpchar, $2::bpchar, $3, $4, $5, $6::bpchar, $7, $8, $9)
         ON CONFLICT (database_id) DO UPDATE
            SET cron = EXCLUDED.cron, timezone = EXCLUDED.timezone, next_run_at = EXCLUDED.next_run_at, overdue_since = NULL,
                actor_id = EXCLUDED.actor_id, actor_kind = EXCLUDED.actor_kind, actor_key = EXCLUDED.actor_key, actor_name = EXCLUDED.actor_name,
                version = backup_settings.version + 1, updated_at = now()`,
        [run.job.databaseId, run.job.orgId, cron, timezone, first!, actor.id, actor.kind, actor.key, actor.name],
      );
      return { journal: { nextRunAt: first!.toISOString() }, progress: { done: 1, total: 1 } };
    });
    return {
      state: 'succeeded',
      result: { cron, timezone, nextRunAt: run.journal.nextRunAt ?? null },
      summary: `Backup schedule "${cron}" (${timezone})`,
    };
  },
};
