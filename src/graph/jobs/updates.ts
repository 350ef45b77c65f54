import { databaseUnavailableError, isDatabaseUnavailable } from '../../db/availability.ts';
import type { ChangeSignal } from '../../db/listener.ts';
import type { JobState } from '../../jobs/engine/sql/queue.ts';
import { builder } from '../server/builder.ts';
import { Id } from '../../kernel/formats.ts';
import type { Context } from '../server/context.ts';
import { acquireStream } from '../server/stream-leases.ts';
import { DomainError } from '../../kernel/errors.ts';
import type { StreamLease } from '../../kernel/stream-limits.ts';
import { Job, loadJob, toJobShape, type JobShape } from './jobs.ts';

/** Not a job: the error the stream ends with (a revoked credential, a removed member, the database gone). */
interface StreamEnd {
  endedWith: DomainError;
}

const ENDED: ReadonlySet<JobState> = new Set(['succeeded', 'failed', 'partially_completed', 'cancelled']);

/** What an event reports: a new event goes out only when one of these changed. */
function stateOf(job: JobShape): string {
  return `${job.state}:${job.progress.done}:${job.progress.total}`;
}

/**
 * The job's current record on every change of its state or progress, from `first` (read after the signal began
 * listening, so nothing between the two is missed) until it ends. Each wake-up re-reads the job: changes that come
 * faster than one read fold into the latest, and events stay in order. A hand-written iterator, not an async
 * generator: a generator waiting for the next change would not run its cleanup when the client leaves.
 */
function jobEvents(
  context: Context,
  orgId: string,
  jobId: string,
  signal: ChangeSignal,
  lease: StreamLease,
  first: JobShape,
): AsyncIterableIterator<JobShape | StreamEnd> {
  let current: JobShape | null = first;
  let reported: string | null = null;
  let finished = false;
  // The last event carries the error (resolve throws it, so it is masked and framed like any other), then it ends.
  const endWith = (error: DomainError): IteratorYieldResult<StreamEnd> => {
    finished = true;
    return { done: false, value: { endedWith: error } };
  };
  const finish = (): IteratorReturnResult<undefined> => {
    finished = true;
    signal.close();
    lease.release();
    return { done: true, value: undefined };
  };
  return {
    async next() {
      try {
        while (!finished) {
          if (lease.revoked) return endWith(lease.revoked);
          // Every stream of this job woken by one change shares one read (src/db/listener.ts).
          const job: JobShape =
            current ?? (await context.jobUpdates.shared(jobId, orgId, () => readJob(context, orgId, jobId)));
          current = null;
          if (ENDED.has(job.state as JobState)) finished = true;
          if (stateOf(job) !== reported) {
            reported = stateOf(job);
            return { done: false, value: job };
          }
          // Shutting down: the stream's last event tells the client to reconnect (to another process, or this one
          // restarted); it resumes from the job's current record, so nothing is lost.
          if (signal.draining) {
            return endWith(
              new DomainError('SERVICE_RESTARTING', 'The service is restarting: reconnect to follow the job.', {
                retryAfter: 1,
              }),
            );
          }
          await signal.next();
        }
        return finish();
      } catch (error) {
        if (error instanceof DomainError) return endWith(error);
        if (isDatabaseUnavailable(error)) return endWith(databaseUnavailableError());
        finish();
        throw error;
      }
    },
    async return() {
      return finish();
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

const readJob = async (context: Context, orgId: string, jobId: string) =>
  toJobShape(await loadJob(context.prisma, orgId, jobId));

builder.subscriptionFields((t) => ({
  jobUpdated: t.field({
    type: Job,
    description:
      'The job now and on every change of its state or progress; ends after the job does (at once for an ended job).',
    args: {
      orgId: t.arg.id({ required: true, validate: Id }),
      jobId: t.arg.id({ required: true, validate: Id }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'jobs:read' }),
    subscribe: async (_root, args, context) => {
      const [orgId, jobId] = [String(args.orgId), String(args.jobId)];
      let wake: () => void = () => undefined;
      const lease = await acquireStream(context, orgId, 'jobs:read', () => wake());
      let signal: ChangeSignal | undefined;
      try {
        signal = await context.jobUpdates.subscribe(jobId);
        const opened = signal;
        wake = () => opened.close();
        return jobEvents(
          context,
          orgId,
          jobId,
          opened,
          lease,
          await context.jobUpdates.shared(jobId, orgId, () => readJob(context, orgId, jobId)),
        );
      } catch (error) {
        signal?.close();
        lease.release();
        throw error;
      }
    },
    resolve: (event: JobShape | StreamEnd) => {
      if ('endedWith' in event) throw event.endedWith;
      return event;
    },
  }),
}));
