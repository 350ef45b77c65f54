import type { RequestHandler } from 'express';

/**
 * CORS for `/v1` and `/graphql`: off unless the origin is in CORS_ORIGINS (exact `scheme://host[:port]` strings).
 * graphql-yoga's default answered every origin with credentials allowed, which let any page read what a signed-in
 * browser session can read (issue 19 §3); its own CORS handling is disabled (yoga.ts) and this is the only one.
 */
export function corsAllowList(origins: readonly string[]): RequestHandler {
  const allowed = new Set(origins);
  return (req, res, next) => {
    const origin = req.get('origin');
    res.vary('Origin');
    if (origin === undefined || !allowed.has(origin)) {
      // A preflight from an origin not on the list gets no CORS headers: the browser then refuses the request.
      if (req.method === 'OPTIONS' && origin !== undefined) return void res.status(204).end();
      return next();
    }
    res.set({ 'Access-Control-Allow-Origin': origin, 'Access-Control-Allow-Credentials': 'true' });
    if (req.method !== 'OPTIONS') return next();
    res.set({
      'Access-Control-Allow-Methods': 'GET, POST, PATCH, PUT, DELETE',
      'Access-Control-Allow-Headers': 'Authorization, Content-Type, Idempotency-Key, X-CSRF-Token, X-Request-Id',
      'Access-Control-Expose-Headers': 'X-Request-Id, Retry-After, WWW-Authenticate',
      'Access-Control-Max-Age': '600',
    });
    res.status(204).end();
  };
}
