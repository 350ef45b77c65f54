import { nextRuns, shortestGap } from '../../kernel/cron.ts';
import type { TransactionClient } from '../../db/prisma.ts';
import { notFound, validationFailed } from '../../kernel/errors.ts';
import { Id } from '../../kernel/formats.ts';
import { actorOf, recordActivity } from '../../catalog/activity.ts';
import type { Caller } from '../../kernel/caller.ts';
import { requireCaller } from '../server/guards.ts';
import { BackupPolicyArgument, type BackupPolicyBody, SaveBackupScheduleBody } from '../../contracts/backups.ts';
import { builder } from '../server/builder.ts';
import type { Context } from '../server/context.ts';
import { idempotent } from '../../idempotency/run.ts';
import { enqueueJob, JobHandle } from '../jobs/enqueue.ts';
import { startScopes } from '../jobs/start-authority.ts';
import { requireDatabase } from '../tables/tables.ts';

/**
 * A database's backup schedule and retention policy (issue 16). Saving a schedule is the job `saveBackupSchedule`
 * (spec §6 lists it among the jobs); deleting it and changing the policy are immediate. Admin authority.
 */
export type BackupScheduleShape = {
  databaseId: string;
  schedule: { cron: string; timezone: string } | null;
  policy: { keepLast: number | null; keepDays: number | null };
  nextRuns: string[];
  lastSuccessAt: string | null;
  overdueSince: string | null;
  failedJobId: string | null;
  version: string;
};

const ScheduleRef = builder.objectRef<{ cron: string; timezone: string }>('BackupScheduleSettings').implement({
  fields: (t) => ({ cron: t.exposeString('cron'), timezone: t.exposeString('timezone') }),
});
const PolicyRef = builder.objectRef<BackupScheduleShape['policy']>('BackupPolicy').implement({
  description:
    'Retention: the newest `keepLast` backups are kept, and none older than `keepDays` (null: no such limit).',
  fields: (t) => ({
    keepLast: t.exposeInt('keepLast', { nullable: true }),
    keepDays: t.exposeInt('keepDays', { nullable: true }),
  }),
});
const BackupSchedule = builder.objectRef<BackupScheduleShape>('BackupSchedule').implement({
  description: 'A database’s backup schedule, retention policy, next three runs and last success.',
  fields: (t) => ({
    databaseId: t.exposeID('databaseId'),
    schedule: t.field({ type: ScheduleRef, nullable: true, resolve: (settings) => settings.schedule }),
    policy: t.field({ type: PolicyRef, resolve: (settings) => settings.policy }),
    nextRuns: t.field({
      type: ['Timestamp'],
      description: 'The next three runs; empty without a schedule.',
      resolve: (settings) => settings.nextRuns,
    }),
    lastSuccessAt: t.field({ type: 'Timestamp', nullable: true, resolve: (settings) => settings.lastSuccessAt }),
    overdueSince: t.field({ type: 'Timestamp', nullable: true, resolve: (settings) => settings.overdueSince }),
    failedJobId: t.exposeID('failedJobId', {
      nullable: true,
      description: 'The failed backup job of an open `backup.failed` alert.',
    }),
    version: t.exposeString('version'),
  }),
});

const SaveBackupScheduleInput = builder
  .inputType('SaveBackupScheduleInput', {
    fields: (t) => ({ cron: t.string({ required: true }), timezone: t.string({ required: true }) }),
  })
  .validate(SaveBackupScheduleBody);
const BackupPolicyInput = builder
  .inputType('BackupPolicyInput', { fields: (t) => ({ keepLast: t.int(), keepDays: t.int() }) })
  .validate(BackupPolicyArgument);

async function settingsOf(db: TransactionClient | Context['prisma'], databaseId: string): Promise<BackupScheduleShape> {
  const row = await db.backupSettings.findUnique({ where: { databaseId } });
  const schedule = row?.cron && row.timezone ? { cron: row.cron, timezone: row.timezone } : null;
  return {
    databaseId,
    schedule,
    policy: { keepLast: row?.keepLast ?? null, keepDays: row?.keepDays ?? null },
    nextRuns: schedule ? nextRuns(schedule.cron, schedule.timezone, new Date()).map((run) => run.toISOString()) : [],
    lastSuccessAt: row?.lastSuccessAt?.toISOString() ?? null,
    overdueSince: row?.overdueSince?.toISOString() ?? null,
    failedJobId: row?.failedJobId ?? null,
    version: (row?.version ?? 0n).toString(),
  };
}

function actorColumns(caller: Caller) {
  const actor = actorOf(caller);
  return { actorId: actor.id, actorKind: actor.kind, actorKey: actor.key, actorName: actor.name };
}

async function updatePolicy(
  tx: TransactionClient,
  context: Context,
  orgId: string,
  databaseId: string,
  policy: BackupPolicyBody,
): Promise<BackupScheduleShape> {
  const caller = requireCaller(context);
  await requireDatabase(tx, orgId, databaseId);
  await tx.backupSettings.upsert({
    where: { databaseId },
    create: { databaseId, orgId, ...policy, ...actorColumns(caller) },
    update: { ...policy, version: { increment: 1 } },
  });
  // Expiry follows the policy for the backups already taken too; the next backup's retention pass prunes them.
  await tx.$executeRaw`UPDATE public.backups SET expires_at = created_at + make_interval(secs => ${(policy.keepDays ?? context.config.BACKUP_TTL_DAYS) * 86_400})
                        WHERE database_id = ${databaseId}::bpchar AND pruned_at IS NULL`;
  await recordActivity(tx, caller, {
    orgId,
    databaseId,
    category: 'backups',
    event: 'database.backup_policy.update',
    summary: `Backup retention: keep last ${policy.keepLast ?? 'any'}, at most ${policy.keepDays ?? 'any'} days`,
  });
  return settingsOf(tx, databaseId);
}

async function deleteSchedule(
  tx: TransactionClient,
  context: Context,
  orgId: string,
  databaseId: string,
): Promise<BackupScheduleShape> {
  await requireDatabase(tx, orgId, databaseId);
  const { count } = await tx.backupSettings.updateMany({
    where: { databaseId, cron: { not: null } },
    data: { cron: null, timezone: null, nextRunAt: null, overdueSince: null, version: { increment: 1 } },
  });
  if (count === 0) throw notFound('backup schedule');
  await recordActivity(tx, requireCaller(context), {
    orgId,
    databaseId,
    category: 'backups',
    event: 'database.backup_schedule.delete',
    summary: 'Deleted the backup schedule',
  });
  return settingsOf(tx, databaseId);
}

/**
 * A schedule runs at most once per BACKUP_MIN_INTERVAL_MINUTES (default 60): `* * * * *` on five databases made
 * fifteen backups in 200 s (issue 26 §7). Checked on save, not in the preview, which only shows when runs fall.
 */
function requireMinimumInterval(context: Context, cron: string, timezone: string): void {
  const minutes = context.config.BACKUP_MIN_INTERVAL_MINUTES;
  const gap = shortestGap(cron, timezone, new Date());
  if (gap >= minutes * 60_000) return;
  throw validationFailed(
    [
      {
        path: ['cron'],
        message: `runs ${Math.round(gap / 60_000)} minute(s) apart at the closest; backups may run at most once every ${minutes} minutes`,
      },
    ],
    `Backups may run at most once every ${minutes} minutes.`,
  );
}

/** The database a backup field addresses. */
const databaseArgs = builder.args((t) => ({
  orgId: t.id({ required: true, validate: Id }),
  databaseId: t.id({ required: true, validate: Id }),
}));
const adminOf = (orgId: unknown, oauth: 'backups:read' | 'backups:manage') => ({
  org: { orgId: String(orgId), capability: 'admin' as const },
  oauth,
});

builder.queryFields((t) => ({
  backupSchedule: t.field({
    type: BackupSchedule,
    description: 'A database’s backup schedule, retention policy, next three runs and last success.',
    args: databaseArgs,
    authScopes: (_root, { orgId }) => adminOf(orgId, 'backups:read'),
    resolve: async (_root, args, context) => {
      await requireDatabase(context.prisma, String(args.orgId), String(args.databaseId));
      return settingsOf(context.prisma, String(args.databaseId));
    },
  }),
}));

builder.mutationFields((t) => ({
  saveBackupSchedule: t.field({
    type: JobHandle,
    description:
      'Sets the database’s backup schedule (job `saveBackupSchedule`, event `database.backup_schedule.update`); same grammar and DST rules as the preview.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...databaseArgs,
      input: t.arg({ type: SaveBackupScheduleInput, required: true }),
    },
    authScopes: (_root, { orgId }) => startScopes('saveBackupSchedule', orgId),
    resolve: (_root, args, context) => {
      const [orgId, databaseId] = [String(args.orgId), String(args.databaseId)];
      const body = args.input;
      requireMinimumInterval(context, body.cron, body.timezone);
      return idempotent(
        context,
        { operation: 'saveBackupSchedule', key: args.idempotencyKey, input: { orgId, databaseId, ...body } },
        async (tx) => {
          await requireDatabase(tx, orgId, databaseId);
          return enqueueJob(tx, requireCaller(context), {
            kind: 'saveBackupSchedule',
            category: 'backups',
            orgId,
            databaseId,
            payload: body,
            summary: `Queued the backup schedule "${body.cron}" (${body.timezone})`,
            queueLimit: context.config.JOB_QUEUE_LIMIT_PER_ORG,
          });
        },
      );
    },
  }),
  deleteBackupSchedule: t.field({
    type: BackupSchedule,
    description:
      'Stops scheduled backups of the database (event `database.backup_schedule.delete`); its backups and policy stay.',
    args: { idempotencyKey: t.arg.string({ required: true }), ...databaseArgs },
    authScopes: (_root, { orgId }) => adminOf(orgId, 'backups:manage'),
    resolve: (_root, args, context) => {
      const [orgId, databaseId] = [String(args.orgId), String(args.databaseId)];
      return idempotent(
        context,
        { operation: 'deleteBackupSchedule', key: args.idempotencyKey, input: { orgId, databaseId } },
        (tx) => deleteSchedule(tx, context, orgId, databaseId),
      );
    },
  }),
  updateBackupPolicy: t.field({
    type: BackupSchedule,
    description: 'Sets the database’s backup retention (event `database.backup_policy.update`).',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...databaseArgs,
      input: t.arg({ type: BackupPolicyInput, required: true }),
    },
    authScopes: (_root, { orgId }) => adminOf(orgId, 'backups:manage'),
    resolve: (_root, args, context) => {
      const [orgId, databaseId] = [String(args.orgId), String(args.databaseId)];
      const policy = args.input;
      return idempotent(
        context,
        { operation: 'updateBackupPolicy', key: args.idempotencyKey, input: { orgId, databaseId, ...policy } },
        (tx) => updatePolicy(tx, context, orgId, databaseId, policy),
      );
    },
  }),
}));
