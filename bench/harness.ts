import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { profileDir, profileSince, topSelfTime } from './profile.ts';

/** What every benchmark shares: the servers process, the API helper and how figures are summarised. */
export interface Figures {
  name: string;
  requests: number;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

export interface Servers {
  servicePort: number;
  barePort: number;
  /** A bare node:http server answering registered statements with PostgreSQL's text (bench/servers.ts). */
  floorPort: number;
  apiKey: string;
  orgId: string;
  userId: string;
  databaseUrl: string;
  /** The servers process (the API), for memory readings. */
  pid: number;
  /** Stops the servers; with BENCH_PROFILE=1, waits for their CPU profile and prints its top self-time functions. */
  stop(): Promise<void>;
}

/**
 * bench/servers.ts in its own process (node directly, so SIGTERM reaches it), so the load generator does not share
 * the service's event loop. It prints one JSON line when ready.
 */
export async function startServers(): Promise<Servers> {
  // NODE_ENV=production as `npm start` runs it: graphql-js, for one, checks every instanceof twice otherwise.
  const env = { ...process.env, NODE_ENV: process.env.NODE_ENV ?? 'production' };
  const started = Date.now();
  const profile = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  const child = spawn(process.execPath, [...profile, '--import', 'tsx', 'bench/servers.ts'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env,
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`bench servers exited (${code})`)));
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    child.kill('SIGTERM');
    await exited;
    const file = profileDir && profileSince(profileDir, started);
    if (file) process.stdout.write(`\n${topSelfTime(file)}\n`);
  };
  return { ...JSON.parse(line), pid: child.pid!, stop };
}

/** Registers a statement that yields one `body` text with the floor server; answers the URL that runs it. */
export async function registerFloor(
  servers: Servers,
  name: string,
  statement: { sql: string; params: unknown[] },
): Promise<string> {
  const url = `http://127.0.0.1:${servers.floorPort}/statements/${name}`;
  const response = await fetch(url, { method: 'POST', body: JSON.stringify(statement) });
  if (response.status !== 204) throw new Error(`floor server refused the statement (${response.status})`);
  return url;
}

/** A REST call as the bench org's admin, with a fresh Idempotency-Key. */
export async function api(servers: Servers, method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(`http://127.0.0.1:${servers.servicePort}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${servers.apiKey}`,
      'content-type': 'application/json',
      'idempotency-key': randomUUID(),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
  return response.json();
}

export function percentile(sorted: number[], q: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

export function figures(name: string, latencies: number[], seconds: number, errors: number): Figures {
  const sorted = [...latencies].sort((a, b) => a - b);
  return {
    name,
    requests: latencies.length,
    rps: latencies.length / seconds,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    errors,
  };
}

export const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/**
 * The one line every benchmark ends a measured row with, so `npm run bench | grep '^ratio'` gives the table:
 * `ratio | <row> | <what over what> | median of N: <x> | rounds <r1> <r2> … | target ≥ <t>`.
 */
export function ratioLine(row: string, quotient: string, ratios: number[], target: number): string {
  const format = (value: number) => (value >= 0.1 ? value.toFixed(2) : value.toPrecision(2));
  const verdict = median(ratios) >= target ? 'met' : 'not met';
  return (
    `ratio | ${row} | ${quotient} | median of ${ratios.length}: ${format(median(ratios))} | rounds ${ratios.map(format).join(' ')}` +
    ` | target ≥ ${target} ${verdict}`
  );
}
