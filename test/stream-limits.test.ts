import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChannelListener } from '../src/db/listener.ts';
import { createLogger } from '../src/kernel/log.ts';
import { expectError } from './helpers/expectations.ts';
import { openEventStream, type EventStream } from './helpers/event-stream.ts';
import { addMember, createTeamKey, idempotencyKey } from './helpers/factories.ts';
import { requestPreview } from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

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

/**
 * The database's change feed: a live stream (SSE) or a waiting long poll holds a slot like a job's stream. A server
 * of its own with a wide org cap, so that slots other tests are still releasing cannot reach it.
 */
describe('change-feed streams and long polls', () => {
  const own = useServerWithOrg({
    RUN_WORKER: 'false',
    EVENT_STREAMS_PER_CREDENTIAL: '2',
    EVENT_STREAMS_PER_ORG: '100',
    EVENT_STREAM_RECHECK_MS: '150',
  });
  let names: TestTable;
  beforeAll(async () => {
    names = await createTable(own.server, own.org, [{ name: 'Name', type: 'text' }]);
  });
  const feed = () => `/v1/orgs/${own.org.orgId}/databases/${names.databaseId}/changes`;

  async function changeStream(token: string): Promise<EventStream> {
    const events = await openEventStream(`${own.server.url}${feed()}`, {
      headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
    });
    opened.push(events);
    return events;
  }

  it('count against the credential’s cap with job streams: the third is 429, whichever kind it is', async () => {
    const accepted = await requestPreview(own.server, own.org.adminKey, names, {
      content: 'Name\nAda\n',
      mapping: [{ source: 'Name', fieldId: 'Name' }],
    });
    expect(accepted.status, accepted.text).toBe(202);
    const jobEvents = `/v1/orgs/${own.org.orgId}/jobs/${accepted.body.jobId}/events`;
    const jobs = await openEventStream(`${own.server.url}${jobEvents}`, {
      headers: { authorization: `Bearer ${own.org.adminKey}` },
    });
    opened.push(jobs);
    const changes = await changeStream(own.org.adminKey);
    expect([jobs.status, changes.status]).toEqual([200, 200]);
    const token = own.org.adminKey;
    for (const beyond of [
      await own.server.request('GET', feed(), { token, headers: { accept: 'text/event-stream' } }),
      await own.server.request('GET', `${feed()}?wait=5`, { token }),
      await own.server.request('GET', jobEvents, { token }),
    ]) {
      expectError(beyond, 429, 'RATE_LIMITED');
      expect(beyond.headers.get('retry-after')).toBe('10');
      expect(beyond.body.error.details).toEqual({ limit: 'event-streams', scope: 'credential', max: 2 });
    }
    // A page without `wait` is an ordinary read, not a stream.
    expect((await own.server.request('GET', feed(), { token })).status).toBe(200);
    jobs.close();
    changes.close();
  });

  it('a waiting long poll holds its slot until it answers, then frees it', async () => {
    const key = await createTeamKey(own.server.prisma, own.org, 'write');
    const head = await own.server.request('GET', `${feed()}/head`, { token: key });
    expect(head.status, head.text).toBe(200);
    const longPoll = () => {
      const poll = own.server.request('GET', `${feed()}?wait=30&after=${encodeURIComponent(head.body.cursor)}`, {
        token: key,
      });
      const entry = { poll, answered: null as number | null };
      void poll.then((response) => {
        entry.answered = response.status;
      });
      return entry;
    };
    const polls = [longPoll(), longPoll()];
    await expect
      .poll(
        async () => {
          // On a loaded machine a probe can reach the cap before a long poll does, which is then refused (429):
          // that one is asked again, until both hold their slots and the probe is the one refused. A long poll
          // answered early for any other reason shows in the failure (`answered`).
          for (const [index, entry] of polls.entries()) if (entry.answered === 429) polls[index] = longPoll();
          const probe = await own.server.request('GET', `${feed()}?wait=1`, { token: key });
          return { probe: probe.status, answered: polls.map((entry) => entry.answered) };
        },
        { timeout: 10_000, interval: 50 },
      )
      .toEqual({ probe: 429, answered: [null, null] });
    expect((await createRow(own.server, key, names, { Name: 'wakes the polls' })).status).toBe(201);
    for (const answered of await Promise.all(polls.map((entry) => entry.poll))) {
      expect(answered.status, answered.text).toBe(200);
      expect(answered.body.data.length).toBeGreaterThan(0);
    }
    const freed = await own.server.request('GET', `${feed()}?wait=1`, { token: key });
    expect(freed.status, freed.text).toBe(200);
  });

  it('a removed member’s change stream ends with UNAUTHENTICATED', async () => {
    const member = await addMember(own.server.prisma, own.org.orgId, 'viewer');
    const events = await changeStream(member.apiKey);
    expect(events.status).toBe(200);
    const removed = await own.server.request('DELETE', `/v1/orgs/${own.org.orgId}/members/${member.memberId}`, {
      token: own.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1' },
    });
    expect(removed.status, removed.text).toBe(200);
    const last = await events.next();
    expect(last?.event).toBe('error');
    expect(last?.data.error.code).toBe('UNAUTHENTICATED');
    expect(await events.next()).toBeNull();
  });
});
