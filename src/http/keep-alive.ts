import type { Server } from 'node:http';

/**
 * How long an idle kept-alive connection stays open: longer than any client or proxy keeps one idle after our hint
 * (load balancers commonly idle out at 60 s), so the server is never the side that closes a connection a client
 * may be reusing. Node's default (5 s) equals what it advertises: a client honouring `Keep-Alive: timeout=5` keeps
 * the socket for 3-4 s (undici: the hint less 1-2 s), and any stall of that margin (a busy event loop, GC, a
 * loaded machine) let the server's idle timer fire on a request already sent, which the client saw as ECONNRESET.
 */
export const KEEP_ALIVE_IDLE_MS = 65_000;
/** What clients are told (seconds): far below KEEP_ALIVE_IDLE_MS, so a late client still finds the socket open. */
export const KEEP_ALIVE_HINT_S = 5;

export interface KeptAlive {
  /** Shutdown: every answer from now on carries `Connection: close`, and idle connections close now. */
  drain(): void;
}

export function keepConnectionsAlive(server: Server): KeptAlive {
  server.keepAliveTimeout = KEEP_ALIVE_IDLE_MS;
  // Node's advice: headersTimeout above keepAliveTimeout, so a connection reused at the end of its idle time is
  // not cut by the headers timer either.
  server.headersTimeout = KEEP_ALIVE_IDLE_MS + 1_000;
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
