import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { Config } from '../kernel/config.ts';
import { guardPool } from '../db/availability.ts';
import { SESSION_OPTIONS, sqlPoolOf, type PrismaClient } from '../db/prisma.ts';
import type { Logger } from '../kernel/log.ts';
import { sweepExpiredArtifacts } from './engine/artifact-sweep.ts';
import { sweepEmailVerifications } from './engine/email-verification-sweep.ts';
import { sweepIdempotencyRecords } from './engine/idempotency-sweep.ts';
import { pruneChangeFeed } from './kinds/changes/pruneChanges.ts';
import { pgExecutor } from '../db/sql.ts';
import { startJobRunner } from './engine/runner.ts';
import { startBackupScheduler } from './kinds/backups/scheduler.ts';
import { JOB_HANDLERS } from './kinds/registry.ts';
import { startWebhookDeliverer } from './webhooks/deliverer.ts';

export interface Worker {
  stop(): Promise<void>;
}

const SWEEP_INTERVAL_MS = 10 * 60_000;

function startSweeper(prisma: PrismaClient, config: Config, log: Logger): Worker {
  const abort = new AbortController();
  const loop = (async () => {
    while (!abort.signal.aborted) {
      try {
        const removed = await sweepIdempotencyRecords(prisma);
        if (removed > 0) log.info({ removed }, 'expired idempotency records removed');
        const freed = await sweepExpiredArtifacts(prisma);
        if (freed > 0) log.info({ freed }, 'expired job artifacts freed');
        const pruned = await sweepEmailVerifications(prisma);
        if (pruned > 0) log.info({ removed: pruned }, 'spent or expired email verification tokens removed');
        const commits = await pruneChangeFeed(pgExecutor(sqlPoolOf(prisma)), config.CHANGE_RETENTION_DAYS);
        if (commits > 0) log.info({ commits }, 'change feed commits past retention removed');
      } catch (error) {
        log.error({ err: error }, 'catalog sweep failed');
      }
      await sleep(SWEEP_INTERVAL_MS, undefined, { signal: abort.signal }).catch(() => undefined);
    }
  })();
  return {
    stop: async () => {
      abort.abort();
      await loop;
    },
  };
}

/**
 * Job steps get their own pool, whose connections carry the job budget (JOB_QUERY_TIMEOUT_MS) instead of the
 * request budget, and which requests cannot exhaust (nor jobs the requests' pool). Three connections per running job
 * (a step's transaction, plus reads beside it such as an import's upload) and one for claiming.
 */
function jobPool(prisma: PrismaClient, config: Config): pg.Pool {
  const { connectionString } = (sqlPoolOf(prisma) as unknown as { options: { connectionString?: string } }).options;
  const budget = config.JOB_QUERY_TIMEOUT_MS;
  return new pg.Pool({
    connectionString,
    ...SESSION_OPTIONS,
    max: config.JOB_CONCURRENCY * 3 + 1,
    ...(budget > 0 ? { statement_timeout: budget } : {}),
  });
}

/** JOB_SLOTS_PER_ORG, or when 0 every slot but one (at least one): a single-tenant install can set JOB_CONCURRENCY. */
export function slotsPerOrg(config: Config): number {
  const slots = config.JOB_SLOTS_PER_ORG || config.JOB_CONCURRENCY - 1;
  return Math.min(Math.max(slots, 1), config.JOB_CONCURRENCY);
}

function connectionStringOf(pool: pg.Pool): string | undefined {
  return (pool as unknown as { options: { connectionString?: string } }).options.connectionString;
}

/**
 * The background worker of every process that runs it (`npm start` or `npm run worker`): the durable job runner
 * the catalog sweeper and the backup scheduler. Any number may run at once; jobs are claimed with SKIP LOCKED.
 */
export function startWorker(prisma: PrismaClient, config: Config, log: Logger): Worker {
  const sweeper = startSweeper(prisma, config, log);
  const pool = jobPool(prisma, config);
  guardPool(pool, log, 'jobs');
  const runner = startJobRunner({
    pool,
    prisma,
    config,
    log,
    handlers: JOB_HANDLERS,
    concurrency: config.JOB_CONCURRENCY,
    slotsPerOrg: slotsPerOrg(config),
    leaseSeconds: config.JOB_LEASE_SECONDS,
    pollMs: config.JOB_POLL_MS,
  });
  const scheduler = startBackupScheduler(pool, config, log);
  // Webhook deliveries hold a connection each for the length of an HTTP call (its advisory lock): a pool of their own.
  const webhookPool = new pg.Pool({
    connectionString: connectionStringOf(pool),
    ...SESSION_OPTIONS,
    max: config.WEBHOOK_CONCURRENCY * 2 + 2,
  });
  webhookPool.on('error', (error) => log.warn({ err: error }, 'idle webhook connection failed'));
  const deliverer = startWebhookDeliverer({ pool: webhookPool, config, log });
  // A second stop (SIGINT after SIGTERM, a shutdown racing a test's cleanup) waits for the first: ending a pool twice
  // throws.
  let stopping: Promise<void> | undefined;
  return {
    stop: () =>
      (stopping ??= (async () => {
        await Promise.all([sweeper.stop(), runner.stop(), scheduler.stop(), deliverer.stop()]);
        await Promise.all([pool.end(), webhookPool.end()]);
      })()),
  };
}
