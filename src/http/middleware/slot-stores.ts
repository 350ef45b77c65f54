import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';

/**
 * Where in-flight slots are counted. In memory they are per process; in Redis (REDIS_URL) every process of the
 * service counts against the same limit (DESIGN §5).
 */
export interface SlotStore {
  /** Takes a slot of `key` if fewer than `limit` are taken; returns the slot's token, or null. */
  take(key: string, limit: number): Promise<string | null> | string | null;
  give(key: string, token: string): Promise<void> | void;
  /** Whether slots can be freed by other processes (then waiters must look again now and then). */
  readonly shared: boolean;
}

export class MemorySlotStore implements SlotStore {
  readonly shared = false;
  private readonly held = new Map<string, number>();

  take(key: string, limit: number): string | null {
    const held = this.held.get(key) ?? 0;
    if (held >= limit) return null;
    this.held.set(key, held + 1);
    return key;
  }

  give(key: string): void {
    const remaining = (this.held.get(key) ?? 1) - 1;
    if (remaining <= 0) this.held.delete(key);
    else this.held.set(key, remaining);
  }
}

// A sorted set per key: one member per slot, scored by when its lease ends, so that the slots of a process that
// died free themselves. Atomic in one script: drop ended leases, count, take.
const TAKE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1`;

export class RedisSlotStore implements SlotStore {
  readonly shared = true;

  /** `leaseMs`: how long a slot outlives a process that took it and never gave it back. */
  constructor(
    private readonly redis: Redis,
    private readonly leaseMs: number,
    private readonly prefix = 'wds:inflight:',
  ) {}

  async take(key: string, limit: number): Promise<string | null> {
    const token = randomUUID();
    const now = Date.now();
    const taken = await this.redis.eval(
      TAKE,
      1,
      this.prefix + key,
      now,
      limit,
      now + this.leaseMs,
      token,
      this.leaseMs,
    );
    return taken === 1 ? token : null;
  }

  async give(key: string, token: string): Promise<void> {
    await this.redis.zrem(this.prefix + key, token);
  }
}
