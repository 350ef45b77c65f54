import { readdirSync, readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Config } from '../kernel/config.ts';
import type { Logger } from '../kernel/log.ts';

/**
 * Descriptors kept free beside the pools' connections: log and artifact files, Redis, an S3 client's sockets, the
 * LISTEN connections, DNS. Measured need under load is ~20; 64 leaves room (docs/decisions/faults.md).
 */
export const SPARE_DESCRIPTORS = 64;

/** The soft limit on open files (Linux: /proc/self/limits), or null where it cannot be read. */
function descriptorLimit(): number | null {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((entry) => entry.startsWith('Max open files'));
    const soft = line?.split(/\s{2,}/)[1];
    return soft === undefined || soft === 'unlimited' ? null : Number(soft);
  } catch {
    return null;
  }
}

function openDescriptors(): number {
  try {
    return readdirSync('/proc/self/fd').length;
  } catch {
    return 0;
  }
}

/**
 * Connections the pools of this process may open: requests' and the LISTEN one. The worker's job pools live in its
 * own process (src/bin/worker-process.ts), with descriptors of its own.
 */
function poolDescriptors(config: Config): number {
  return config.DATABASE_POOL_SIZE + 1;
}

/**
 * The client connections this process may hold: MAX_CONNECTIONS when set, else what the descriptor limit leaves once
 * the descriptors already open, the pools' and SPARE_DESCRIPTORS are set aside (at least 16). Without a cap, slow
 * sockets took every descriptor and the pool could not connect (issue 26: 1,500 sockets, 1,024 descriptors, every
 * request a 500); with it, excess sockets are closed at accept and the pool keeps its descriptors.
 */
export function connectionCap(config: Config): number | null {
  if (config.MAX_CONNECTIONS > 0) return config.MAX_CONNECTIONS;
  const limit = descriptorLimit();
  if (limit === null) return null;
  return Math.max(16, limit - openDescriptors() - poolDescriptors(config) - SPARE_DESCRIPTORS);
}

/** The derived per-address cap is this share of the connection cap: one address leaves three quarters to the others. */
const ADDRESS_SHARE = 4;
/** ...and never below this, so that a browser (6 per host) or a small client pool is never refused on its own. */
const MIN_PER_ADDRESS = 16;

/**
 * The connections one client address may hold: MAX_CONNECTIONS_PER_ADDRESS when set, else a quarter of the connection
 * cap (at least 16), else none when the cap is unknown. Without it one address holding 160 idle sockets took every
 * slot of a 160 cap and every other client was refused until the headers timeout closed them (issue 48).
 */
export function addressCap(config: Config, cap: number | null): number | null {
  if (config.MAX_CONNECTIONS_PER_ADDRESS > 0) return config.MAX_CONNECTIONS_PER_ADDRESS;
  return cap === null ? null : Math.max(MIN_PER_ADDRESS, Math.floor(cap / ADDRESS_SHARE));
}

/** One key per client: an IPv4 peer reached through a dual-stack socket (`::ffff:10.0.0.1`) is that IPv4 address. */
function addressOf(socket: Socket): string {
  const address = socket.remoteAddress ?? '';
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}

/** Logs at most once per 10 s: under a flood, one line per refused socket would be a flood of its own. */
function throttledWarning(log: Logger, message: string, fields: Record<string, unknown>): () => void {
  let refused = 0;
  let reported = 0;
  return () => {
    refused += 1;
    if (Date.now() - reported < 10_000) return;
    reported = Date.now();
    log.warn({ ...fields, refused }, message);
    refused = 0;
  };
}

/**
 * Closes a new socket at once when its address already holds `perAddress` connections. Runs before the HTTP server's
 * own listener (`prependListener`), so a refused socket never gets a parser.
 */
function limitPerAddress(server: Server, perAddress: number, log: Logger): void {
  const open = new Map<string, number>();
  const warn = throttledWarning(log, 'connections refused: one client address holds its maximum', {
    maxConnectionsPerAddress: perAddress,
  });
  server.prependListener('connection', (socket: Socket) => {
    const address = addressOf(socket);
    const held = open.get(address) ?? 0;
    if (held >= perAddress) {
      socket.destroy();
      warn();
      return;
    }
    open.set(address, held + 1);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
  });
}

/**
 * Caps connections, in all and per client address, and bounds how long a client may take to send its request: a socket that has not sent its
 * headers within HEADERS_TIMEOUT_MS is answered 408 and closed (src/http/client-errors.ts writes the envelope), and
 * idle keep-alive sockets close after KEEP_ALIVE_TIMEOUT_MS. Node checks these timeouts every
 * `connectionsCheckingInterval`, set here to a quarter of the headers timeout (its default, 30 s, would let a slow
 * socket stay twice as long as intended).
 */
export function limitConnections(server: Server, config: Config, log: Logger): void {
  const cap = connectionCap(config);
  if (cap !== null) server.maxConnections = cap;
  server.headersTimeout = Math.min(config.HEADERS_TIMEOUT_MS, config.REQUEST_TIMEOUT_MS);
  server.requestTimeout = config.REQUEST_TIMEOUT_MS;
  server.keepAliveTimeout = config.KEEP_ALIVE_TIMEOUT_MS;
  (server as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = Math.max(
    250,
    Math.min(30_000, Math.floor(server.headersTimeout / 4)),
  );
  server.on(
    'drop',
    throttledWarning(log, 'connections refused: the server holds its maximum', { maxConnections: cap }),
  );
  const perAddress = addressCap(config, cap);
  if (perAddress !== null && (cap === null || perAddress < cap)) limitPerAddress(server, perAddress, log);
}
