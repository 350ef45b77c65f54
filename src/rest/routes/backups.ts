import { z } from 'zod';
import { PreviewBackupScheduleBody } from '../../graph/backup-schedule.ts';
import { Id, Timestamp } from '../../graph/common.ts';
import { PreviewBackupScheduleDocument } from '../operations/documents.ts';
import { defineRoute } from '../route.ts';

/** Spec 2.9: exactly the next three runs, ascending. */
export const BackupSchedulePreviewResponse = z.strictObject({
  nextRuns: z.array(Timestamp).length(3),
});

export const backupRoutes = [
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/backup-schedule/preview',
    summary: 'Preview backup schedule (endpoint 7): the next three runs of a cron expression in a timezone',
    tags: ['backups'],
    operation: PreviewBackupScheduleDocument,
    params: z.strictObject({ orgId: Id, databaseId: Id }),
    query: z.strictObject({}),
    body: PreviewBackupScheduleBody,
    // A preview changes nothing, so spec 4.1 exempts it from Idempotency-Key.
    idempotent: false,
    successStatus: 200,
    response: BackupSchedulePreviewResponse,
  }),
];
