import { createWaker } from './waker.ts';
import { hostname } from 'node:os';
import pg from 'pg';
import { inPgTransaction, pgExecutor } from '../../db/sql.ts';
import { DomainError, isErrorCode } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { insertActivity } from '../../data/activity.ts';
import type { Json } from '../../kernel/formats.ts';
import {
  JobCancelled,
  LeaseLost,
  type ClaimedJob,
  type JobFailure,
  type JobOutcome,
  type JobRun,
  type JobServices,
  type RegisteredJobHandler,
} from './handler.ts';
import {
  backoffSeconds,
  checkpoint,
  claimJob,
  finishJob,
  heartbeat,
  lockForStep,
  NOTIFY_CHANNEL,
  retryLater,
  type ClaimedJobRow,
  type TerminalState,
} from './sql/queue.ts';

export interface RunnerOptions extends JobServices {
  handlers: readonly RegisteredJobHandler[];
  concurrency: number;
  /** Of the `concurrency` slots, how many one org's jobs may hold at once (absent: all of them). */
  slotsPerOrg?: number;
  leaseSeconds: number;
  pollMs: number;
}

export interface JobRunner {
  stop(): Promise<void>;
}

/** The process is shutting down: the job goes back to the queue at its last checkpoint. */
class WorkerStopping extends Error {}

/** Reclaimed once more after its last attempt's worker died: it is failed (and its partial work undone), not run. */
class AttemptsExhausted extends Error {
  constructor() {
    super('The job’s worker stopped responding on its last attempt.');
  }
}

function claimedJobOf(row: ClaimedJobRow): ClaimedJob {
  return {
    id: row.id,
    orgId: row.org_id,
    kind: row.kind,
    databaseId: row.database_id,
    tableId: row.table_id,
    attempt: row.attempts,
    actor: { id: row.actor_id, kind: row.actor_kind, key: row.actor_key, name: row.actor_name },
  };
}

const SUFFIX: Record<TerminalState, string> = {
  succeeded: 'succeeded',
  failed: 'failed',
  partially_completed: 'partially_completed',
  cancelled: 'cancelled',
};

/** One claimed job from start to its terminal state, or to the retry queue. */
class Execution {
  private cancelRequested = false;
  private leaseLost = false;
  private readonly heartbeatTimer: NodeJS.Timeout;
  private readonly abort = new AbortController();

  constructor(
    private readonly options: RunnerOptions,
    private readonly handler: RegisteredJobHandler,
    private readonly row: ClaimedJobRow,
    private readonly worker: { stopping: boolean },
  ) {
    // A third of the lease: two heartbeats may be missed (a long GC, a slow statement) before the lease runs out.
    this.heartbeatTimer = setInterval(() => void this.beat(), (options.leaseSeconds * 1000) / 3);
  }

  private get job(): ClaimedJob {
    return claimedJobOf(this.row);
  }

  private async beat(): Promise<void> {
    try {
      const statement = heartbeat(this.row.id, this.row.lease_token, this.options.leaseSeconds);
      const [row] = await pgExecutor(this.options.pool).query<{ cancel_requested: boolean }>(
        statement.sql,
        statement.params,
      );
      if (!row) this.leaseLost = true;
      else if (row.cancel_requested) this.cancelRequested = true;
    } catch (error) {
      this.options.log.warn({ err: error, jobId: this.row.id }, 'job heartbeat failed');
    }
    try {
      this.throwIfStopped();
    } catch (reason) {
      this.abort.abort(reason);
    }
  }

  private throwIfStopped(): void {
    if (this.leaseLost) throw new LeaseLost();
    if (this.worker.stopping) throw new WorkerStopping();
    if (this.cancelRequested) throw new JobCancelled();
  }

  private runOf(payload: unknown): JobRun<unknown, unknown> {
    const { pool, prisma, config, log } = this.options;
    const journal = { ...(this.row.journal as Record<string, unknown>) };
    const run: JobRun<unknown, unknown> = {
      pool,
      prisma,
      config,
      log: log.child({ jobId: this.row.id, kind: this.row.kind }),
      job: this.job,
      payload,
      journal,
      throwIfCancelled: () => this.throwIfStopped(),
      signal: this.abort.signal,
      step: async (work) => {
        this.throwIfStopped();
        await inPgTransaction(pool, [], async (sql) => {
          // Lock and fence first: a reclaimed job's old worker matches no row here and writes nothing.
          const [held] = await sql.run<{ cancel_requested: boolean }>(lockForStep(this.row.id, this.row.lease_token));
          if (!held) throw new LeaseLost();
          if (held.cancel_requested) throw new JobCancelled();
          const next = await work(sql);
          const statement = checkpoint(
            this.row.id,
            this.row.lease_token,
            this.options.leaseSeconds,
            next.journal,
            next.progress,
          );
          await sql.run(statement);
          run.journal = next.journal as Record<string, unknown>;
          return { value: undefined };
        }).catch((error: unknown) => {
          if (error instanceof JobCancelled) this.cancelRequested = true;
          throw error;
        });
      },
    };
    return run;
  }

  async execute(): Promise<void> {
    const log = this.options.log.child({ jobId: this.row.id, kind: this.row.kind, attempt: this.row.attempts });
    let run: JobRun<unknown, unknown> | undefined;
    try {
      run = this.runOf(this.handler.payload.parse(this.row.payload));
      if (this.row.attempts > this.row.max_attempts) throw new AttemptsExhausted();
      if (this.row.reclaimed) log.info({ journal: this.row.journal }, 'resuming a job whose worker stopped');
      else log.info('job started');
      // Once the handler has returned, its work is committed: a cancel or a shutdown arriving now changes nothing.
      const outcome = await this.handler.run(run);
      await this.finish(outcome.state, outcome, run.payload);
    } catch (error) {
      await this.stopAfter(error, run, log);
    } finally {
      clearInterval(this.heartbeatTimer);
    }
  }

  private async stopAfter(
    thrown: unknown,
    run: JobRun<unknown, unknown> | undefined,
    log: JobServices['log'],
  ): Promise<void> {
    // A call aborted through run.signal throws its own error (an AbortError, or the handler's wrapping of it).
    const error: unknown = this.abort.signal.aborted ? this.abort.signal.reason : thrown;
    if (error instanceof LeaseLost) {
      log.warn('job lease lost; another worker continues it');
      return;
    }
    if (error instanceof WorkerStopping) {
      // Handed back at once with its journal, rather than held until the lease runs out.
      const statement = retryLater(this.row.id, this.row.lease_token, 0, 'the worker stopped');
      await pgExecutor(this.options.pool).run(statement);
      return;
    }
    if (error instanceof JobCancelled) {
      await this.discard(run, log);
      await this.finish('cancelled', { state: 'failed', result: null, summary: 'Cancelled' }, run?.payload);
      return;
    }
    const expected = error instanceof DomainError && isErrorCode(error.code);
    if (!expected && !(error instanceof AttemptsExhausted) && this.row.attempts < this.row.max_attempts) {
      log.warn({ err: error }, 'job attempt failed; retrying');
      const statement = retryLater(
        this.row.id,
        this.row.lease_token,
        backoffSeconds(this.row.attempts),
        String((error as Error)?.message ?? error),
      );
      await pgExecutor(this.options.pool).run(statement);
      return;
    }
    if (!expected) log.error({ err: error }, 'job failed on its last attempt');
    await this.discard(run, log);
    const failure: JobFailure = expected
      ? {
          code: (error as DomainError).code as JobFailure['code'],
          message: (error as DomainError).message,
          ...detailsOf(error as DomainError),
        }
      : {
          code: 'JOB_FAILED',
          message: error instanceof AttemptsExhausted ? error.message : 'The job failed after its last attempt.',
        };
    await this.finish(
      'failed',
      { state: 'failed', result: null, error: failure, summary: failure.message },
      run?.payload,
    );
  }

  private async discard(run: JobRun<unknown, unknown> | undefined, log: JobServices['log']): Promise<void> {
    if (!run || !this.handler.discard) return;
    try {
      await this.handler.discard(run);
    } catch (error) {
      log.error({ err: error }, 'undoing a stopped job’s partial work failed');
    }
  }

  private async finish(state: TerminalState, outcome: JobOutcome, payload: unknown): Promise<void> {
    const event =
      state === 'succeeded' && payload !== undefined
        ? this.handler.successEvent(payload)
        : `job.${this.row.kind}.${SUFFIX[state]}`;
    const description = payload === undefined ? this.row.kind : this.handler.describe(payload);
    this.options.log.info(
      { jobId: this.row.id, kind: this.row.kind, state, error: outcome.error?.code },
      'job finished',
    );
    await inPgTransaction(this.options.pool, [], async (sql) => {
      const done = finishJob(this.row.id, this.row.lease_token, state, outcome.result, outcome.error);
      const [finished] = await sql.run(done);
      if (!finished) throw new LeaseLost();
      const entry = insertActivity({
        id: newId(),
        orgId: this.row.org_id,
        category: this.handler.category,
        event,
        jobId: this.row.id,
        summary: `${description}: ${state.replace('_', ' ')}`.slice(0, 500),
        databaseId: this.row.database_id,
        tableId: this.row.table_id,
        affectedRows: outcome.affectedRows ?? null,
        fileName: payload === undefined ? null : (this.handler.fileName?.(payload) ?? null),
        actor: this.job.actor,
      });
      await sql.run(entry);
      return { value: undefined };
    }).catch((error: unknown) => {
      if (!(error instanceof LeaseLost)) throw error;
    });
  }
}

function detailsOf(error: DomainError): { details?: Json } {
  return error.details === undefined ? {} : { details: error.details as Json };
}

/**
 * Claims and runs jobs of the given kinds, at most `concurrency` at once. Wakes on NOTIFY from the enqueuing
 * transaction, and polls every `pollMs` anyway (for retries that came due and for leases that ran out).
 */
export function startJobRunner(options: RunnerOptions): JobRunner {
  const owner = `${hostname()}:${process.pid}:${newId()}`;
  const handlers = new Map(options.handlers.map((handler) => [handler.kind, handler]));
  const kinds = [...handlers.keys()];
  const running = new Set<Promise<void>>();
  const runningByOrg = new Map<string, number>();
  const worker = { stopping: false };
  let stopped = false;
  let listener: pg.Client | null = null;
  let relisten: NodeJS.Timeout | null = null;
  // A NOTIFY that arrives while the loop is claiming (not sleeping) is kept by the waker; otherwise the job it
  // announces would wait a whole poll interval (JOB_POLL_MS, 1 s by default) for the next claim.
  const { notify, sleep } = createWaker(options.pollMs);

  async function claimOne(): Promise<ClaimedJobRow | undefined> {
    const full = [...runningByOrg]
      .filter(([, count]) => count >= (options.slotsPerOrg ?? options.concurrency))
      .map(([orgId]) => orgId);
    const statement = claimJob(owner, newId(), options.leaseSeconds, kinds, full);
    const [row] = await pgExecutor(options.pool).run<ClaimedJobRow>(statement);
    return row;
  }

  /**
   * The LISTEN connection, opened again a poll interval after it is lost (a database restart): until then the loop
   * polls, and a claim right after it listens again picks up whatever was announced meanwhile.
   */
  async function listen(): Promise<void> {
    const client = new pg.Client({ connectionString: connectionStringOf(options.pool) });
    listener = client;
    const lost = (error?: unknown) => {
      if (listener !== client) return;
      listener = null;
      client.end().catch(() => undefined);
      if (stopped) return;
      options.log.warn({ err: error }, 'job notifications unavailable; polling until they are back');
      relisten = setTimeout(
        () => {
          relisten = null;
          void listen().then(notify);
        },
        Math.max(options.pollMs, 1_000),
      );
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', notify);
    await client
      .connect()
      .then(() => client.query(`LISTEN ${NOTIFY_CHANNEL}`))
      .catch(lost);
  }

  const loop = (async () => {
    await listen();
    while (!stopped) {
      try {
        if (running.size < options.concurrency) {
          const row = await claimOne();
          if (row) {
            const handler = handlers.get(row.kind)!;
            runningByOrg.set(row.org_id, (runningByOrg.get(row.org_id) ?? 0) + 1);
            const execution = new Execution(options, handler, row, worker)
              .execute()
              .catch((error: unknown) =>
                options.log.error({ err: error, jobId: row.id }, 'job runner failed to record an outcome'),
              )
              .finally(() => {
                running.delete(execution);
                const left = (runningByOrg.get(row.org_id) ?? 1) - 1;
                if (left > 0) runningByOrg.set(row.org_id, left);
                else runningByOrg.delete(row.org_id);
                notify();
              });
            running.add(execution);
            continue;
          }
        }
      } catch (error) {
        options.log.error({ err: error }, 'claiming jobs failed');
      }
      await sleep();
    }
  })();

  return {
    stop: async () => {
      stopped = true;
      worker.stopping = true;
      notify();
      await loop;
      await Promise.allSettled(running);
      if (relisten) clearTimeout(relisten);
      const client = listener;
      listener = null;
      await client?.end().catch(() => undefined);
    },
  };
}

function connectionStringOf(pool: pg.Pool): string | undefined {
  return (pool as unknown as { options: { connectionString?: string } }).options.connectionString;
}
