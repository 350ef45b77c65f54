import type pg from 'pg';
import type { z } from 'zod';
import type { Config } from '../../kernel/config.ts';
import type { PrismaClient } from '../../db/prisma.ts';
import type { PgClientExecutor } from '../../db/sql.ts';
import type { ErrorCode } from '../../kernel/errors.ts';
import type { ActivityCategory, Json } from '../../kernel/formats.ts';
import type { Logger } from '../../kernel/log.ts';
import type { Progress } from './sql/queue.ts';

/** The job a handler runs, as claimed (payload already parsed by the handler's schema). */
export interface ClaimedJob {
  id: string;
  orgId: string;
  kind: string;
  databaseId: string | null;
  tableId: string | null;
  attempt: number;
  actor: { id: string; kind: string; key: string | null; name: string };
}

export interface JobServices {
  pool: pg.Pool;
  prisma: PrismaClient;
  config: Config;
  log: Logger;
}

/** A job's running state: its last checkpoint, and the one way to move past it. */
export interface JobRun<Payload, Journal> extends JobServices {
  job: ClaimedJob;
  payload: Payload;
  /** The journal of the last committed checkpoint (`{}` on a first run). */
  journal: Partial<Journal>;
  /**
   * One resumable step: `work` runs in a transaction that first proves the lease is still held (and stops the job
   * if it was cancelled), and commits together with the checkpoint it returns. A worker killed at any point
   * either committed the step and its checkpoint, or neither: a rerun continues from the journal without losing
   * or repeating work.
   */
  step(work: (sql: PgClientExecutor) => Promise<Checkpoint<Journal>>): Promise<void>;
  /** Throws JobCancelled when a cancel was requested since the last step. */
  throwIfCancelled(): void;
  /**
   * Aborts when the heartbeat sees a cancel request, a lost lease or the worker stopping: outbound calls (S3) take it
   * so that they end then, instead of at their timeout. The job then ends as that reason says (cancelled, handed
   * back), whatever error the aborted call threw.
   */
  signal: AbortSignal;
}

export interface Checkpoint<Journal> {
  journal: Journal;
  progress: Progress;
}

export interface JobFailure {
  code: ErrorCode;
  message: string;
  details?: Json;
}

/**
 * How a job ended. `failed` here is a verified, expected failure (e.g. rows that cannot convert). `Result` is the
 * kind's declared result (its zod schema in src/jobs/kinds/<family>/results.ts, which the OpenAPI `Job` reads).
 */
export interface JobOutcome<Result = Json> {
  state: 'succeeded' | 'partially_completed' | 'failed';
  result: Result;
  error?: JobFailure;
  summary: string;
  affectedRows?: number;
}

/**
 * One kind of job (one file or folder per kind under src/jobs/kinds, as Graphile tasks): its payload schema, its
 * result schema, its handler, and how it appears in the activity feed (`job.<kind>.<suffix>`, spec §6).
 */
export interface JobHandler<Payload = any, Journal = any, Result = any> {
  kind: string;
  payload: z.ZodType<Payload>;
  /** What `run` answers as `result`: the schema JOB_RESULTS (src/jobs/kinds/results.ts) holds for the kind. */
  result: z.ZodType<Result>;
  /** Spec §6 kinds without a `succeeded` suffix mark success with a plain kind (e.g. `field.create`). */
  successEvent(payload: Payload): string;
  /** One line for the activity feed, e.g. "Import preview of customers.csv". */
  describe(payload: Payload): string;
  fileName?(payload: Payload): string | null;
  run(run: JobRun<Payload, Journal>): Promise<JobOutcome<Result>>;
  /** Undoes partial work after a cancel or a final failure (staging tables, shadow columns). Must be idempotent. */
  discard?(run: JobRun<Payload, Journal>): Promise<void>;
}

/** The job was cancelled while it ran; the runner undoes its partial work and marks it `cancelled`. */
export class JobCancelled extends Error {
  constructor() {
    super('The job was cancelled.');
  }
}

/** Another worker took the job over (this one's lease ran out): stop without touching it. */
export class LeaseLost extends Error {
  constructor() {
    super('The job’s lease was lost to another worker.');
  }
}

export function succeededEvent(kind: string): string {
  return `job.${kind}.succeeded`;
}

/** A handler as the runner gets it: with the activity category its kind has in JOB_CATEGORIES (src/jobs/engine/kinds.ts). */
export interface RegisteredJobHandler<Payload = any, Journal = any, Result = any>
  extends JobHandler<Payload, Journal, Result> {
  category: ActivityCategory;
}
