import { z } from 'zod';
import { MAX_CRON_LENGTH, parseCron } from '../kernel/cron.ts';
import { Id, Timestamp } from '../kernel/formats.ts';
import { isKnownTimezone } from '../kernel/timezones.ts';

/**
 * The backups domain's contract (issue 16): schedule and its preview, retention policy, restore, and the answers.
 * Backups, restores and saving a schedule are jobs: they answer a job handle (`JobHandleResponse` in jobs.ts).
 * No side effects.
 */

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
export type PreviewBackupScheduleBody = z.infer<typeof PreviewBackupScheduleBody>;

/** PUT …/backup-schedule: the same grammar and DST rules as the preview. */
export const SaveBackupScheduleBody = PreviewBackupScheduleBody;

const KeepLast = z.number().int().min(1).max(10_000);
const KeepDays = z.number().int().min(1).max(36_500);

/** PUT …/backup-policy: a replacement, so both members are required; null means no such limit. */
export const BackupPolicyBody = z.strictObject({ keepLast: KeepLast.nullable(), keepDays: KeepDays.nullable() });
export type BackupPolicyBody = z.infer<typeof BackupPolicyBody>;

/**
 * `updateBackupPolicy(input:)`: GraphQL cannot require an input field that may be null, so a member left out means
 * null there, as an explicit null does in the PUT body.
 */
export const BackupPolicyArgument = z.strictObject({
  keepLast: KeepLast.nullish().transform((value) => value ?? null),
  keepDays: KeepDays.nullish().transform((value) => value ?? null),
});

/** POST …/backups/{backupId}/restore and `restoreDatabaseBackup(input:)`. */
export const RestoreBackupBody = z
  .strictObject({
    target: z.enum(['new-database', 'replace']),
    expectedVersion: z
      .string()
      .regex(/^[1-9][0-9]{0,18}$/, 'must be the database’s version, a decimal string')
      .optional(),
    name: z.string().trim().min(1).max(120).optional(),
  })
  .superRefine((body, context) => {
    if (body.target === 'replace' && body.expectedVersion === undefined) {
      context.addIssue({
        code: 'custom',
        path: ['expectedVersion'],
        message: 'a replace restore needs the database’s current version',
      });
    }
    if (body.target === 'replace' && body.name !== undefined) {
      context.addIssue({ code: 'custom', path: ['name'], message: 'only a new-database restore takes a name' });
    }
  });
export type RestoreBackupBody = z.infer<typeof RestoreBackupBody>;

/** Spec 2.9: exactly the next three runs, ascending. */
export const BackupSchedulePreviewResponse = z.strictObject({
  nextRuns: z.array(Timestamp).length(3),
});

export const BackupScheduleResponse = z.strictObject({
  databaseId: Id,
  schedule: z.strictObject({ cron: z.string(), timezone: z.string() }).nullable(),
  policy: z.strictObject({ keepLast: z.number().int().nullable(), keepDays: z.number().int().nullable() }),
  nextRuns: z.array(Timestamp).max(3),
  lastSuccessAt: Timestamp.nullable(),
  overdueSince: Timestamp.nullable(),
  failedJobId: Id.nullable(),
  version: z.string(),
});

export const BackupResponse = z.strictObject({
  id: Id,
  databaseId: Id,
  createdAt: Timestamp,
  size: z.number().int().min(0),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  tables: z.number().int().min(0),
  rows: z.number().int().min(0),
  expiresAt: Timestamp.nullable(),
  scheduledFor: Timestamp.nullable(),
  destination: z.enum(['local', 's3']),
});
