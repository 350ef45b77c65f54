import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, idempotencyKey, type TestOrg } from './helpers/factories.ts';
import { controlJob, mappingOf, requestPreview, waitForJob } from './helpers/jobs.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { createTable } from './helpers/workspace.ts';

/**
 * Issue 26 §8: an S3 endpoint that accepts connections and never answers. Every request to it times out after
 * BACKUP_S3_TIMEOUT_MS (300 ms here), so a destination test fails with DEPENDENCY_UNAVAILABLE instead of holding a
 * worker slot for minutes. A second server gives its S3 requests ten minutes: there a cancel must end the request
 * through the job's AbortSignal, and one org's hung jobs may hold only JOB_SLOTS_PER_ORG of the worker's slots.
 */
let hung: Server;
const sockets: Socket[] = [];
const closed = new WeakSet<Socket>();
let server: TestServer;
let patient: TestServer;
let org: TestOrg;

beforeAll(async () => {
  process.env.AWS_ACCESS_KEY_ID = 'HUNG';
  process.env.AWS_SECRET_ACCESS_KEY = 'HUNG';
  hung = createServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => closed.add(socket));
    // Reading (and dropping) what arrives lets the socket see the client's end: a paused socket never closes.
    socket.resume();
  });
  hung.listen(0, '127.0.0.1');
  await once(hung, 'listening');
  const endpoint = `http://127.0.0.1:${(hung.address() as AddressInfo).port}`;
  server = await startTestServer({
    BACKUP_S3_BUCKET: 'never',
    BACKUP_S3_ENDPOINT: endpoint,
    BACKUP_S3_TIMEOUT_MS: '300',
  });
  org = await createOrg(server.prisma);
  patient = await startTestServer({
    BACKUP_S3_BUCKET: 'never',
    BACKUP_S3_ENDPOINT: endpoint,
    BACKUP_S3_TIMEOUT_MS: '600000',
    JOB_CONCURRENCY: '2',
    JOB_SLOTS_PER_ORG: '0',
    // A heartbeat every second: that is when the worker sees the cancel.
    JOB_LEASE_SECONDS: '3',
  });
});

afterAll(async () => {
  await patient?.close();
  await server?.close();
  for (const socket of sockets) socket.destroy();
  hung?.close();
});

describe('a destination that never answers', () => {
  it('fails the destination test with DEPENDENCY_UNAVAILABLE once its requests time out', async () => {
    const accepted = await server.request('POST', `/v1/orgs/${org.orgId}/backup-destination/test`, {
      token: org.adminKey,
      idempotencyKey: idempotencyKey(),
    });
    expect(accepted.status, accepted.text).toBe(202);
    const job = await waitForJob(server, org.adminKey, accepted.body.statusUrl, undefined, 60_000);
    expect(job).toMatchObject({
      state: 'failed',
      error: { code: 'DEPENDENCY_UNAVAILABLE', details: { destination: 's3' } },
    });
    expect(sockets.length).toBeGreaterThan(0);
  }, 90_000);
});

describe('a job waiting on a destination that never answers', () => {
  const destinationTest = async (tested: TestOrg) => {
    const accepted = await patient.request('POST', `/v1/orgs/${tested.orgId}/backup-destination/test`, {
      token: tested.adminKey,
      idempotencyKey: idempotencyKey(),
    });
    expect(accepted.status, accepted.text).toBe(202);
    return accepted.body as { jobId: string; statusUrl: string };
  };
  const stateOf = async (tested: TestOrg, statusUrl: string) =>
    (await patient.request('GET', statusUrl, { token: tested.adminKey })).body.state;

  it("holds one of the two slots (JOB_SLOTS_PER_ORG 0 = all but one), another org's job runs, and cancel ends its wait at once", async () => {
    const hanging = await createOrg(patient.prisma);
    const other = await createOrg(patient.prisma);
    const connected = sockets.length;
    const first = await destinationTest(hanging);
    await waitForJob(patient, hanging.adminKey, first.statusUrl, (job) => job.state === 'running');
    await expect.poll(() => sockets.length, { timeout: 30_000 }).toBeGreaterThan(connected);
    const second = await destinationTest(hanging);

    const table = await createTable(patient, other, [{ name: 'Name', type: 'text' }]);
    const preview = await requestPreview(patient, other.adminKey, table, {
      content: 'Name\nAda\n',
      mapping: mappingOf(table, ['Name']),
    });
    expect(preview.status, preview.text).toBe(202);
    expect((await waitForJob(patient, other.adminKey, preview.body.statusUrl)).state).toBe('succeeded');
    // Without the cap the hanging org's second test took the other slot, and the preview stayed queued.
    expect(await stateOf(hanging, second.statusUrl)).toBe('queued');

    const firstJobSockets = sockets.slice(connected);
    const cancel = await controlJob(patient, hanging.adminKey, hanging.orgId, first.jobId, 'cancel');
    expect(cancel.status, cancel.text).toBe(200);
    // The request has ten minutes left (three times, with the SDK's retries): only the job's AbortSignal ends it now.
    const cancelled = await waitForJob(patient, hanging.adminKey, first.statusUrl);
    expect(cancelled).toMatchObject({ state: 'cancelled' });
    // And it ends the request's socket too, not only the job's wait for it.
    await expect.poll(() => firstJobSockets.every((socket) => closed.has(socket)), { timeout: 10_000 }).toBe(true);

    await waitForJob(patient, hanging.adminKey, second.statusUrl, (job) => job.state === 'running');
    expect((await controlJob(patient, hanging.adminKey, hanging.orgId, second.jobId, 'cancel')).status).toBe(200);
    expect((await waitForJob(patient, hanging.adminKey, second.statusUrl)).state).toBe('cancelled');
  }, 120_000);
});
