import type { TransactionClient } from '../../db/prisma.ts';
import { prismaExecutor } from '../../db/sql.ts';
import { DomainError } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { insertJob, lockAndCountQueued, notifyWorkers } from '../../jobs/engine/sql/queue.ts';
import type { ActivityCategory } from '../../kernel/formats.ts';
import { actorOf, recordActivity } from '../../catalog/activity.ts';
import type { Caller } from '../../kernel/caller.ts';
import { builder } from '../server/builder.ts';
import { isUniqueViolation } from '../../db/pg-errors.ts';

/** Spec 2.7: what every accepted durable operation answers. */
export type JobHandleShape = {
  jobId: string;
  state: 'queued';
  statusUrl: string;
};

export const JobHandle = builder.objectRef<JobHandleShape>('JobHandle').implement({
  description: 'An accepted durable job (spec 2.7). Poll `statusUrl` until the job reaches a terminal state.',
  fields: (t) => ({
    jobId: t.exposeID('jobId'),
    state: t.exposeString('state', { description: '`queued` when accepted.' }),
    statusUrl: t.exposeString('statusUrl', {
      description: 'The job status address, relative to the service’s base URL.',
    }),
  }),
});

export function statusUrlOf(orgId: string, jobId: string): string {
  return `/v1/orgs/${orgId}/jobs/${jobId}`;
}

export interface JobRequest {
  kind: string;
  category: ActivityCategory;
  orgId: string;
  databaseId?: string;
  tableId?: string;
  payload: unknown;
  /** One unfinished job per key: a second gets SCHEMA_MAINTENANCE (e.g. `schema:<tableId>`). */
  serialKey?: string;
  /** The refusal when the serial key is taken; SCHEMA_MAINTENANCE by default. */
  serialConflict?: () => DomainError;
  summary: string;
  fileName?: string;
  /** How many jobs the org may have queued (config JOB_QUEUE_LIMIT_PER_ORG). */
  queueLimit: number;
  /** When the job becomes due (default: at once). A job scheduled for later skips the queue cap until then. */
  runAt?: Date;
}

const MAX_ATTEMPTS = 5;

/**
 * Refuses a job beyond the org's queue cap (issue 18), under the org's enqueue lock so that parallel requests cannot
 * overshoot it. 429, not CAPACITY_LIMIT's usual 409: the queue drains by itself, so the same request succeeds later.
 */
export async function checkQueueCapacity(tx: TransactionClient, orgId: string, limit: number): Promise<void> {
  const sql = prismaExecutor(tx);
  const [lock, count] = lockAndCountQueued(orgId);
  await sql.query(lock!.sql, lock!.params);
  const [row] = await sql.query<{ queued: number }>(count!.sql, count!.params);
  const queued = row?.queued ?? 0;
  if (queued >= limit) {
    throw new DomainError(
      'CAPACITY_LIMIT',
      `This organisation already has ${queued} jobs queued (at most ${limit}); retry when some have started.`,
      {
        details: { limit, queued },
        retryAfter: 5,
        status: 429,
      },
    );
  }
}

/**
 * Enqueues a job in the request's transaction, with its `job.<kind>.queued` event: the job exists exactly when the
 * request's effect does, and workers are woken when the transaction commits.
 */
export async function enqueueJob(
  tx: TransactionClient,
  caller: Caller,
  request: JobRequest,
  jobId = newId(),
): Promise<JobHandleShape> {
  const sql = prismaExecutor(tx);
  if (!request.runAt) await checkQueueCapacity(tx, request.orgId, request.queueLimit);
  const statement = insertJob({
    id: jobId,
    orgId: request.orgId,
    kind: request.kind,
    databaseId: request.databaseId ?? null,
    tableId: request.tableId ?? null,
    payload: request.payload,
    serialKey: request.serialKey ?? null,
    maxAttempts: MAX_ATTEMPTS,
    actor: actorOf(caller),
    runAt: request.runAt ?? null,
  });
  try {
    await tx.$executeRaw`SAVEPOINT enqueue_job`;
    await sql.run(statement);
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    await tx.$executeRaw`ROLLBACK TO SAVEPOINT enqueue_job`;
    throw (request.serialConflict ?? schemaMaintenance)();
  }
  await recordActivity(tx, caller, {
    orgId: request.orgId,
    category: request.category,
    event: `job.${request.kind}.queued`,
    summary: request.summary,
    ...(request.databaseId ? { databaseId: request.databaseId } : {}),
    ...(request.tableId ? { tableId: request.tableId } : {}),
    ...(request.fileName ? { fileName: request.fileName } : {}),
    jobId,
  });
  const notify = notifyWorkers();
  await sql.run(notify);
  return { jobId, state: 'queued', statusUrl: statusUrlOf(request.orgId, jobId) };
}

export function schemaMaintenance(): DomainError {
  return new DomainError(
    'SCHEMA_MAINTENANCE',
    'Another schema change of this table is queued or running; retry when it has finished.',
    {
      retryAfter: 1,
    },
  );
}
