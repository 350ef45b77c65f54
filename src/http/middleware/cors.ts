import cors from 'cors';
import type { RequestHandler } from 'express';

/**
 * Response headers a browser script may read on an actual (non-preflight) answer. `Access-Control-Expose-Headers`
 * belongs on every response, not only on the preflight: without it `response.headers.get('X-Request-Id')` is null.
 * Every header this API sets that a client acts on: tracing, back-off, the auth challenge, downloads (file name and
 * RFC 9530 digest), where an accepted job lives, and the methods a 405 allows.
 */
export const EXPOSED_HEADERS = [
  'X-Request-Id',
  'Retry-After',
  'WWW-Authenticate',
  'Content-Disposition',
  'Content-Digest',
  'Location',
  'Allow',
] as const;

/**
 * CORS for `/v1` and `/graphql` (the `cors` package): off unless the origin is in CORS_ORIGINS (exact
 * `scheme://host[:port]` strings). graphql-yoga's default answered every origin with credentials allowed, which let any
 * page read what a signed-in browser session can read (issue 19 §3); its own CORS handling is disabled (yoga.ts) and
 * this is the only one. An origin not on the list gets no CORS headers at all, so the browser refuses the request.
 */
export function corsAllowList(origins: readonly string[]): RequestHandler {
  const allowed = new Set(origins);
  const handler = cors({
    origin: (origin, callback) => callback(null, origin !== undefined && allowed.has(origin)),
    credentials: true,
    methods: ['GET', 'POST', 'PATCH', 'PUT', 'DELETE'],
    allowedHeaders: ['Authorization', 'Content-Type', 'Idempotency-Key', 'X-CSRF-Token', 'X-Request-Id'],
    exposedHeaders: [...EXPOSED_HEADERS],
    maxAge: 600,
    optionsSuccessStatus: 204,
  });
  return (req, res, next) => {
    // Every answer depends on Origin, listed or not: a shared cache must not hand one origin's answer to another.
    res.vary('Origin');
    const origin = req.get('origin');
    // A preflight from an origin not on the list: an empty 204, which the browser reads as a refusal.
    if (req.method === 'OPTIONS' && origin !== undefined && !allowed.has(origin)) return void res.status(204).end();
    handler(req, res, next);
  };
}
