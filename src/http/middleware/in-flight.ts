import type { RequestHandler } from 'express';
import type { Config } from '../../kernel/config.ts';
import type { PrismaClient } from '../../db/prisma.ts';
import { DomainError } from '../../kernel/errors.ts';
import type { Logger } from '../../kernel/log.ts';
import { sendDomainError } from '../error-response.ts';
import { limitKeysOfResponse, resolveRequestCaller } from './caller.ts';
import { MemorySlotStore, type SlotStore } from './slot-stores.ts';

/** How often a queued request looks again when slots are shared with other processes (their releases are not seen). */
const SHARED_POLL_MS = 50;

interface Held {
  key: string;
  token: string;
  store: SlotStore;
}

/**
 * Slots of one limit (per credential or per org) with a bounded FIFO of local waiters per key. A local release
 * wakes the first waiter; with a shared store waiters also look again every SHARED_POLL_MS. If the shared store
 * fails, the process counts in memory instead (per process) rather than refusing or admitting everything.
 */
class Slots {
  private readonly waiting = new Map<string, (() => void)[]>();
  private readonly fallback = new MemorySlotStore();

  constructor(
    private readonly store: SlotStore,
    private readonly limit: number,
    private readonly queue: number,
    private readonly waitMs: number,
    private readonly log: Logger,
  ) {}

  private async take(key: string): Promise<Held | null> {
    try {
      const token = await this.store.take(key, this.limit);
      return token === null ? null : { key, token, store: this.store };
    } catch (error) {
      this.log.warn({ err: error }, 'shared in-flight limits unavailable; counting in this process');
      const token = this.fallback.take(key, this.limit);
      return token === null ? null : { key, token, store: this.fallback };
    }
  }

  /** A slot, or null when the queue is full, the wait ran out or `signal` abandoned it. */
  async acquire(key: string, signal: AbortSignal): Promise<{ held: Held | null; waited: boolean }> {
    const queue = this.waiting.get(key) ?? [];
    if (queue.length === 0) {
      const held = await this.take(key);
      if (held) return { held, waited: false };
    }
    if (queue.length >= this.queue || this.waitMs === 0) return { held: null, waited: false };
    this.waiting.set(key, queue);
    const deadline = Date.now() + this.waitMs;
    let wake = () => {};
    queue.push(() => wake());
    const me = queue[queue.length - 1]!;
    try {
      while (!signal.aborted && Date.now() < deadline) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(
            done,
            Math.min(deadline - Date.now(), this.store.shared ? SHARED_POLL_MS : this.waitMs),
          );
          function done() {
            clearTimeout(timer);
            signal.removeEventListener('abort', done);
            resolve();
          }
          wake = done;
          signal.addEventListener('abort', done, { once: true });
        });
        if (signal.aborted || queue[0] !== me) continue;
        const held = await this.take(key);
        if (held) return { held, waited: true };
      }
      return { held: null, waited: true };
    } finally {
      queue.splice(queue.indexOf(me), 1);
      if (queue.length === 0) this.waiting.delete(key);
      else queue[0]!();
    }
  }

  async release(held: Held): Promise<void> {
    try {
      await held.store.give(held.key, held.token);
    } catch (error) {
      this.log.warn({ err: error }, 'freeing a shared in-flight slot failed; its lease will free it');
    }
    this.waiting.get(held.key)?.[0]?.();
  }
}

/**
 * The in-flight limits actually applied: never more than half the pool per credential, nor all but two connections
 * per org, whatever is configured, so that one caller (or one org) can never hold the whole pool.
 */
export function effectiveInFlightLimits(config: Config): { credential: number; org: number } {
  const pool = config.DATABASE_POOL_SIZE;
  const credential =
    config.CONCURRENCY_LIMIT === 0 ? 0 : Math.min(config.CONCURRENCY_LIMIT, Math.max(1, Math.floor(pool / 2)));
  const org = config.ORG_CONCURRENCY_LIMIT === 0 ? 0 : Math.min(config.ORG_CONCURRENCY_LIMIT, Math.max(1, pool - 2));
  return { credential, org };
}

function refused(): DomainError {
  return new DomainError(
    'RATE_LIMITED',
    'Too many concurrent requests for this credential or organisation; retry later.',
    { retryAfter: 1 },
  );
}

/**
 * At most CONCURRENCY_LIMIT requests in flight per credential and ORG_CONCURRENCY_LIMIT per org (both held below the
 * pool). A request beyond them waits up to CONCURRENCY_QUEUE_WAIT_MS in a queue of CONCURRENCY_QUEUE per key, then
 * gets 429 with Retry-After. A request that waited resolves its credential again, so the authority it runs with is
 * read after the wait (a key revoked meanwhile is refused). `store` shares the counts between processes.
 */
export function inFlightLimit(
  prisma: PrismaClient,
  config: Config,
  log: Logger,
  store: SlotStore = new MemorySlotStore(),
): RequestHandler {
  const limits = effectiveInFlightLimits(config);
  const { CONCURRENCY_QUEUE: queue, CONCURRENCY_QUEUE_WAIT_MS: waitMs } = config;
  const byCredential = new Slots(store, limits.credential, queue, waitMs, log);
  const byOrg = new Slots(store, limits.org, queue, waitMs, log);
  return async (req, res, next) => {
    const keys = limitKeysOfResponse(res);
    const gone = new AbortController();
    let acquiring = false;
    const held: [Slots, Held][] = [];
    const releaseAll = () => {
      for (const [slots, slot] of held.splice(0)) void slots.release(slot);
    };
    res.on('close', () => {
      // Only a request still waiting for a slot has anything to abort: abort() builds a DOMException with its
      // stack, 0.4 % of a REST page's CPU when every response did it (issue 30 profile).
      if (acquiring) gone.abort();
      releaseAll();
    });
    // An event stream gives its slots back once it has started: it waits on notifications, not on the pool.
    res.locals.releaseInFlight = releaseAll;
    // A client that left while its credential was being read: 'close' has fired already and does not fire again
    // for the listener above, so a slot taken now would never be given back. Each such request leaked one; a few
    // autocannon rounds (which end with requests in flight) filled the org's slots and every later request waited
    // and got 429 (the benchmark rounds that answered nothing, docs/decisions/capacity.md).
    if (res.closed) return;
    let waited = false;
    for (const [slots, key, limit] of [
      [byCredential, `cred:${keys.credential}`, limits.credential],
      [byOrg, keys.org, limits.org],
    ] as const) {
      if (limit === 0 || key === null) continue;
      acquiring = true;
      const attempt = await slots.acquire(key, gone.signal).finally(() => {
        acquiring = false;
      });
      waited ||= attempt.waited;
      if (attempt.held) held.push([slots, attempt.held]);
      if (gone.signal.aborted) return releaseAll();
      if (!attempt.held) {
        releaseAll();
        return sendDomainError(req, res, refused());
      }
    }
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
