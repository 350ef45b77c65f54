import pg from 'pg';
import type { Logger } from '../kernel/log.ts';

/** A subscriber's view of its key's notifications: `next()` resolves on the next one (or at once if one came). */
export interface ChangeSignal {
  next(): Promise<void>;
  close(): void;
  /** True once the process is shutting down (ChannelListener.drain): the subscriber should end its stream. */
  readonly draining: boolean;
}

class Subscriber implements ChangeSignal {
  private pending = false;
  private closed = false;
  private waiter: (() => void) | null = null;
  draining = false;

  constructor(private readonly onClose: (subscriber: Subscriber) => void) {}

  /** Several notifications before the subscriber looks again fold into one: it re-reads the current state anyway. */
  wake(): void {
    this.pending = true;
    this.waiter?.();
  }

  next(): Promise<void> {
    if (this.pending || this.closed) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.waiter = () => {
        this.waiter = null;
        this.pending = false;
        resolve();
      };
    });
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.waiter?.();
    this.onClose(this);
  }
}

/**
 * One LISTEN connection per process and channel, fanned out in process to the subscribers of each payload (a job
 * id): N open streams cost one PostgreSQL connection, not N. The connection opens with the first subscriber and
 * closes with the last. When it is lost it is opened again after `retryMs`; every subscriber is then woken, since
 * notifications sent while nobody listened are gone and only a fresh read can tell what changed.
 */
export class ChannelListener {
  private readonly subscribers = new Map<string, Set<Subscriber>>();
  /** Notifications seen per key (and every key's on reconnecting): a read made at a version is current until it moves. */
  private readonly versions = new Map<string, number>();
  private readonly reads = new Map<string, Map<string, { version: number; value: Promise<unknown> }>>();
  /** Moves whenever notifications may have gone uncounted: a key left without subscribers, or the connection reopened. */
  private epoch = 0;
  /** Reads `shared` has started (not the ones it handed out again): operators and tests read it. */
  loads = 0;
  private client: pg.Client | null = null;
  private listening: Promise<void> = Promise.resolve();
  private retry: NodeJS.Timeout | null = null;
  private draining = false;

  constructor(
    private readonly connectionString: string | undefined,
    private readonly channel: string,
    private readonly log: Logger,
    private readonly retryMs = 1_000,
  ) {}

  /**
   * Resolves once the connection listens (or has failed and will retry), so that a read made after it cannot miss
   * a notification sent before it.
   */
  async subscribe(key: string): Promise<ChangeSignal> {
    const subscriber = new Subscriber((gone) => this.unsubscribe(key, gone));
    subscriber.draining = this.draining;
    const set = this.subscribers.get(key) ?? new Set();
    set.add(subscriber);
    this.subscribers.set(key, set);
    this.connect();
    await this.listening;
    return subscriber;
  }

  /**
   * One read of `key`'s state (`variant` tells reads of different shapes apart, e.g. per org) for every subscriber
   * that asks before the next notification: N streams of one job cost one query per change, not N. A read started
   * after the latest notification is current; a failed one is forgotten, so the next caller tries again.
   */
  shared<T>(key: string, variant: string, load: () => Promise<T>): Promise<T> {
    const version = this.versions.get(key) ?? 0;
    const reads = this.reads.get(key) ?? new Map<string, { version: number; value: Promise<unknown> }>();
    const cached = reads.get(variant);
    if (cached?.version === version) return cached.value as Promise<T>;
    this.loads += 1;
    const value = load();
    const entry = { version, value };
    value.catch(() => {
      if (reads.get(variant) === entry) reads.delete(variant);
    });
    reads.set(variant, entry);
    if (this.subscribers.has(key)) this.reads.set(key, reads);
    return value;
  }

  /**
   * Changes whenever a notification for `key` arrives (or may have arrived unseen): equal versions mean no
   * notification for `key` in between, even across times when nobody in this process subscribed to it.
   */
  version(key: string): string {
    return `${this.epoch}.${this.versions.get(key) ?? 0}`;
  }

  /** How many subscriptions are open in this process (operators and tests read it). */
  get size(): number {
    let count = 0;
    for (const set of this.subscribers.values()) count += set.size;
    return count;
  }

  /** Shutdown: every subscriber, present and future, is told to end its stream, and woken to do it now. */
  drain(): void {
    this.draining = true;
    for (const set of this.subscribers.values()) {
      for (const subscriber of set) {
        subscriber.draining = true;
        subscriber.wake();
      }
    }
  }

  private unsubscribe(key: string, subscriber: Subscriber): void {
    const set = this.subscribers.get(key);
    set?.delete(subscriber);
    if (set?.size === 0) {
      this.epoch += 1;
      this.subscribers.delete(key);
      this.versions.delete(key);
      this.reads.delete(key);
    }
    if (this.subscribers.size === 0) this.disconnect();
  }

  private connect(): void {
    if (this.client || this.retry || this.subscribers.size === 0) return;
    const client = new pg.Client({ connectionString: this.connectionString });
    this.client = client;
    client.on('notification', (message) => {
      const key = message.payload ?? '';
      if (this.subscribers.has(key)) this.versions.set(key, (this.versions.get(key) ?? 0) + 1);
      for (const subscriber of this.subscribers.get(message.payload ?? '') ?? []) subscriber.wake();
    });
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client));
    this.listening = client
      .connect()
      .then(() => client.query(`LISTEN ${pg.escapeIdentifier(this.channel)}`))
      .then(
        () => this.wakeAll(),
        (error: unknown) => this.lost(client, error),
      );
  }

  private wakeAll(): void {
    this.epoch += 1;
    for (const key of this.subscribers.keys()) this.versions.set(key, (this.versions.get(key) ?? 0) + 1);
    for (const set of this.subscribers.values()) for (const subscriber of set) subscriber.wake();
  }

  private lost(client: pg.Client, error?: unknown): void {
    if (this.client !== client) return;
    this.client = null;
    this.epoch += 1;
    this.log.warn({ err: error, channel: this.channel }, 'notification connection lost; listening again shortly');
    client.end().catch(() => undefined);
    if (this.subscribers.size === 0) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      this.connect();
    }, this.retryMs);
    this.retry.unref();
  }

  private disconnect(): void {
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    const client = this.client;
    this.client = null;
    client?.end().catch(() => undefined);
  }
}
