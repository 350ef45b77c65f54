import { setTimeout as sleep } from 'node:timers/promises';
import type { PrismaClient } from '../db/prisma.ts';
import type { Logger } from '../log.ts';
import { sweepIdempotencyRecords } from './idempotency-sweep.ts';

export interface Worker {
  stop(): Promise<void>;
}

const SWEEP_INTERVAL_MS = 10 * 60_000;

/**
 * The background worker of every process that runs it (`npm start` or `npm run worker`). Today it keeps the
 * catalog tidy; the durable job queue (imports, schema changes) plugs in here. Any number may run at once.
 */
export function startWorker(prisma: PrismaClient, log: Logger): Worker {
  const abort = new AbortController();
  const loop = (async () => {
    while (!abort.signal.aborted) {
      try {
        const removed = await sweepIdempotencyRecords(prisma);
        if (removed > 0) log.info({ removed }, 'expired idempotency records removed');
      } catch (error) {
        log.error({ err: error }, 'idempotency sweep failed');
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
