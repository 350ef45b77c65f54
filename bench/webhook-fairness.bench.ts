import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as pause } from 'node:timers/promises';
import { createPrisma } from '../src/db/prisma.ts';
import { bootstrapOrg } from '../src/identity/provision.ts';
import { createBenchTable, VALUES, type BenchTable } from './changes-table.ts';
import { api, percentile, spawnChild, startServers, type Servers } from './harness.ts';
import { webhookBenchEnv } from './webhook-rows.ts';

/**
 * Issue 48, "webhook slots are not fair between orgs": org B's delivery lag (the change's `committedAt` → receipt by
 * B's receiver), p50 and p99, while org A has 16 slow endpoints, each with a backlog: BENCH_SLOW_ANSWERING of them
 * (default 8) answer 204 after BENCH_SLOW_MS (default 5,000 ms), the others never answer (their attempts time out
 * after WEBHOOK_TIMEOUT_MS, 10 s, and are retried on the default schedule). A writes a row every 250 ms; after 5 s B
 * writes one every 500 ms for BENCH_FAIR_SECONDS (default 30 s), and B's messages are awaited up to 60 s longer (one
 * still missing then is counted as never received).
 * Sides, each a worker process (`node dist/worker.js`) on the same database beside this checkout's built API:
 * "alone" (this checkout's worker, B without A's endpoints: the floor), "after" (this checkout's worker), and with
 * BENCH_BEFORE=<directory of a built checkout> "before" (that checkout's worker). Every side gets fresh databases and
 * endpoints for both orgs. BENCH_ROUNDS (default 1) repeats before/after in alternating order.
 */
const SLOW_ENDPOINTS = 16;
const SLOW_ANSWERING = Number(process.env.BENCH_SLOW_ANSWERING ?? 8);
const SLOW_MS = Number(process.env.BENCH_SLOW_MS ?? 5_000);
const MEASURE_SECONDS = Number(process.env.BENCH_FAIR_SECONDS ?? 30);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);
const A_EVERY_MS = 250;
const B_EVERY_MS = 500;
const WARMUP_MS = 5_000;
const DRAIN_MS = 60_000;

/** A receiver on loopback: answers after `answerMs` (null: never, until closed), and records B's receipts. */
interface Receiver {
  url: string;
  lags: number[];
  close(): Promise<void>;
}

async function startReceiver(answerMs: number | null): Promise<Receiver> {
  const lags: number[] = [];
  const held = new Set<ServerResponse>();
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const at = Date.now();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        type: string;
        data: { committedAt?: string };
      };
      if (body.type === 'row.created' && body.data.committedAt) lags.push(at - Date.parse(body.data.committedAt));
      if (answerMs === null) {
        held.add(response);
        return;
      }
      setTimeout(() => response.writeHead(204).end(), answerMs);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    lags,
    close: async () => {
      for (const response of held) response.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

async function startWorker(directory: string, databaseUrl: string): Promise<ChildProcess> {
  const child = spawnChild(process.execPath, ['dist/worker.js'], {
    cwd: directory,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...webhookBenchEnv, NODE_ENV: 'production', DATABASE_URL: databaseUrl, LOG_LEVEL: 'info' },
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  const deadline = Date.now() + 60_000;
  while (!output.includes('worker started')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the worker of ${directory} did not start`);
    await pause(100);
  }
  return child;
}

type Org = Pick<Servers, 'servicePort' | 'apiKey' | 'orgId'>;

interface Hook {
  org: Org;
  id: string;
  version: string;
}

async function webhook(org: Org, url: string, databaseId: string): Promise<Hook> {
  const created = await api(org as Servers, 'POST', `/v1/orgs/${org.orgId}/webhooks`, {
    url,
    events: ['row.created'],
    databaseId,
  });
  return { org, id: created.id, version: created.version };
}

const createRow = (org: Org, table: BenchTable) =>
  api(org as Servers, 'POST', `${table.path}/rows`, { expectedSchemaVersion: table.schemaVersion, values: VALUES });

/** Writes a row every `everyMs` until `stop` settles; answers how many it wrote. */
async function writeEvery(org: Org, table: BenchTable, everyMs: number, stop: Promise<unknown>): Promise<number> {
  let stopped = false;
  void stop.then(() => {
    stopped = true;
  });
  let written = 0;
  const started = performance.now();
  while (!stopped) {
    await createRow(org, table);
    written += 1;
    const wait = started + written * everyMs - performance.now();
    if (wait > 0) await Promise.race([pause(wait), stop]);
  }
  return written;
}

async function side(name: string, directory: string, servers: Servers, orgB: Org, slowOrg: boolean): Promise<string> {
  const orgA: Org = servers;
  const tableA = await createBenchTable(servers);
  const tableB = await createBenchTable({ ...servers, ...orgB });
  const slow = slowOrg
    ? await Promise.all(
        Array.from({ length: SLOW_ENDPOINTS }, (_, index) => startReceiver(index < SLOW_ANSWERING ? SLOW_MS : null)),
      )
    : [];
  const fast = await startReceiver(0);
  const hooks: Hook[] = [];
  for (const receiver of slow) hooks.push(await webhook(orgA, receiver.url, tableA.databaseId));
  hooks.push(await webhook(orgB, fast.url, tableB.databaseId));
  const worker = await startWorker(directory, servers.databaseUrl);
  try {
    let stopA!: () => void;
    const aStopped = new Promise<void>((resolve) => {
      stopA = resolve;
    });
    const writingA = slowOrg ? writeEvery(orgA, tableA, A_EVERY_MS, aStopped) : Promise.resolve(0);
    await pause(WARMUP_MS);
    const written = await writeEvery(orgB, tableB, B_EVERY_MS, pause(MEASURE_SECONDS * 1000));
    const deadline = Date.now() + DRAIN_MS;
    while (fast.lags.length < written && Date.now() < deadline) await pause(100);
    stopA();
    await writingA;
    const lags = [...fast.lags, ...Array.from({ length: written - fast.lags.length }, () => Infinity)].sort(
      (a, b) => a - b,
    );
    const show = (value: number) => (Number.isFinite(value) ? `${value} ms` : `> ${DRAIN_MS / 1000} s (missing)`);
    return (
      `${name}: org B's lag commit → receipt, ${fast.lags.length} of ${written} received, ` +
      `p50 ${show(percentile(lags, 0.5))}, p99 ${show(percentile(lags, 0.99))}, max ${show(lags.at(-1)!)}`
    );
  } finally {
    worker.kill('SIGTERM');
    for (const receiver of [...slow, fast]) await receiver.close();
    await once(worker, 'exit');
    // The next side starts without them (an org has at most 25).
    for (const hook of hooks)
      await api(hook.org as Servers, 'DELETE', `/v1/orgs/${hook.org.orgId}/webhooks/${hook.id}`, {
        expectedVersion: hook.version,
      });
  }
}

Object.assign(process.env, webhookBenchEnv);
const servers = await startServers();
try {
  const prisma = createPrisma(servers.databaseUrl, 2);
  const { orgId, apiKey } = await bootstrapOrg(prisma, {
    orgName: 'Bench B',
    email: `bench-b-${Date.now()}@example.com`,
    name: 'Bench B',
  });
  await prisma.$disconnect();
  const orgB: Org = { servicePort: servers.servicePort, orgId, apiKey };
  const before = process.env.BENCH_BEFORE;
  process.stdout.write(
    `webhook fairness: org A ${SLOW_ENDPOINTS} endpoints (${SLOW_ANSWERING} answer after ${SLOW_MS} ms, the rest ` +
      `never), a row every ${A_EVERY_MS} ms; org B one endpoint, a row every ${B_EVERY_MS} ms for ${MEASURE_SECONDS} s\n`,
  );
  process.stdout.write(`${await side('alone (after, no slow org)', process.cwd(), servers, orgB, false)}\n`);
  for (let round = 1; round <= ROUNDS; round += 1) {
    const sides: [string, string][] = [['after', process.cwd()]];
    if (before) sides[round % 2 === 1 ? 'unshift' : 'push'](['before', before]);
    for (const [name, directory] of sides)
      process.stdout.write(`round ${round}, ${await side(name, directory, servers, orgB, true)}\n`);
  }
} finally {
  await servers.stop();
}
