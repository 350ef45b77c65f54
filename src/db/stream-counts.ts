import type { Redis } from 'ioredis';
import type { SharedStreamCounts, StreamKey, StreamLimits } from '../kernel/stream-limits.ts';

// Two sorted sets, the credential's and the org's: one member per open stream, scored by when its lease ends.
// Atomic in one script: drop ended leases from both, refuse if either is full, else count the stream in both.
const TAKE = `
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 1 end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then return 2 end
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return 0`;

/**
 * Open event streams counted in Redis, so that the per-credential and per-org caps hold across every API process
 * (docs/decisions/faults.md). A stream's lease lasts `leaseMs` and is renewed while the stream is open; a process that
 * dies without closing its streams frees their slots when their leases end.
 */
export class RedisStreamCounts implements SharedStreamCounts {
  constructor(
    private readonly redis: Redis,
    private readonly leaseMs: number,
    private readonly prefix = 'wds:streams:',
  ) {}

  async take(stream: StreamKey, limits: StreamLimits): Promise<'credential' | 'org' | null> {
    const now = Date.now();
    const [credentialKey, orgKey] = this.keys(stream);
    const full = await this.redis.eval(
      TAKE,
      2,
      credentialKey,
      orgKey,
      now,
      limits.perCredential,
      limits.perOrg,
      now + this.leaseMs,
      stream.token,
      this.leaseMs,
    );
    return full === 1 ? 'credential' : full === 2 ? 'org' : null;
  }

  /** Moves the leases' ends forward; a lease that ended while Redis was unreachable is counted again. */
  async renew(streams: readonly StreamKey[]): Promise<void> {
    const ends = Date.now() + this.leaseMs;
    const batch = this.redis.multi();
    for (const stream of streams) {
      for (const key of this.keys(stream)) batch.zadd(key, ends, stream.token).pexpire(key, this.leaseMs);
    }
    await batch.exec();
  }

  async give(stream: StreamKey): Promise<void> {
    const [credentialKey, orgKey] = this.keys(stream);
    await this.redis.multi().zrem(credentialKey, stream.token).zrem(orgKey, stream.token).exec();
  }

  private keys(stream: StreamKey): [string, string] {
    return [`${this.prefix}credential:${stream.credential}`, `${this.prefix}org:${stream.org}`];
  }
}
