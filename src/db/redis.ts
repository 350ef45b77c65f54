import { Redis } from 'ioredis';
import type { Logger } from '../kernel/log.ts';

/**
 * The Redis connection that shares rate and in-flight limits between processes (REDIS_URL). Commands fail at once
 * while it is down (no offline queue, one retry), so the limiters fall back to per-process counting instead of
 * holding requests.
 */
export function connectRedis(url: string, log: Logger): Redis {
  const redis = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2_000 });
  let reported = false;
  redis.on('error', (error) => {
    if (!reported) log.warn({ err: error }, 'Redis unavailable; limits count per process until it is back');
    reported = true;
  });
  redis.on('ready', () => {
    reported = false;
  });
  return redis;
}
