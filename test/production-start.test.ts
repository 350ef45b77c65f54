import { once } from 'node:events';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createPrisma, type PrismaClient } from '../src/db/prisma.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { openEventStream } from './helpers/event-stream.ts';
import { createOrg, idempotencyKey, type TestOrg } from './helpers/factories.ts';
import { requestPreview } from './helpers/jobs.ts';
import { logged, startApiProcess, type ApiProcess } from './helpers/processes.ts';
import { createTable } from './helpers/workspace.ts';

/**
 * `npm start` as a container runtime runs it (issue 25): SIGTERM goes to the npm process only, never to a process
 * group. The server must stop (npm runs node directly, and forwards the signal), stop claiming jobs at once, and end
 * open event streams with a last event that tells the client to reconnect, instead of holding the grace period.
 */
const GRACE_MS = 60_000;

const ENV = { LOG_LEVEL: 'info', SHUTDOWN_GRACE_MS: String(GRACE_MS) };
const CLAIM_ENV = { ...ENV, BODY_READ_TIMEOUT_MS: String(GRACE_MS), JOB_POLL_MS: '50' };

let database: TestDatabase;
let prisma: PrismaClient;
let org: TestOrg;
/** Each test's own `npm start` (its worker off), started together so that their starts overlap. */
let services: { stops: ApiProcess; streams: ApiProcess; queues: ApiProcess };

beforeAll(async () => {
  database = await createTestDatabase();
  prisma = createPrisma(database.url, 2);
  org = await createOrg(prisma);
  const started = await Promise.allSettled([
    startApiProcess(database, prisma, ENV),
    startApiProcess(database, prisma, ENV),
    startApiProcess(database, prisma, CLAIM_ENV),
  ]);
  const [stops, streams, queues] = started.map((result) => (result.status === 'fulfilled' ? result.value : null));
  if (!stops || !streams || !queues) {
    await Promise.all([stops, streams, queues].map((service) => service?.stop()));
    throw (started.find((result) => result.status === 'rejected') as PromiseRejectedResult).reason;
  }
  services = { stops, streams, queues };
}, 120_000);
afterAll(async () => {
  await Promise.all(Object.values(services ?? {}).map((service) => service.stop()));
  await prisma?.$disconnect();
  await database?.drop();
});

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The node process's pid, from its `listening` log line (npm's own pid is `service.pid`). */
const serverPid = (service: ApiProcess): number => logged(service, 'listening')[0]!.pid;

/** SIGTERM to the npm process alone; resolves once npm has exited (within the grace period). */
async function terminateNpm(service: ApiProcess): Promise<void> {
  process.kill(service.pid, 'SIGTERM');
  await vi.waitFor(() => expect(alive(service.pid), 'npm start outlived the grace period').toBe(false), {
    timeout: GRACE_MS,
    interval: 50,
  });
}

/** Processes listening for committed changes on the test database (one per process with an open stream or poll). */
async function changeListeners(): Promise<number> {
  const [row] = await prisma.$queryRaw<{ count: number }[]>`
    SELECT count(*)::int AS count FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN "wds_changes"'`;
  return row!.count;
}

/** Job runners listening for new jobs on the test database (one per process whose worker runs). */
async function jobListeners(): Promise<number> {
  const [row] = await prisma.$queryRaw<{ count: number }[]>`
    SELECT count(*)::int AS count FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN wds_jobs'`;
  return row!.count;
}

async function queuedJob(service: ApiProcess): Promise<{ jobId: string; databaseId: string }> {
  const table = await createTable(service, org, [{ name: 'Name', type: 'text' }]);
  const accepted = await requestPreview(service, org.adminKey, table, {
    content: 'Name\nAda\n',
    mapping: [{ source: 'Name', fieldId: 'Name' }],
  });
  expect(accepted.status, accepted.text).toBe(202);
  return { jobId: accepted.body.jobId, databaseId: table.databaseId };
}

describe('SIGTERM to the `npm start` process', () => {
  it('stops the server, within the grace period, and leaves no node process behind', async () => {
    const service = services.stops;
    try {
      const node = serverPid(service);
      expect(node).not.toBe(service.pid);
      await terminateNpm(service);
      expect(alive(node)).toBe(false);
      expect(logged(service, 'stopped')).toHaveLength(1);
      await expect(fetch(`${service.url}/healthz`)).rejects.toThrow();
    } finally {
      await service.stop();
    }
  }, 120_000);

  it('ends open job and change streams (REST and /graphql) at once with a last event that says to reconnect', async () => {
    const service = services.streams;
    try {
      const { jobId, databaseId } = await queuedJob(service);
      const headers = { authorization: `Bearer ${org.adminKey}` };
      const rest = await openEventStream(`${service.url}/v1/orgs/${org.orgId}/jobs/${jobId}/events`, { headers });
      const changesPath = `/v1/orgs/${org.orgId}/databases/${databaseId}/changes`;
      const head = await service.request('GET', `${changesPath}/head`, { token: org.adminKey });
      expect(head.status, head.text).toBe(200);
      // A long poll of the feed with nothing new: held up to 30 s, it answers its empty page at the signal. The
      // process listens for changes once the poll waits (it is the first to), and the streams share that connection.
      const polling = service.request('GET', `${changesPath}?wait=30&after=${encodeURIComponent(head.body.cursor)}`, {
        token: org.adminKey,
      });
      await expect.poll(() => changeListeners(), { timeout: 10_000, interval: 20 }).toBe(1);
      const changes = await openEventStream(`${service.url}${changesPath}`, {
        headers: { ...headers, accept: 'text/event-stream' },
      });
      expect(changes.status).toBe(200);
      const changesGraphql = await openEventStream(`${service.url}/graphql`, {
        method: 'POST',
        headers: { ...headers, accept: 'text/event-stream', 'content-type': 'application/json' },
        body: JSON.stringify({
          query: 'subscription ($o: ID!, $d: ID!) { rowChanges(orgId: $o, databaseId: $d) { cursor } }',
          variables: { o: org.orgId, d: databaseId },
        }),
      });
      expect(changesGraphql.status).toBe(200);

      const graphql = await openEventStream(`${service.url}/graphql`, {
        method: 'POST',
        headers: { ...headers, accept: 'text/event-stream', 'content-type': 'application/json' },
        body: JSON.stringify({
          query: 'subscription ($o: ID!, $j: ID!) { jobUpdated(orgId: $o, jobId: $j) { state } }',
          variables: { o: org.orgId, j: jobId },
        }),
      });
      expect((await rest.next())?.data).toMatchObject({ jobId, state: 'queued' });
      expect((await graphql.next())?.data).toEqual({ data: { jobUpdated: { state: 'queued' } } });

      const stopped = terminateNpm(service);
      expect(await rest.next()).toEqual({
        event: 'error',
        data: {
          error: {
            code: 'SERVICE_RESTARTING',
            message: 'The service is restarting: reconnect to follow the job.',
            requestId: expect.any(String),
          },
        },
      });
      expect(await rest.next()).toBeNull();
      const last = await graphql.next();
      expect(last?.event).toBe('next');
      expect(last?.data.errors[0].extensions).toMatchObject({ code: 'SERVICE_RESTARTING', retryAfter: 1 });
      expect((await graphql.next())?.event).toBe('complete');
      expect(await changes.next()).toEqual({
        event: 'error',
        data: {
          error: {
            code: 'SERVICE_RESTARTING',
            message: 'The service is restarting: reconnect to follow the changes.',
            requestId: expect.any(String),
          },
        },
      });
      expect(await changes.next()).toBeNull();
      const lastChange = await changesGraphql.next();
      expect(lastChange?.event).toBe('next');
      expect(lastChange?.data.errors[0].extensions).toMatchObject({ code: 'SERVICE_RESTARTING', retryAfter: 1 });
      expect((await changesGraphql.next())?.event).toBe('complete');
      const polled = await polling;
      expect(polled.status, polled.text).toBe(200);
      expect(polled.body).toMatchObject({ data: [], hasMore: false });
      // Before, the streams held the shutdown for the whole grace period and were then cut without a frame.
      await stopped;
      expect(logged(service, 'stopped')).toHaveLength(1);
    } finally {
      await service.stop();
    }
  }, 120_000);

  it('stops the worker claiming jobs at once, while an in-flight request still holds the server', async () => {
    // A job queued by a process without a worker, not due yet: the worker cannot claim it before the signal.
    const { jobId } = await queuedJob(services.queues).finally(() => services.queues.stop());
    await prisma.$executeRaw`UPDATE jobs SET run_at = now() + interval '1 day' WHERE id = ${jobId}`;
    const worker = await startApiProcess(database, prisma, { ...CLAIM_ENV, RUN_WORKER: 'true' });
    const upload = connect(Number(new URL(worker.url).port), '127.0.0.1');
    try {
      await once(upload, 'connect');
      await expect.poll(() => jobListeners(), { timeout: 10_000, interval: 20 }).toBe(1);
      // A request the server has (it answers 100 Continue) whose body never comes: shutdown waits for it.
      upload.write(
        `POST /v1/orgs/${org.orgId}/databases HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${org.adminKey}\r\n` +
          `Idempotency-Key: ${idempotencyKey()}\r\nContent-Type: application/json\r\nContent-Length: 20\r\nExpect: 100-continue\r\n\r\n`,
      );
      let answer = '';
      upload.on('data', (chunk) => (answer += String(chunk)));
      await vi.waitFor(() => expect(answer).toBe('HTTP/1.1 100 Continue\r\n\r\n'), { timeout: 10_000, interval: 20 });

      process.kill(worker.pid, 'SIGTERM');
      // The runner's LISTEN connection ends only after its claim loop has: from here on it claims nothing.
      await expect.poll(() => jobListeners(), { timeout: 10_000, interval: 20 }).toBe(0);
      expect(alive(worker.pid), 'the in-flight request still holds the server').toBe(true);
      expect(logged(worker, 'stopped')).toEqual([]);
      expect(answer, 'the request is still waiting for its body').toBe('HTTP/1.1 100 Continue\r\n\r\n');
      await prisma.$executeRaw`UPDATE jobs SET run_at = now() WHERE id = ${jobId}`;
      upload.destroy();
      await vi.waitFor(() => expect(alive(worker.pid)).toBe(false), { timeout: GRACE_MS, interval: 50 });
      const [job] = await prisma.$queryRaw<
        { state: string; attempts: number }[]
      >`SELECT state, attempts FROM jobs WHERE id = ${jobId}`;
      expect(job).toEqual({ state: 'queued', attempts: 0 });
    } finally {
      upload.destroy();
      await worker.stop();
    }
  }, 120_000);
});

describe('the job worker of `npm start`', () => {
  it('runs in a child process: killed, it is started again while the server answers; SIGTERM to npm stops both', async () => {
    const service = await startApiProcess(database, prisma, {
      LOG_LEVEL: 'info',
      SHUTDOWN_GRACE_MS: String(GRACE_MS),
      RUN_WORKER: 'true',
      JOB_POLL_MS: '50',
    });
    try {
      const started = () => logged(service, 'worker started').map((entry) => entry.pid as number);
      await vi.waitFor(() => expect(started()).toHaveLength(1), { timeout: 60_000, interval: 50 });
      const node = serverPid(service);
      const [first] = started();
      expect(first).not.toBe(node);
      await expect.poll(() => jobListeners(), { timeout: 10_000, interval: 20 }).toBe(1);

      process.kill(first!, 'SIGKILL');
      // The job runner was the child's: its LISTEN connection goes with it, and the server keeps answering.
      await expect.poll(() => jobListeners(), { timeout: 10_000, interval: 20 }).toBe(0);
      expect(alive(node)).toBe(true);
      expect((await fetch(`${service.url}/readyz`)).status).toBe(200);
      await vi.waitFor(() => expect(started()).toHaveLength(2), { timeout: 60_000, interval: 50 });
      const second = started()[1]!;
      expect(second).not.toBe(first);
      expect(logged(service, 'worker process ended; starting it again')).toEqual([
        expect.objectContaining({ signal: 'SIGKILL', restartInMs: 1000 }),
      ]);
      const { jobId } = await queuedJob(service);
      await vi.waitFor(
        async () => {
          const [job] = await prisma.$queryRaw<{ state: string }[]>`SELECT state FROM jobs WHERE id = ${jobId}`;
          expect(job?.state).toBe('succeeded');
        },
        { timeout: 60_000, interval: 100 },
      );

      await terminateNpm(service);
      expect([alive(node), alive(second)]).toEqual([false, false]);
      expect(logged(service, 'worker stopped')).toHaveLength(1);
    } finally {
      await service.stop();
    }
  }, 180_000);
});
