import type { ChangeSignal } from '../../db/listener.ts';
import type { JobState } from '../../jobs/engine/sql/queue.ts';
import { builder } from '../server/builder.ts';
import { Id } from '../../kernel/formats.ts';
import type { Context } from '../server/context.ts';
import { DomainError } from '../../kernel/errors.ts';
import { Job, loadJob, toJobShape, type JobShape } from './jobs.ts';

/** The last value of a stream cut by shutdown: its field resolves to a SERVICE_RESTARTING error, not to a job. */
const restartNotices = new WeakSet<JobShape>();
function restartNotice(job: JobShape): JobShape {
  const notice = { ...job };
  restartNotices.add(notice);
  return notice;
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
function jobEvents(context: Context, orgId: string, jobId: string, signal: ChangeSignal, first: JobShape): AsyncIterableIterator<JobShape> {
  let current: JobShape | null = first;
  let reported: string | null = null;
  let finished = false;
  const finish = (): IteratorReturnResult<undefined> => {
    finished = true;
    signal.close();
    return { done: true, value: undefined };
  };
  return {
    async next() {
      try {
        while (!finished) {
          const job: JobShape = current ?? toJobShape(await loadJob(context.prisma, orgId, jobId));
          current = null;
          if (ENDED.has(job.state as JobState)) finished = true;
          if (stateOf(job) !== reported) {
            reported = stateOf(job);
            return { done: false, value: job };
          }
          // Shutting down: the stream's last event tells the client to reconnect (to another process, or this one
          // restarted); it resumes from the job's current record, so nothing is lost.
          if (signal.draining) {
            finished = true;
            return { done: false, value: restartNotice(job) };
          }
          await signal.next();
        }
        return finish();
      } catch (error) {
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

builder.subscriptionFields((t) => ({
  jobUpdated: t.field({
    type: Job,
    description: 'The job now and on every change of its state or progress; ends after the job does (at once for an ended job).',
    args: {
      orgId: t.arg.id({ required: true, validate: Id }),
      jobId: t.arg.id({ required: true, validate: Id }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'jobs:read' }),
    subscribe: async (_root, args, context) => {
      const [orgId, jobId] = [String(args.orgId), String(args.jobId)];
      const signal = await context.jobUpdates.subscribe(jobId);
      try {
        return jobEvents(context, orgId, jobId, signal, toJobShape(await loadJob(context.prisma, orgId, jobId)));
      } catch (error) {
        signal.close();
        throw error;
      }
    },
    resolve: (job) => {
      if (restartNotices.has(job)) {
        throw new DomainError('SERVICE_RESTARTING', 'The service is restarting: reconnect to follow the job.', { retryAfter: 1 });
      }
      return job;
    },
  }),
}));
