import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, type RateLimiterAbstract } from 'rate-limiter-flexible';

/**
 * A rate-limiter-flexible store of `points` per `duration` seconds: per process, or shared by every process through
 * Redis (REDIS_URL). Should Redis fail, each process falls back to its own count rather than refusing or letting
 * everything through.
 */
export function limiterStore(
  redis: Redis | undefined,
  keyPrefix: string,
  points: number,
  duration: number,
): RateLimiterAbstract {
  const memory = new RateLimiterMemory({ keyPrefix, points, duration });
  if (!redis) return memory;
  return new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: `wds:${keyPrefix}`,
    points,
    duration,
    insuranceLimiter: memory,
  });
}
