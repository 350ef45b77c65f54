import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChannelListener } from '../src/db/listener.ts';
import { createLogger } from '../src/kernel/log.ts';
import { expectError } from './helpers/expectations.ts';
import { openEventStream, type EventStream } from './helpers/event-stream.ts';
import { addMember, createTeamKey, idempotencyKey } from './helpers/factories.ts';
import { requestPreview } from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Issue 26 item 4: open event streams are capped per credential and per org (429 RATE_LIMITED with Retry-After
 * beyond), N streams of one job share one read per change, and a stream ends once its caller may no longer read.
 */
const suite = useServerWithOrg({
  RUN_WORKER: 'false',
  EVENT_STREAMS_PER_CREDENTIAL: '2',
  EVENT_STREAMS_PER_ORG: '3',
  EVENT_STREAM_RECHECK_MS: '150',
});
let table: TestTable;
let db: pg.Client;
const opened: EventStream[] = [];

beforeAll(async () => {
  table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
  db = new pg.Client({ connectionString: suite.server.database.url });
  await db.connect();
});
afterAll(async () => {
  for (const stream of opened) stream.close();
  await db.end();
});

async function queuedJob(): Promise<string> {
  const accepted = await requestPreview(suite.server, suite.org.adminKey, table, {
    content: 'Name\nAda\n',
    mapping: [{ source: 'Name', fieldId: 'Name' }],
  });
  expect(accepted.status, accepted.text).toBe(202);
  return accepted.body.jobId;
}

async function stream(jobId: string, token: string): Promise<EventStream> {
  const events = await openEventStream(`${suite.server.url}/v1/orgs/${suite.org.orgId}/jobs/${jobId}/events`, {
    headers: { authorization: `Bearer ${token}` },
  });
  opened.push(events);
  if (events.status === 200) expect((await events.next())?.event).toBe('message');
  return events;
}

describe('open event streams per credential and per org', () => {
  it('a credential’s third stream is 429 RATE_LIMITED with Retry-After; closing one frees its slot', async () => {
    const jobId = await queuedJob();
    const [first, second] = [await stream(jobId, suite.org.adminKey), await stream(jobId, suite.org.adminKey)];
    expect([first.status, second.status]).toEqual([200, 200]);
    const third = await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/jobs/${jobId}/events`, {
      token: suite.org.adminKey,
    });
    expectError(third, 429, 'RATE_LIMITED');
    expect(third.headers.get('retry-after')).toBe('10');
    expect(third.body.error.details).toEqual({ limit: 'event-streams', scope: 'credential', max: 2 });
    first.close();
    await expect
      .poll(
        async () => {
          const again = await stream(jobId, suite.org.adminKey);
          again.close();
          return again.status;
        },
        { timeout: 5_000, interval: 50 },
      )
      .toBe(200);
    second.close();
  });

  it('the org’s streams together stop at its cap, whichever credential opens them', async () => {
    const jobId = await queuedJob();
    const other = await createTeamKey(suite.server.prisma, suite.org, 'read');
    const held = [
      await stream(jobId, suite.org.adminKey),
      await stream(jobId, suite.org.adminKey),
      await stream(jobId, other),
    ];
    expect(held.map((events) => events.status)).toEqual([200, 200, 200]);
    const beyond = await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/jobs/${jobId}/events`, {
      token: other,
    });
    expectError(beyond, 429, 'RATE_LIMITED');
    expect(beyond.body.error.details).toEqual({ limit: 'event-streams', scope: 'org', max: 3 });
    held[0]!.close();
    await expect
      .poll(
        async () => {
          const again = await stream(jobId, other);
          again.close();
          return again.status;
        },
        { timeout: 5_000, interval: 50 },
      )
      .toBe(200);
    for (const events of held) events.close();
  });
});

describe('a stream whose caller may no longer read', () => {
  it('a removed member’s stream ends (their personal key goes with the membership: UNAUTHENTICATED)', async () => {
    const jobId = await queuedJob();
    const member = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    const events = await stream(jobId, member.apiKey);
    expect(events.status).toBe(200);
    const removed = await suite.server.request('DELETE', `/v1/orgs/${suite.org.orgId}/members/${member.memberId}`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1' },
    });
    expect(removed.status, removed.text).toBe(200);
    const last = await events.next();
    expect(last?.event).toBe('error');
    expect(last?.data.error.code).toBe('UNAUTHENTICATED');
    expect(await events.next()).toBeNull();
  });

  it('a revoked key’s stream ends with UNAUTHENTICATED', async () => {
    const jobId = await queuedJob();
    const key = await createTeamKey(suite.server.prisma, suite.org, 'read');
    const events = await stream(jobId, key);
    // The org's team keys (only this test's and the previous one's) are revoked as DELETE …/keys/{id} would.
    await suite.server.prisma.apiKey.updateMany({
      where: { orgId: suite.org.orgId, scope: 'team', revokedAt: null },
      data: { revokedAt: new Date() },
    });
    const last = await events.next();
    expect(last?.event).toBe('error');
    expect(last?.data.error.code).toBe('UNAUTHENTICATED');
    expect(await events.next()).toBeNull();
  });
});

describe('one read per job change, whatever the number of streams', () => {
  it('five subscribers of a job woken by one NOTIFY share one read', async () => {
    const listener = new ChannelListener(suite.server.database.url, 'wds_fault_test', createLogger('silent'));
    const signals = await Promise.all(Array.from({ length: 5 }, () => listener.subscribe('job-1')));
    // Listening began with a wake-up of every subscriber (nothing sent before it can be trusted to have arrived).
    await Promise.all(signals.map((signal) => signal.next()));
    let reads = 0;
    const read = () => listener.shared('job-1', 'org-1', async () => ++reads);
    expect(await Promise.all(signals.map(read))).toEqual([1, 1, 1, 1, 1]);
    await db.query(`NOTIFY wds_fault_test, 'job-1'`);
    await Promise.all(signals.map((signal) => signal.next()));
    expect(await Promise.all(signals.map(read))).toEqual([2, 2, 2, 2, 2]);
    expect(listener.loads).toBe(2);
    for (const signal of signals) signal.close();
  });
});
