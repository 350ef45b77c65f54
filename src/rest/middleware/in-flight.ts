import type { RequestHandler } from 'express';
import type { Config } from '../../config.ts';
import type { PrismaClient } from '../../db/prisma.ts';
import { DomainError } from '../../errors.ts';
import { sendDomainError } from '../errors.ts';
import { limitKeysOfResponse, resolveRequestCaller } from './caller.ts';

interface Waiter {
  grant(): void;
}

/** Counting semaphores by key, each with a bounded FIFO of waiters. */
class Slots {
  private readonly held = new Map<string, number>();
  private readonly waiting = new Map<string, Waiter[]>();

  constructor(private readonly limit: number, private readonly queue: number, private readonly waitMs: number) {}

  /** Resolves true with a slot, false when the queue is full or the wait ran out; `signal` abandons the wait. */
  acquire(key: string, signal: AbortSignal): Promise<boolean> | boolean {
    const held = this.held.get(key) ?? 0;
    if (held < this.limit) {
      this.held.set(key, held + 1);
      return true;
    }
    const queue = this.waiting.get(key) ?? [];
    if (queue.length >= this.queue || this.waitMs === 0) return false;
    this.waiting.set(key, queue);
    return new Promise<boolean>((resolve) => {
      const leave = (granted: boolean) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', abandon);
        const index = queue.indexOf(waiter);
        if (index >= 0) queue.splice(index, 1);
        if (queue.length === 0 && this.waiting.get(key) === queue) this.waiting.delete(key);
        resolve(granted);
      };
      const abandon = () => leave(false);
      // The releasing request hands its slot over: the count stays as it was.
      const waiter: Waiter = { grant: () => leave(true) };
      const timer = setTimeout(abandon, this.waitMs);
      signal.addEventListener('abort', abandon, { once: true });
      queue.push(waiter);
    });
  }

  release(key: string): void {
    const next = this.waiting.get(key)?.[0];
    if (next) return next.grant();
    const remaining = (this.held.get(key) ?? 1) - 1;
    if (remaining <= 0) this.held.delete(key);
    else this.held.set(key, remaining);
  }
}

/**
 * The in-flight limits actually applied: never more than half the pool per credential, nor all but two connections
 * per org, whatever is configured, so that one caller (or one org) can never hold the whole pool.
 */
export function effectiveInFlightLimits(config: Config): { credential: number; org: number } {
  const pool = config.DATABASE_POOL_SIZE;
  const credential = config.CONCURRENCY_LIMIT === 0 ? 0 : Math.min(config.CONCURRENCY_LIMIT, Math.max(1, Math.floor(pool / 2)));
  const org = config.ORG_CONCURRENCY_LIMIT === 0 ? 0 : Math.min(config.ORG_CONCURRENCY_LIMIT, Math.max(1, pool - 2));
  return { credential, org };
}

function refused(): DomainError {
  return new DomainError('RATE_LIMITED', 'Too many concurrent requests for this credential or organisation; retry later.', { retryAfter: 1 });
}

/**
 * At most CONCURRENCY_LIMIT requests in flight per credential and ORG_CONCURRENCY_LIMIT per org (both held below the
 * pool). A request beyond them waits up to CONCURRENCY_QUEUE_WAIT_MS in a queue of CONCURRENCY_QUEUE per key, then
 * gets 429 with Retry-After. A request that waited resolves its credential again, so the authority it runs with is
 * read after the wait (a key revoked meanwhile is refused).
 */
export function inFlightLimit(prisma: PrismaClient, config: Config): RequestHandler {
  const limits = effectiveInFlightLimits(config);
  const byCredential = new Slots(limits.credential, config.CONCURRENCY_QUEUE, config.CONCURRENCY_QUEUE_WAIT_MS);
  const byOrg = new Slots(limits.org, config.CONCURRENCY_QUEUE, config.CONCURRENCY_QUEUE_WAIT_MS);
  return async (req, res, next) => {
    const keys = limitKeysOfResponse(res);
    const gone = new AbortController();
    const onClose = () => gone.abort();
    res.on('close', onClose);
    const held: [Slots, string][] = [];
    const releaseAll = () => {
      for (const [slots, key] of held.splice(0)) slots.release(key);
    };
    res.on('close', releaseAll);
    let waited = false;
    for (const [slots, key, limit] of [[byCredential, keys.credential, limits.credential], [byOrg, keys.org, limits.org]] as const) {
      if (limit === 0 || key === null) continue;
      const attempt = slots.acquire(key, gone.signal);
      if (attempt instanceof Promise) waited = true;
      if (!(await attempt)) {
        releaseAll();
        if (!gone.signal.aborted) sendDomainError(req, res, refused());
        return;
      }
      held.push([slots, key]);
      if (gone.signal.aborted) return releaseAll();
    }
    res.off('close', onClose);
    if (!waited) return next();
    try {
      res.locals.credential = await resolveRequestCaller(prisma, config, req);
      next();
    } catch (error) {
      if (error instanceof DomainError) return sendDomainError(req, res, error);
      next(error);
    }
  };
}
