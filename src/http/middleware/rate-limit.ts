import type { RequestHandler } from 'express';
import type { Redis } from 'ioredis';
import {
  BurstyRateLimiter,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import type { Config } from '../../kernel/config.ts';
import { sendError } from '../error-response.ts';
import { limitKeysOfResponse } from './caller.ts';

/**
 * Sustained RATE_LIMIT_RPS per second, with RATE_LIMIT_BURST extra requests available over ten seconds, per resolved
 * credential (or client address: src/http/middleware/caller.ts); per process, or shared through Redis (REDIS_URL).
 */
function rateLimiter(config: Config, redis: Redis | undefined): BurstyRateLimiter | RateLimiterAbstract | null {
  if (config.RATE_LIMIT_RPS === 0) return null;
  // With Redis every process draws on one allowance; should Redis fail, each process falls back to its own.
  const store = (keyPrefix: string, points: number, duration: number): RateLimiterAbstract => {
    const memory = new RateLimiterMemory({ keyPrefix, points, duration });
    if (!redis) return memory;
    return new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: `wds:${keyPrefix}`,
      points,
      duration,
      insuranceLimiter: memory,
    });
  };
  const sustained = store('rps', config.RATE_LIMIT_RPS, 1);
  if (config.RATE_LIMIT_BURST === 0) return sustained;
  return new BurstyRateLimiter(sustained, store('burst', config.RATE_LIMIT_BURST, 10));
}

export function rateLimit(config: Config, redis?: Redis): RequestHandler {
  const limiter = rateLimiter(config, redis);
  return async (req, res, next) => {
    if (!limiter) return next();
    try {
      await limiter.consume(limitKeysOfResponse(res).credential);
      next();
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      sendError(req, res, {
        code: 'RATE_LIMITED',
        message: 'Too many requests for this credential; retry later.',
        retryAfter: Math.ceil(rejection.msBeforeNext / 1000),
      });
    }
  };
}
