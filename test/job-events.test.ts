import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobResponse } from '../src/contracts/jobs.ts';
import { expectError } from './helpers/expectations.ts';
import { openEventStream, type EventStream } from './helpers/event-stream.ts';
import { addMember, createOrg } from './helpers/factories.ts';
import { requestPreview } from './helpers/jobs.ts';
import { oauthTokens } from './helpers/oauth.ts';
import { signIn, withPassword } from './helpers/sessions.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createTable, type TestTable } from './helpers/workspace.ts';

// No worker: the test moves each job itself, from its own connection, as a worker in another process would.
const suite = useServerWithOrg({ RUN_WORKER: 'false', EVENT_STREAM_HEARTBEAT_MS: '100' });
let table: TestTable;
let db: pg.Client;

beforeAll(async () => {
  table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
  db = new pg.Client({ connectionString: suite.server.database.url });
  await db.connect();
});
afterAll(() => db.end());

async function queuedJob(): Promise<string> {
  const accepted = await requestPreview(suite.server, suite.org.adminKey, table, {
    content: 'Name\nAda\n',
    mapping: [{ source: 'Name', fieldId: 'Name' }],
  });
  expect(accepted.status, accepted.text).toBe(202);
  return accepted.body.jobId;
}

const eventsPath = (jobId: string, orgId = suite.org.orgId) => `/v1/orgs/${orgId}/jobs/${jobId}/events`;
const stream = (jobId: string, token = suite.org.adminKey) =>
  openEventStream(`${suite.server.url}${eventsPath(jobId)}`, { headers: { authorization: `Bearer ${token}` } });

/** One UPDATE of the job row, committed on the test's own connection. */
const move = (jobId: string, set: string) =>
  db.query(`UPDATE jobs SET ${set}, updated_at = now() WHERE id = $1`, [jobId]);

async function nextJob(
  events: EventStream,
): Promise<{ state: string; progress: { done: number; total: number | null } }> {
  const event = await events.next();
  expect(event?.event).toBe('message');
  const parsed = JobResponse.safeParse(event!.data);
  expect(parsed.success, JSON.stringify(parsed.error?.issues)).toBe(true);
  return { state: event!.data.state, progress: event!.data.progress };
}

async function listeningConnections(): Promise<number[]> {
  const { rows } = await db.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN "wds_job_updated"' ORDER BY pid`,
  );
  return rows.map((row) => row.pid);
}

async function waitForListeners(holds: (pids: number[]) => boolean): Promise<number[]> {
  let pids: number[] = [];
  await expect
    .poll(async () => holds((pids = await listeningConnections())), {
      timeout: 20_000,
      interval: 25,
      message: 'listening connections as expected',
    })
    .toBe(true);
  return pids;
}

describe('GET /v1/orgs/{orgId}/jobs/{jobId}/events', () => {
  it('streams a running job’s state and progress, in order, one event per change, and closes when it ends', async () => {
    const jobId = await queuedJob();
    const events = await stream(jobId);
    expect(events.status).toBe(200);
    expect(events.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(events.headers.get('cache-control')).toBe('no-store');
    expect(await nextJob(events)).toEqual({ state: 'queued', progress: { done: 0, total: null } });
    await move(jobId, `state = 'running', started_at = now(), attempts = 1`);
    expect(await nextJob(events)).toEqual({ state: 'running', progress: { done: 0, total: null } });
    await move(jobId, `progress_done = 1, progress_total = 3`);
    expect(await nextJob(events)).toEqual({ state: 'running', progress: { done: 1, total: 3 } });
    // A checkpoint that moves no progress (journal only) is no event: the next one is the next change.
    await move(jobId, `journal = '{"step": 2}'::jsonb`);
    await move(jobId, `progress_done = 2`);
    expect(await nextJob(events)).toEqual({ state: 'running', progress: { done: 2, total: 3 } });
    await move(jobId, `progress_done = 3, state = 'succeeded', finished_at = now(), result = '{"rows": 3}'::jsonb`);
    const last = await events.next();
    expect(last?.data).toMatchObject({
      jobId,
      state: 'succeeded',
      progress: { done: 3, total: 3 },
      result: { rows: 3 },
    });
    expect(await events.rest()).toEqual([]);
  });

  it('an ended job: its final state once, then the stream closes', async () => {
    const jobId = await queuedJob();
    await move(jobId, `state = 'cancelled', finished_at = now()`);
    const events = await stream(jobId);
    expect(events.status).toBe(200);
    const all = await events.rest();
    expect(all.map((event) => [event.event, event.data.state])).toEqual([['message', 'cancelled']]);
  });

  it('writes heartbeat comments while nothing changes', async () => {
    const jobId = await queuedJob();
    const events = await stream(jobId);
    await nextJob(events);
    const ended = events.next();
    await expect.poll(() => events.comments.length, { timeout: 5_000, interval: 25 }).toBeGreaterThan(0);
    expect(events.comments[0]).toBe('heartbeat');
    await move(jobId, `state = 'cancelled', finished_at = now()`);
    expect((await ended)?.data.state).toBe('cancelled');
  });

  it('needs a credential (401 UNAUTHENTICATED)', async () => {
    const jobId = await queuedJob();
    expectError(await suite.server.request('GET', eventsPath(jobId)), 401, 'UNAUTHENTICATED');
  });

  it('needs jobs:read (403 INSUFFICIENT_SCOPE without it) and any role that reads (a viewer)', async () => {
    const jobId = await queuedJob();
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    const session = await signIn(suite.server, await withPassword(suite.server, viewer.userId));
    const narrow = await oauthTokens(suite.server, session, 'org:read');
    expectError(
      await suite.server.request('GET', eventsPath(jobId), { token: narrow.access_token }),
      403,
      'INSUFFICIENT_SCOPE',
    );
    await move(
      jobId,
      `state = 'failed', finished_at = now(), error = '{"code": "INTERNAL_ERROR", "message": "x"}'::jsonb`,
    );
    const scoped = await oauthTokens(suite.server, session, 'jobs:read');
    for (const token of [scoped.access_token, viewer.apiKey]) {
      const events = await stream(jobId, token);
      expect(events.status).toBe(200);
      expect((await events.rest()).map((event) => event.data.state)).toEqual(['failed']);
    }
  });

  it('another org’s job is 404, under its org and under the caller’s own', async () => {
    const jobId = await queuedJob();
    const other = await createOrg(suite.server.prisma);
    expectError(
      await suite.server.request('GET', eventsPath(jobId), { token: other.adminKey }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(
      await suite.server.request('GET', eventsPath(jobId, other.orgId), { token: other.adminKey }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(
      await suite.server.request('GET', eventsPath('01J00000000000000000000000'), { token: suite.org.adminKey }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(
      await suite.server.request('GET', eventsPath('not-an-id'), { token: suite.org.adminKey }),
      400,
      'BAD_REQUEST',
    );
  });

  it('streams share one LISTEN connection; a client that leaves frees its subscription (the last one closes it)', async () => {
    const [first, second] = [await queuedJob(), await queuedJob()];
    const a = await stream(first);
    const b = await stream(second);
    await nextJob(a);
    await nextJob(b);
    expect(await listeningConnections()).toHaveLength(1);
    a.close();
    b.close();
    await waitForListeners((pids) => pids.length === 0);
  });

  it('a lost LISTEN connection is opened again, and no change made meanwhile is missed', async () => {
    const jobId = await queuedJob();
    const events = await stream(jobId);
    await nextJob(events);
    const [pid] = await listeningConnections();
    await db.query('SELECT pg_terminate_backend($1)', [pid]);
    await move(jobId, `state = 'running', started_at = now(), attempts = 1`);
    expect(await nextJob(events)).toMatchObject({ state: 'running' });
    await waitForListeners((pids) => pids.length === 1 && pids[0] !== pid);
    await move(jobId, `progress_done = 5, progress_total = 5, state = 'succeeded', finished_at = now()`);
    expect(await nextJob(events)).toEqual({ state: 'succeeded', progress: { done: 5, total: 5 } });
    expect(await events.rest()).toEqual([]);
  });
});

describe('subscription jobUpdated over /graphql (server-sent events)', () => {
  it('sends the job as `next` events and `complete` when it has ended', async () => {
    const jobId = await queuedJob();
    await move(jobId, `state = 'succeeded', finished_at = now(), progress_done = 1, progress_total = 1`);
    const events = await openEventStream(`${suite.server.url}/graphql`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${suite.org.adminKey}`,
        accept: 'text/event-stream',
        'content-type': 'application/json',
      },
      body: JSON.stringify({
        query:
          'subscription ($orgId: ID!, $jobId: ID!) { jobUpdated(orgId: $orgId, jobId: $jobId) { jobId state progress { done total } } }',
        variables: { orgId: suite.org.orgId, jobId },
      }),
    });
    expect(events.status).toBe(200);
    const all = await events.rest();
    expect(all[0]).toEqual({
      event: 'next',
      data: { data: { jobUpdated: { jobId, state: 'succeeded', progress: { done: 1, total: 1 } } } },
    });
    expect(all.at(-1)?.event).toBe('complete');
  });
});
