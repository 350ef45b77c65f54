import { z } from 'zod';
import type { PrismaClient, TransactionClient } from '../../db/prisma.ts';
import { prismaExecutor } from '../../db/sql.ts';
import { DomainError, notFound } from '../../kernel/errors.ts';
import {
  cancelQueued,
  JOB_STATES,
  notifyWorkers,
  requestCancel,
  requeue,
  type JobState,
} from '../../jobs/engine/sql/queue.ts';
import { JOB_CATEGORIES, type JobKind } from '../../jobs/engine/kinds.ts';
import { PURGE_KINDS } from '../../jobs/kinds/trash/purge.ts';
import { recordActivity } from '../../catalog/activity.ts';
import type { Caller, OrgAuthority } from '../../kernel/caller.ts';
import { requireCaller, requireCapability } from '../server/guards.ts';
import { builder } from '../server/builder.ts';
import { Id, type Json } from '../../kernel/formats.ts';
import { cursorKey, Cursor, decodeCursor, DEFAULT_PAGE_SIZE, encodeCursor, PageLimit } from '../../catalog/cursor.ts';
import { idempotent } from '../../idempotency/run.ts';
import { pageOf, pageRef, type PageArgs } from '../shared/pages.ts';
import type { Context } from '../server/context.ts';
import { isUniqueViolation } from '../../db/pg-errors.ts';
import { JobKindFilter, JobStateFilter } from '../../contracts/jobs.ts';
import { checkQueueCapacity, schemaMaintenance } from './enqueue.ts';
import { requireStartAuthority } from './start-authority.ts';

/** The job status record behind every `statusUrl` (issue 5; spec 2.16 leaves it open). */
export type JobShape = {
  jobId: string;
  kind: string;
  state: JobState;
  progress: { done: number; total: number | null };
  createdAt: string;
  updatedAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  result: Json;
  error: Json;
  artifacts: ArtifactShape[];
};

export type ArtifactShape = {
  name: string;
  contentType: string;
  size: number;
  sha256: string;
  createdAt: string;
  expiresAt: string;
  url: string;
};

const Artifact = builder.objectRef<ArtifactShape>('JobArtifact').implement({
  description: 'A file a job produced. Its size and sha256 are checked again when it is downloaded.',
  fields: (t) => ({
    name: t.exposeString('name'),
    contentType: t.exposeString('contentType'),
    size: t.exposeInt('size', { description: 'Bytes.' }),
    sha256: t.exposeString('sha256', { description: 'Hex digest of the content.' }),
    createdAt: t.field({ type: 'Timestamp', resolve: (artifact) => artifact.createdAt }),
    expiresAt: t.field({ type: 'Timestamp', resolve: (artifact) => artifact.expiresAt }),
    url: t.exposeString('url', { description: 'Download address, relative to the service’s base URL.' }),
  }),
});

const JobProgress = builder.objectRef<JobShape['progress']>('JobProgress').implement({
  fields: (t) => ({
    done: t.exposeInt('done'),
    total: t.exposeInt('total', { nullable: true, description: 'null until the job knows how much work there is.' }),
  }),
});

export const Job = builder.objectRef<JobShape>('Job').implement({
  description: 'A durable job: import preview, import, schema change.',
  fields: (t) => ({
    jobId: t.exposeID('jobId'),
    kind: t.exposeString('kind', { description: 'The operation, as in its activity events (`job.<kind>.<suffix>`).' }),
    state: t.exposeString('state', { description: JOB_STATES.join(', ') }),
    progress: t.field({ type: JobProgress, resolve: (job) => job.progress }),
    createdAt: t.field({ type: 'Timestamp', resolve: (job) => job.createdAt }),
    updatedAt: t.field({ type: 'Timestamp', resolve: (job) => job.updatedAt }),
    startedAt: t.field({ type: 'Timestamp', nullable: true, resolve: (job) => job.startedAt }),
    finishedAt: t.field({ type: 'Timestamp', nullable: true, resolve: (job) => job.finishedAt }),
    result: t.field({
      type: 'JSON',
      nullable: true,
      description: 'The job’s outcome (kind-specific); null until it finishes.',
      resolve: (job) => job.result,
    }),
    error: t.field({
      type: 'JSON',
      nullable: true,
      description: '`{code, message, details?}` when the job failed.',
      resolve: (job) => job.error,
    }),
    artifacts: t.field({ type: [Artifact], resolve: (job) => job.artifacts }),
  }),
});

export const JobPage = pageRef('JobPage', Job, 'A page of jobs, newest first.');

const jobSelect = {
  id: true,
  orgId: true,
  kind: true,
  state: true,
  progressDone: true,
  progressTotal: true,
  createdAt: true,
  updatedAt: true,
  startedAt: true,
  finishedAt: true,
  result: true,
  error: true,
  actorId: true,
  artifacts: {
    where: { listed: true },
    orderBy: { name: 'asc' },
    select: { name: true, contentType: true, sizeBytes: true, sha256: true, createdAt: true, expiresAt: true },
  },
} as const;

type JobRow = Awaited<ReturnType<typeof findJob>> & object;

function findJob(db: PrismaClient | TransactionClient, orgId: string, jobId: string) {
  return db.job.findFirst({ where: { id: jobId, orgId }, select: jobSelect });
}

export function artifactUrlOf(orgId: string, jobId: string, name: string): string {
  return `/v1/orgs/${orgId}/jobs/${jobId}/artifacts/${encodeURIComponent(name)}`;
}

export function toJobShape(row: JobRow): JobShape {
  return {
    jobId: row.id,
    kind: row.kind,
    state: row.state,
    progress: { done: Number(row.progressDone), total: row.progressTotal === null ? null : Number(row.progressTotal) },
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    startedAt: row.startedAt?.toISOString() ?? null,
    finishedAt: row.finishedAt?.toISOString() ?? null,
    result: (row.result ?? null) as Json,
    error: (row.error ?? null) as Json,
    artifacts: row.artifacts.map((artifact) => ({
      name: artifact.name,
      contentType: artifact.contentType,
      size: Number(artifact.sizeBytes),
      sha256: artifact.sha256,
      createdAt: artifact.createdAt.toISOString(),
      expiresAt: artifact.expiresAt.toISOString(),
      url: artifactUrlOf(row.orgId, row.id, artifact.name),
    })),
  };
}

export async function loadJob(db: PrismaClient | TransactionClient, orgId: string, jobId: string): Promise<JobRow> {
  const row = await findJob(db, orgId, jobId);
  if (!row) throw notFound('job');
  return row;
}

/**
 * A job's creator may cancel or retry it, an admin anyone's (DESIGN §3). Cancelling only stops work (and undoes
 * its partial effect), so it needs no more than read authority: a viewer stops the export they started. Retrying
 * starts the work again, so it passes every check that starting a job of its kind makes (start-authority.ts).
 */
function requireJobControl(caller: Caller, authority: OrgAuthority, job: JobRow): void {
  if (job.actorId !== caller.actorId && !authority.capabilities.has('admin')) {
    throw new DomainError('FORBIDDEN', 'Only the job’s creator or an admin may cancel or retry it.');
  }
}

/** A trash purge runs on the service's schedule: restoring the entry is what stops it (docs/decisions/lifecycle.md). */
function refusePurgeControl(job: JobRow, action: string): void {
  if (!PURGE_KINDS.has(job.kind)) return;
  throw new DomainError(
    'JOB_STATE_CONFLICT',
    `A ${job.kind} job purges a trash entry and cannot be ${action}; restore the entry from the trash to keep it.`,
    {
      details: { state: job.state, kind: job.kind },
    },
  );
}

function stateConflict(job: JobRow, action: string, allowed: string): DomainError {
  return new DomainError('JOB_STATE_CONFLICT', `A ${job.state} job cannot be ${action}; only ${allowed} jobs can.`, {
    details: { state: job.state },
  });
}

/**
 * Where a job's cancel and retry events belong: the database, table and file of its own queued event (written with
 * the job by enqueueJob), so they appear in the table's activity next to the job's other events.
 */
async function eventContextOf(
  tx: TransactionClient,
  jobId: string,
): Promise<{ databaseId?: string; tableId?: string; fileName?: string }> {
  const queued = await tx.activityEvent.findFirst({
    where: { jobId, event: { endsWith: '.queued' } },
    orderBy: { id: 'asc' },
    select: { databaseId: true, tableId: true, fileName: true },
  });
  return {
    ...(queued?.databaseId ? { databaseId: queued.databaseId } : {}),
    ...(queued?.tableId ? { tableId: queued.tableId } : {}),
    ...(queued?.fileName ? { fileName: queued.fileName } : {}),
  };
}

async function cancelJob(
  tx: TransactionClient,
  caller: Caller,
  authority: OrgAuthority,
  orgId: string,
  jobId: string,
): Promise<JobShape> {
  const job = await loadJob(tx, orgId, jobId);
  requireJobControl(caller, authority, job);
  refusePurgeControl(job, 'cancelled');
  const sql = prismaExecutor(tx);
  const queued = cancelQueued(jobId);
  const [cancelled] = await sql.run(queued);
  if (cancelled) {
    await recordActivity(tx, caller, {
      orgId,
      category: JOB_CATEGORIES[job.kind as JobKind],
      event: `job.${job.kind}.cancelled`,
      summary: `Cancelled a queued ${job.kind} job`,
      jobId,
      ...(await eventContextOf(tx, jobId)),
    });
  } else {
    const running = requestCancel(jobId);
    const [requested] = await sql.run(running);
    if (!requested) throw stateConflict(job, 'cancelled', 'queued or running');
  }
  return toJobShape(await loadJob(tx, orgId, jobId));
}

async function retryJob(
  context: Context,
  tx: TransactionClient,
  caller: Caller,
  orgId: string,
  jobId: string,
  queueLimit: number,
): Promise<JobShape> {
  const job = await loadJob(tx, orgId, jobId);
  const authority = requireStartAuthority(context, orgId, job.kind);
  requireJobControl(caller, authority, job);
  refusePurgeControl(job, 'retried');
  // A retried job joins the queue again, so it counts against the org's cap like a new one.
  await checkQueueCapacity(tx, orgId, queueLimit);
  const sql = prismaExecutor(tx);
  const statement = requeue(jobId);
  try {
    await tx.$executeRaw`SAVEPOINT retry_job`;
    const [requeued] = await sql.run(statement);
    if (!requeued) throw stateConflict(job, 'retried', 'failed or cancelled');
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    await tx.$executeRaw`ROLLBACK TO SAVEPOINT retry_job`;
    throw schemaMaintenance();
  }
  await tx.jobArtifact.deleteMany({ where: { jobId, listed: true } });
  await recordActivity(tx, caller, {
    orgId,
    category: JOB_CATEGORIES[job.kind as JobKind],
    event: `job.${job.kind}.queued`,
    summary: `Retried a ${job.kind} job`,
    jobId,
    ...(await eventContextOf(tx, jobId)),
  });
  const notify = notifyWorkers();
  await sql.run(notify);
  return toJobShape(await loadJob(tx, orgId, jobId));
}

const JobPosition = z.strictObject({ createdAt: z.string(), id: Id });

export type JobListArgs = PageArgs & { state?: string | null; kind?: string | null };

/** The org's jobs, newest first: the `jobs` query and the `Org.jobs` edge. */
export async function listJobs(context: Context, orgId: string, args: JobListArgs) {
  const limit = args.limit ?? DEFAULT_PAGE_SIZE;
  const key = await cursorKey(context.prisma);
  const scope = `jobs:${orgId}:${args.state ?? ''}:${args.kind ?? ''}`;
  const after = args.cursor ? decodeCursor(key, scope, args.cursor, JobPosition) : undefined;
  const rows = await context.prisma.job.findMany({
    where: {
      orgId,
      ...(args.state ? { state: args.state as JobState } : {}),
      ...(args.kind ? { kind: args.kind } : {}),
      ...(after
        ? {
            OR: [
              { createdAt: { lt: new Date(after.createdAt) } },
              { createdAt: new Date(after.createdAt), id: { lt: after.id } },
            ],
          }
        : {}),
    },
    orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
    take: limit + 1,
    select: jobSelect,
  });
  return pageOf(rows, limit, toJobShape, (last) =>
    encodeCursor(key, scope, { createdAt: last.createdAt.toISOString(), id: last.id }),
  );
}

const jobArgs = builder.args((t) => ({
  orgId: t.id({ required: true, validate: Id }),
  jobId: t.id({ required: true, validate: Id }),
}));

builder.queryFields((t) => ({
  job: t.field({
    type: Job,
    description: 'A job’s status, progress, outcome and artifacts.',
    args: jobArgs,
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'jobs:read' }),
    resolve: async (_root, { orgId, jobId }, context) =>
      toJobShape(await loadJob(context.prisma, String(orgId), String(jobId))),
  }),
  jobs: t.field({
    type: JobPage,
    description: 'The org’s jobs, newest first, optionally only those in one state or of one kind.',
    args: {
      orgId: t.arg.id({ required: true, validate: Id }),
      state: t.arg.string({ validate: JobStateFilter.optional() }),
      kind: t.arg.string({ validate: JobKindFilter.optional() }),
      limit: t.arg.int({ validate: PageLimit.optional() }),
      cursor: t.arg.string({ validate: Cursor.optional() }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'jobs:read' }),
    resolve: (_root, args, context) => listJobs(context, String(args.orgId), args),
  }),
}));

builder.mutationFields((t) => ({
  cancelJob: t.field({
    type: Job,
    description:
      'Cancels a queued job at once, or asks a running one to stop at its next checkpoint (it then undoes its partial work). Its creator may, with read authority; an admin may cancel anyone’s.',
    args: { idempotencyKey: t.arg.string({ required: true }), ...jobArgs },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'jobs:cancel' }),
    resolve: (_root, { idempotencyKey, orgId, jobId }, context) => {
      const [org, job] = [String(orgId), String(jobId)];
      const authority = requireCapability(context, org, 'read');
      return idempotent(
        context,
        { operation: 'cancelJob', key: idempotencyKey, input: { orgId: org, jobId: job } },
        (tx) => cancelJob(tx, requireCaller(context), authority, org, job),
      );
    },
  }),
  retryJob: t.field({
    type: Job,
    description:
      'Runs a failed or cancelled job again from the start. Needs `jobs:retry` and every check that starts a job of its kind (capability, scope, step-up), with the caller’s current role.',
    args: { idempotencyKey: t.arg.string({ required: true }), ...jobArgs },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'jobs:retry' }),
    resolve: (_root, { idempotencyKey, orgId, jobId }, context) => {
      const [org, job] = [String(orgId), String(jobId)];
      return idempotent(
        context,
        { operation: 'retryJob', key: idempotencyKey, input: { orgId: org, jobId: job } },
        (tx) => retryJob(context, tx, requireCaller(context), org, job, context.config.JOB_QUEUE_LIMIT_PER_ORG),
      );
    },
  }),
}));
