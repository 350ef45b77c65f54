import type { RequestHandler } from 'express';
import { BurstyRateLimiter, RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import type { Config } from '../../config.ts';
import { sendError } from '../errors.ts';
import { limitKeysOfResponse } from './caller.ts';

/**
 * Sustained RATE_LIMIT_RPS per second, with RATE_LIMIT_BURST extra requests available over ten seconds, per resolved
 * credential (or client address: src/rest/middleware/caller.ts). Limits are per process (docs/decisions.md).
 */
function rateLimiter(config: Config): BurstyRateLimiter | RateLimiterMemory | null {
  if (config.RATE_LIMIT_RPS === 0) return null;
  const sustained = new RateLimiterMemory({ keyPrefix: 'rps', points: config.RATE_LIMIT_RPS, duration: 1 });
  if (config.RATE_LIMIT_BURST === 0) return sustained;
  return new BurstyRateLimiter(sustained, new RateLimiterMemory({ keyPrefix: 'burst', points: config.RATE_LIMIT_BURST, duration: 10 }));
}

export function rateLimit(config: Config): RequestHandler {
  const limiter = rateLimiter(config);
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
