import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { idempotencyKey } from './helpers/factories.ts';
import { startReceiver, verify, type Receiver } from './helpers/receiver.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable } from './helpers/workspace.ts';

/**
 * Issue 27: deliveries survive the worker. The server runs no worker; deliveries run in separate worker processes
 * (dist/worker.js, which test/global-setup.ts builds from the sources under test), one of which is SIGKILLed while
 * the receiver holds a message in flight.
 */
const WEBHOOK_ENV = {
  WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
  WEBHOOK_ALLOW_HTTP: 'true',
  WEBHOOK_RETRY_SCHEDULE: '200ms,200ms,200ms',
};
const suite = useServerWithOrg({ RUN_WORKER: 'false', ...WEBHOOK_ENV });
let receiver: Receiver;

interface WorkerProcess {
  child: ChildProcess;
  kill(): Promise<void>;
}

const workers: WorkerProcess[] = [];

function spawnWorker(): WorkerProcess {
  // The built worker, as `npm run worker` runs it: tsx would compile the sources at every start (seconds of CPU
  // per worker). Its own process group, so that SIGKILL reaches whatever it runs.
  const child = spawn(process.execPath, ['dist/worker.js'], {
    detached: true,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      ...WEBHOOK_ENV,
      DATABASE_URL: suite.server.database.url,
      LOG_LEVEL: 'silent',
      JOB_POLL_MS: '50',
      NODE_ENV: 'test',
    },
  });
  const exited = once(child, 'exit');
  const worker = {
    child,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGKILL');
      await exited;
    },
  };
  workers.push(worker);
  return worker;
}

beforeAll(async () => {
  receiver = await startReceiver();
});
// Each test starts without workers: one left running would deliver the next test's messages before it is killed.
afterEach(async () => {
  await Promise.all(workers.map((worker) => worker.kill()));
});
afterAll(async () => {
  await receiver.close();
});

const UNTIL = { timeout: 60_000, interval: 100 };

async function registerWebhook(body: Record<string, unknown>) {
  const created = await suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/webhooks`, {
    token: suite.org.adminKey,
    idempotencyKey: idempotencyKey(),
    body,
  });
  expect(created.status, created.text).toBe(201);
  return created;
}

describe('a worker killed mid-delivery', () => {
  it('is resumed by the next worker: nothing is lost, the message in flight arrives again with the same webhook-id', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    const created = await registerWebhook({ url: receiver.url, events: ['row.created'], databaseId: table.databaseId });
    for (const name of ['a', 'b', 'c']) await createRow(suite.server, suite.org.adminKey, table, { Name: name });
    // The first message is held by the receiver until long after the worker is gone.
    receiver.script({ holdMs: 60_000 });
    const first = spawnWorker();
    await expect.poll(() => receiver.received.length, UNTIL).toBe(1);
    await first.kill();
    spawnWorker();
    await expect.poll(() => receiver.messages().length, UNTIL).toBe(3);
    const names = receiver.received.map((entry) => verify(created.body.secret, entry).data.values[table.fields.Name!]);
    expect(names).toEqual(['a', 'a', 'b', 'c']);
    expect(receiver.received[0]!.id).toBe(receiver.received[1]!.id);
  });

  it('resends a batch in flight with the same webhook-id and the same changes, not with what committed since', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    const endpoint = await startReceiver();
    const created = await registerWebhook({
      url: endpoint.url,
      events: ['row.created'],
      databaseId: table.databaseId,
      batch: { maxChanges: 10 },
    });
    for (const name of ['a', 'b', 'c']) await createRow(suite.server, suite.org.adminKey, table, { Name: name });
    endpoint.script({ holdMs: 60_000 });
    const first = spawnWorker();
    await expect.poll(() => endpoint.received.length, UNTIL).toBe(1);
    await first.kill();
    // Committed after the batch was sent: a batch read afresh would take it in, under another id.
    await createRow(suite.server, suite.org.adminKey, table, { Name: 'd' });
    spawnWorker();
    const names = (index: number) =>
      verify(created.body.secret, endpoint.received[index]!).data.changes.map(
        (change: any) => change.values[table.fields.Name!],
      );
    const received = () => endpoint.received.map((_, index) => names(index));
    await expect.poll(() => received().flat().includes('d'), { timeout: 20_000, interval: 100 }).toBe(true);
    expect(received()).toEqual([['a', 'b', 'c'], ['a', 'b', 'c'], ['d']]);
    expect(endpoint.received[1]!.id).toBe(endpoint.received[0]!.id);
    expect(endpoint.received[1]!.body).toBe(endpoint.received[0]!.body);
    expect(endpoint.received[2]!.id).not.toBe(endpoint.received[0]!.id);
    await endpoint.close();
  });

  it('two workers never deliver one endpoint’s messages at the same time', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    const endpoint = await startReceiver();
    await registerWebhook({ url: endpoint.url, events: ['*'], databaseId: table.databaseId });
    spawnWorker();
    endpoint.script(...Array.from({ length: 20 }, () => ({ holdMs: 30 })));
    await Promise.all(
      Array.from({ length: 20 }, (_, index) =>
        createRow(suite.server, suite.org.adminKey, table, { Name: String(index) }),
      ),
    );
    await expect.poll(() => endpoint.messages().length, UNTIL).toBe(20);
    // Each request arrived after the previous one had been answered: never two in flight.
    const arrivals = endpoint.received.map((entry) => entry.at);
    for (let index = 1; index < arrivals.length; index += 1)
      expect(arrivals[index]! - arrivals[index - 1]!).toBeGreaterThanOrEqual(29);
    await endpoint.close();
  });
});
