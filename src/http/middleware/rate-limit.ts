import type { RequestHandler } from 'express';
import type { Redis } from 'ioredis';
import { BurstyRateLimiter, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Config } from '../../kernel/config.ts';
import { limiterStore } from '../../kernel/rate-limit-store.ts';
import { sendError } from '../error-response.ts';
import { limitKeysOfResponse } from './caller.ts';

/**
 * Sustained RATE_LIMIT_RPS per second, with RATE_LIMIT_BURST extra requests available over ten seconds, per resolved
 * credential (or client address: src/http/middleware/caller.ts); per process, or shared through Redis (REDIS_URL).
 */
function rateLimiter(config: Config, redis: Redis | undefined): BurstyRateLimiter | RateLimiterAbstract | null {
  if (config.RATE_LIMIT_RPS === 0) return null;
  const sustained = limiterStore(redis, 'rps', config.RATE_LIMIT_RPS, 1);
  if (config.RATE_LIMIT_BURST === 0) return sustained;
  return new BurstyRateLimiter(sustained, limiterStore(redis, 'burst', config.RATE_LIMIT_BURST, 10));
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
