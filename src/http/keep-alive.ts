import type { Server } from 'node:http';

/**
 * How long an idle kept-alive connection stays open: longer than any client or proxy keeps one idle after our hint
 * (load balancers commonly idle out at 60 s), so the server is never the side that closes a connection a client
 * may be reusing. Node's default (5 s) equals what it advertises: a client honouring `Keep-Alive: timeout=5` keeps
 * the socket for 3-4 s (undici: the hint less 1-2 s), and any stall of that margin (a busy event loop, GC, a
 * loaded machine) let the server's idle timer fire on a request already sent, which the client saw as ECONNRESET.
 */
export const KEEP_ALIVE_IDLE_MS = 65_000;
/** What clients are told (seconds): far below the idle time, so a late client still finds the socket open. */
export const KEEP_ALIVE_HINT_S = 5;

export interface KeptAlive {
  /** Shutdown: every answer from now on carries `Connection: close`, and idle connections close now. */
  drain(): void;
}

/**
 * `idleMs` is KEEP_ALIVE_TIMEOUT_MS (default KEEP_ALIVE_IDLE_MS). The headers timeout stays HEADERS_TIMEOUT_MS
 * (src/http/connection-limits.ts): Node starts that timer at a request's first byte, not while a socket idles, so a
 * short one bounds slow senders without cutting a kept-alive connection that a client reuses late.
 */
export function keepConnectionsAlive(server: Server, idleMs = KEEP_ALIVE_IDLE_MS): KeptAlive {
  server.keepAliveTimeout = idleMs;
  let draining = false;
  server.prependListener('request', (_req, res) => {
    if (draining) res.setHeader('Connection', 'close');
    else if (res.shouldKeepAlive) res.setHeader('Keep-Alive', `timeout=${KEEP_ALIVE_HINT_S}`);
  });
  return {
    drain: () => {
      draining = true;
      server.closeIdleConnections();
    },
  };
}
