import { z } from 'zod';
import { builder } from '../server/builder.ts';
import { Id } from '../../kernel/formats.ts';
import { requireDatabase } from '../tables/tables.ts';
import { isKnownTimezone } from '../../kernel/timezones.ts';
import { MAX_CRON_LENGTH, nextRuns, parseCron } from '../../kernel/cron.ts';

/** Spec 4.9 (endpoint 7): the next runs of a five-field cron schedule in an explicit timezone (rules: src/kernel/cron.ts). */
export const PreviewBackupScheduleBody = z.strictObject({
  cron: z
    .string()
    .max(MAX_CRON_LENGTH)
    .superRefine((cron, context) => {
      if (cron.length > MAX_CRON_LENGTH) return;
      const parsed = parseCron(cron);
      if (!parsed.ok) for (const message of parsed.problems) context.addIssue({ code: 'custom', message });
    }),
  timezone: z
    .string()
    .min(1)
    .max(100)
    .refine(isKnownTimezone, 'unknown timezone: use an IANA name such as Europe/Berlin, or UTC'),
});

interface BackupSchedulePreviewShape {
  nextRuns: Date[];
}

const BackupSchedulePreview = builder.objectRef<BackupSchedulePreviewShape>('BackupSchedulePreview').implement({
  description: 'The next runs of a backup schedule (spec 2.9).',
  fields: (t) => ({
    nextRuns: t.field({
      type: ['Timestamp'],
      description: 'The next three runs after now, ascending.',
      resolve: (preview) => preview.nextRuns,
    }),
  }),
});

const PreviewBackupScheduleInput = builder.inputType('PreviewBackupScheduleInput', {
  fields: (t) => ({
    cron: t.string({
      required: true,
      description: 'Five fields: minute hour day-of-month month day-of-week (Vixie cron).',
    }),
    timezone: t.string({ required: true, description: 'IANA time zone name, or UTC.' }),
  }),
  validate: PreviewBackupScheduleBody,
});

builder.queryFields((t) => ({
  backupSchedulePreview: t.field({
    type: BackupSchedulePreview,
    description:
      'The next three runs of a cron schedule in a timezone, for a database’s backups. Reads nothing but the database’s existence.',
    args: {
      orgId: t.arg.id({ required: true, validate: Id }),
      databaseId: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: PreviewBackupScheduleInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'backups:read' }),
    resolve: async (_root, { orgId, databaseId, input }, context) => {
      await requireDatabase(context.prisma, String(orgId), String(databaseId));
      return { nextRuns: nextRuns(input.cron, input.timezone, new Date()) };
    },
  }),
}));
