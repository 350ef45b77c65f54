import { createHash } from 'node:crypto';
import type { Request, RequestHandler } from 'express';
import { BurstyRateLimiter, RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import type { Config } from '../../config.ts';
import { sendError } from '../errors.ts';

/**
 * The credential a request presents, hashed (no database lookup on the hot path), or its peer address when it
 * presents none. Limits are per process: N workers allow N times the configured rate (docs/decisions.md).
 */
function limitKey(req: Request): string {
  const authorization = req.headers.authorization;
  if (authorization) return `cred:${createHash('sha256').update(authorization).digest('base64url').slice(0, 22)}`;
  return `ip:${req.socket.remoteAddress ?? 'unknown'}`;
}

/** Sustained RATE_LIMIT_RPS per second, with RATE_LIMIT_BURST extra requests available over ten seconds. */
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
      await limiter.consume(limitKey(req));
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

/** At most CONCURRENCY_LIMIT requests in flight per credential; the slot frees when the response closes. */
export function concurrencyLimit(config: Config): RequestHandler {
  const inFlight = new Map<string, number>();
  return (req, res, next) => {
    if (config.CONCURRENCY_LIMIT === 0) return next();
    const key = limitKey(req);
    const current = inFlight.get(key) ?? 0;
    if (current >= config.CONCURRENCY_LIMIT) {
      sendError(req, res, { code: 'RATE_LIMITED', message: 'Too many concurrent requests for this credential.', retryAfter: 1 });
      return;
    }
    inFlight.set(key, current + 1);
    res.on('close', () => {
      const remaining = (inFlight.get(key) ?? 1) - 1;
      if (remaining === 0) inFlight.delete(key);
      else inFlight.set(key, remaining);
    });
    next();
  };
}
