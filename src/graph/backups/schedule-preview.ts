import { builder } from '../server/builder.ts';
import { Id } from '../../kernel/formats.ts';
import { requireDatabase } from '../tables/tables.ts';
import { nextRuns } from '../../kernel/cron.ts';
import { PreviewBackupScheduleBody } from '../../contracts/backups.ts';

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

const PreviewBackupScheduleInput = builder
  .inputType('PreviewBackupScheduleInput', {
    fields: (t) => ({
      cron: t.string({
        required: true,
        description: 'Five fields: minute hour day-of-month month day-of-week (Vixie cron).',
      }),
      timezone: t.string({ required: true, description: 'IANA time zone name, or UTC.' }),
    }),
  })
  .validate(PreviewBackupScheduleBody);

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
