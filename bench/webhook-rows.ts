import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as pause } from 'node:timers/promises';
import pg from 'pg';
import { startConsumers, type Consumers } from './consumers.ts';
import { BackendCpu, processMs } from './cpu.ts';
import { api, createRows, percentile, quiesce, ratioLine, workerArgs, type Servers, spawnChild } from './harness.ts';
import { profileDir, profileSince, topSelfTime } from './profile.ts';

/**
 * The webhook rows of bench/changes.bench.ts (issue 27):
 * (1) row create over REST (8 connections) while one webhook delivers every change to a receiver on loopback and an
 *     SSE reader follows the database's feed, against the same creates with the webhook disabled and no reader,
 *     alternating in one run. Target ≥ 0.9: deliveries run on the worker and must not slow request handling.
 * (1b) the same with a batching webhook (`batch: {maxChanges: BENCH_WEBHOOK_BATCH}`, default 100; 0 leaves the row
 *     out) in place of the single-change one, in the same rounds against the same "none" side: what the opt-in
 *     batches save (docs/decisions/webhooks.md, "Batches").
 * (2) delivery lag, from the change's commit (`committedAt`, PostgreSQL's clock) to its receipt by the receiver, p50
 *     and p99, while rows are created at a steady 200/s for BENCH_LAG_SECONDS (default 10); (2b) the same for the
 *     batching webhook.
 * The worker is `src/bin/worker.ts` in its own process, as `npm run worker` runs it, beside the bench's servers
 * process; the receivers and the SSE reader run in a process of their own too (bench/consumers.ts), not in
 * autocannon's loop.
 * The servers must have been started with WEBHOOK_ALLOW_HTTP=true and WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8 in the
 * environment (`webhookBenchEnv`), so that the API accepts a loopback receiver, and without the org's in-flight
 * limit, which the steady 200/s of row (2) would otherwise meet with 429s whenever creates slow down.
 */
export const webhookBenchEnv = {
  WEBHOOK_ALLOW_HTTP: 'true',
  WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
  ORG_CONCURRENCY_LIMIT: '0',
};

const CONNECTIONS = 8;
/**
 * BENCH_WEBHOOK_SIDE=webhook or =sse measures row (1) with only the webhook delivering or only the SSE reader
 * reading (default both, as the row is defined): what each costs the creates, on its own.
 */
const SIDE = process.env.BENCH_WEBHOOK_SIDE ?? 'both';
if (!['both', 'webhook', 'sse'].includes(SIDE))
  throw new Error(`BENCH_WEBHOOK_SIDE is both, webhook or sse, not ${SIDE}`);
const delivering = SIDE !== 'sse';
const reading = SIDE !== 'webhook';
const measured = { both: 'webhook + SSE', webhook: 'webhook only', sse: 'SSE reader only' }[SIDE];
const BATCH = Number(process.env.BENCH_WEBHOOK_BATCH ?? 100);
const LAG_RATE = 200;
const LAG_SECONDS = Number(process.env.BENCH_LAG_SECONDS ?? 10);
const MAX_OUTSTANDING = 32;

export interface WebhookBenchTable {
  databaseId: string;
  path: string;
  schemaVersion: number;
  values: Record<string, unknown>;
}

/** A webhook receiver in the consumers' process (bench/consumers.ts). */
interface Receiver {
  handle: number;
  url: string;
}

async function startWorker(databaseUrl: string): Promise<ChildProcess> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...webhookBenchEnv,
    NODE_ENV: 'production',
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: 'info',
  };
  delete env.REDIS_URL;
  const profile = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}/worker`] : [];
  const child = spawnChild(process.execPath, [...profile, ...workerArgs()], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env,
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  const deadline = Date.now() + 60_000;
  while (!output.includes('worker started')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error('the bench worker did not start');
    await pause(100);
  }
  return child;
}

/**
 * CPU ms of each process over a measurement, and the bench database's transactions (`xact_commit`: every committed
 * transaction, a lone SELECT's included) and WAL bytes (what writes cost; of the whole server, so other work on it
 * counts too).
 */
interface SideCost {
  service: number;
  worker: number;
  postgres: number;
  bench: number;
  consumers: number;
  transactions: number;
  walBytes: number;
}

interface CostReading {
  stop(): Promise<SideCost>;
}

async function databaseCounters(client: pg.Client): Promise<{ transactions: number; wal: bigint }> {
  // Backends report their counters when idle, at most once a second: a pause lets the last ones arrive.
  await pause(1_500);
  const { rows } = await client.query<{ transactions: string; wal: string }>(
    `SELECT xact_commit::text AS transactions, (pg_current_wal_lsn() - '0/0')::text AS wal
       FROM pg_stat_database WHERE datname = current_database()`,
  );
  return { transactions: Number(rows[0]!.transactions), wal: BigInt(rows[0]!.wal.split('.')[0]!) };
}

/**
 * Reads the CPU each process spends from now until `stop`: the service, the worker (its deliverer), the bench
 * database's PostgreSQL backends, this process (autocannon) and the consumers' (the receivers, the SSE reader).
 */
async function readCost(
  servers: Servers,
  worker: ChildProcess,
  consumers: Consumers,
  counters: pg.Client,
): Promise<CostReading> {
  const before = await databaseCounters(counters);
  const service = processMs(servers.pid) ?? 0;
  const work = processMs(worker.pid!) ?? 0;
  const backends = await BackendCpu.open(servers.databaseUrl);
  await backends.start();
  const consuming = consumers.cpuMs();
  const bench = process.cpuUsage();
  return {
    async stop() {
      const own = process.cpuUsage(bench);
      const cost = {
        service: (processMs(servers.pid) ?? 0) - service,
        worker: (processMs(worker.pid!) ?? 0) - work,
        postgres: await backends.stop(),
        bench: (own.user + own.system) / 1000,
        consumers: consumers.cpuMs() - consuming,
      };
      const after = await databaseCounters(counters);
      return {
        ...cost,
        transactions: after.transactions - before.transactions,
        walBytes: Number(after.wal - before.wal),
      };
    },
  };
}

function costLine(side: string, cost: SideCost, changes: number): string {
  const per = (value: number) => (value / changes).toFixed(2);
  return (
    `  ${side} CPU ms per create: service ${per(cost.service)}, worker ${per(cost.worker)}, ` +
    `PostgreSQL ${per(cost.postgres)}, bench ${per(cost.bench)}, consumers ${per(cost.consumers)}; ` +
    `transactions per create ${per(cost.transactions)}, ` +
    `server WAL bytes per create ${(cost.walBytes / changes).toFixed(0)}`
  );
}

const creates = (servers: Servers, table: WebhookBenchTable, amount: number) =>
  createRows({ port: servers.servicePort, apiKey: servers.apiKey }, table, table.values, amount, CONNECTIONS);

/** An SSE reader of the database's feed from now on, in the consumers' process; answers its handle once it is open. */
function openReader(servers: Servers, consumers: Consumers, table: WebhookBenchTable): Promise<number> {
  return consumers.openReaders(
    `http://127.0.0.1:${servers.servicePort}/v1/orgs/${servers.orgId}/databases/${table.databaseId}/changes`,
    { authorization: `Bearer ${servers.apiKey}`, accept: 'text/event-stream' },
    1,
  );
}

async function setState(servers: Servers, webhook: { id: string; version: string }, state: 'active' | 'disabled') {
  const changed = await api(servers, 'PATCH', `/v1/orgs/${servers.orgId}/webhooks/${webhook.id}`, {
    expectedVersion: webhook.version,
    state,
  });
  webhook.version = changed.version;
}

async function drained(consumers: Consumers, receiver: Receiver, count: number): Promise<void> {
  const deadline = Date.now() + 120_000;
  while ((await consumers.count(receiver.handle)) < count && Date.now() < deadline) await pause(50);
}

/** A webhook of the bench and the receiver it delivers to. */
interface Delivery {
  label: string;
  row: string;
  webhook: { id: string; version: string };
  receiver: Receiver;
}

async function startDelivery(
  servers: Servers,
  consumers: Consumers,
  table: WebhookBenchTable,
  label: string,
  row: string,
  batch: number | null,
): Promise<Delivery> {
  const receiver = await consumers.receiver();
  const webhook = (await api(servers, 'POST', `/v1/orgs/${servers.orgId}/webhooks`, {
    url: receiver.url,
    events: ['*'],
    databaseId: table.databaseId,
    ...(batch === null ? {} : { batch: { maxChanges: batch } }),
  })) as { id: string; version: string };
  return { label, row, webhook, receiver };
}

/** Row (2) for one webhook: creates at LAG_RATE for BENCH_LAG_SECONDS, each change's commit → receipt. */
async function lagRow(
  servers: Servers,
  consumers: Consumers,
  table: WebhookBenchTable,
  delivery: Delivery,
): Promise<void> {
  const total = LAG_RATE * LAG_SECONDS;
  const { receiver } = delivery;
  const first = await consumers.count(receiver.handle);
  await pause(2_000);
  const started = performance.now();
  // At most MAX_OUTSTANDING creates in flight: a machine that cannot keep 200/s gets a lower rate (reported), not
  // thousands of queued connections.
  const outstanding = new Set<Promise<unknown>>();
  for (let index = 0; index < total; index += 1) {
    const due = started + (index * 1000) / LAG_RATE;
    const wait = due - performance.now();
    if (wait > 0) await pause(wait);
    while (outstanding.size >= MAX_OUTSTANDING) await Promise.race(outstanding);
    const create = api(servers, 'POST', `${table.path}/rows`, {
      expectedSchemaVersion: table.schemaVersion,
      values: table.values,
    }).finally(() => outstanding.delete(create));
    outstanding.add(create);
  }
  await Promise.all(outstanding);
  const rate = total / ((performance.now() - started) / 1000);
  await drained(consumers, receiver, first + total);
  const lags = (await consumers.receipts(receiver.handle, first))
    .map((receipt) => receipt.at - receipt.committedAt)
    .sort((a, b) => a - b);
  process.stdout.write(
    `(2${delivery.row}) delivery lag commit → receipt, ${delivery.label}, at ${LAG_RATE} creates/s ` +
      `(achieved ${rate.toFixed(0)}/s) for ${LAG_SECONDS} s: ${lags.length} of ${total} received, ` +
      `p50 ${percentile(lags, 0.5)} ms, p99 ${percentile(lags, 0.99)} ms\n`,
  );
}

/**
 * Rows (1), (1b), (2) and (2b). `table` is a fresh table of its own database (the webhooks follow that database
 * only). Each webhook is enabled only for its own side; re-enabled, it first delivers what it missed (drained before
 * the side is measured, so that the backlog does not load it).
 */
export async function benchWebhookRows(
  servers: Servers,
  table: WebhookBenchTable,
  options: { creates: number; rounds: number },
) {
  const worker = await startWorker(servers.databaseUrl);
  const consumers = await startConsumers();
  const started = Date.now();
  const counters = new pg.Client({ connectionString: servers.databaseUrl, application_name: 'bench counters' });
  await counters.connect();
  const deliveries: Delivery[] = [];
  try {
    deliveries.push(await startDelivery(servers, consumers, table, 'one change per message', '', null));
    if (delivering && BATCH > 0)
      deliveries.push(await startDelivery(servers, consumers, table, `batches of up to ${BATCH}`, 'b', BATCH));
    // Long enough for the service's and the worker's hot paths to be compiled before the first measured side.
    const warmup = Math.max(500, options.creates / 3);
    await creates(servers, table, warmup);
    let created = warmup;
    // Delivered before the rounds: a side that never re-enables the webhooks (BENCH_WEBHOOK_SIDE=sse) would
    // otherwise wait for them at every drain.
    for (const delivery of deliveries) await drained(consumers, delivery.receiver, created);
    // Each webhook delivers only on its own side.
    for (const delivery of deliveries) await setState(servers, delivery.webhook, 'disabled');
    process.stdout.write(
      `webhooks: ${options.rounds} rounds; (1) ${options.creates} row creates per side over ${CONNECTIONS} connections\n`,
    );
    const ratios = new Map<Delivery, number[]>(deliveries.map((delivery) => [delivery, []]));
    // Each round measures "none" and each webhook's side, in an order rotated round by round, so that no side is
    // always the first after a pause (or the warm-up) or the last.
    type Side = Delivery | null;
    const sides: Side[] = [null, ...deliveries];
    for (let round = 1; round <= options.rounds; round += 1) {
      const order = sides.map((_, index) => sides[(index + round - 1) % sides.length]!);
      const rates = new Map<Side, number>();
      const lines: string[] = [];
      for (const side of order) {
        if (side && delivering) {
          await setState(servers, side.webhook, 'active');
          await drained(consumers, side.receiver, created);
        }
        await quiesce(counters);
        const cost = await readCost(servers, worker, consumers, counters);
        const reader = side && reading ? await openReader(servers, consumers, table) : null;
        rates.set(side, await creates(servers, table, options.creates));
        created += options.creates;
        if (reader !== null) await consumers.closeReaders(reader);
        // The deliveries still due after the creates are counted on this side too: they are its cost.
        if (side && delivering) await drained(consumers, side.receiver, created);
        const spent = await cost.stop();
        if (side && delivering) await setState(servers, side.webhook, 'disabled');
        const name = side ? `(1${side.row}) with ${measured}, ${side.label}` : 'none';
        lines.push(
          `  ${name}: creates/s ${rates.get(side)!.toFixed(0)}`,
          costLine(side ? 'with' : 'none', spent, options.creates),
        );
      }
      const none = rates.get(null)!;
      for (const delivery of deliveries) ratios.get(delivery)!.push(rates.get(delivery)! / none);
      const summary = deliveries.map((delivery) => `(1${delivery.row}) ${(rates.get(delivery)! / none).toFixed(2)}`);
      process.stdout.write(`round ${round}: ratios ${summary.join(', ')}\n${lines.join('\n')}\n`);
    }
    for (const delivery of deliveries) {
      const what = SIDE === 'both' ? 'one webhook + SSE reader' : measured;
      const label = delivery.row === '' || !delivering ? what : `${what}, ${delivery.label}`;
      process.stdout.write(
        `${ratioLine(`(1${delivery.row}) row create, ${label} vs none`, 'with / none', ratios.get(delivery)!, 0.9)}\n`,
      );
    }

    // Row (2) needs deliveries: not measured with the SSE reader alone.
    if (!delivering) return;
    for (const delivery of deliveries) {
      await setState(servers, delivery.webhook, 'active');
      await drained(consumers, delivery.receiver, created);
      await lagRow(servers, consumers, table, delivery);
      created += LAG_RATE * LAG_SECONDS;
      await setState(servers, delivery.webhook, 'disabled');
    }
  } finally {
    await counters.end();
    worker.kill('SIGTERM');
    await once(worker, 'exit');
    const profile = profileDir && profileSince(`${profileDir}/worker`, started);
    if (profile) process.stdout.write(`\nworker: ${topSelfTime(profile)}\n`);
    await consumers.stop();
  }
}
