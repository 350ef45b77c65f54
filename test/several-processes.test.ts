import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPrisma, type PrismaClient } from '../src/db/prisma.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { expectError } from './helpers/expectations.ts';
import { addMember, createOrg, idempotencyKey, type TestOrg } from './helpers/factories.ts';
import { allRows, mappingOf, requestImport, requestPreview, tableActivity, waitForJob } from './helpers/jobs.ts';
import {
  logged,
  startApiProcess,
  startWorkerProcess,
  type ApiProcess,
  type Env,
  type ServiceProcess,
} from './helpers/processes.ts';
import type { ApiResponse } from './helpers/server.ts';
import { createSlowTable, holdTable, slowRowsPath, waitForScans } from './helpers/slow-table.ts';
import { createRow, createTable, refreshSchemaVersion, type TestTable } from './helpers/workspace.ts';

/**
 * Issue 14: two `npm start` processes (their workers off) and two `npm run worker` processes on one PostgreSQL
 * database, with Redis on 127.0.0.1:6379 (REDIS_URL overrides). Limits hold across the API processes, every job runs
 * exactly once, an Idempotency-Key applies once whichever process receives it; without REDIS_URL each process
 * counts on its own.
 */
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

let database: TestDatabase;
let prisma: PrismaClient;

beforeAll(async () => {
  database = await createTestDatabase();
  prisma = createPrisma(database.url, 2);
});
afterAll(async () => {
  await prisma?.$disconnect();
  await database?.drop();
});

/**
 * The pairs of the describes below, in order. Each describe starts the next one's pair while its own tests run, so
 * that a pair's start (seconds of loading and connecting) overlaps the tests before it instead of adding to them;
 * never more than two pairs start at once.
 */
const pairs: { start: () => Promise<void>; started?: Promise<void> }[] = [];

function startPair(index: number): Promise<void> | undefined {
  const pair = pairs[index];
  if (pair && !pair.started) {
    pair.started = pair.start();
    // Awaited by its own describe; until then a failed start must not count as unhandled.
    pair.started.catch(() => undefined);
  }
  return pair?.started;
}

/** Two API processes with the same settings, stopped after the enclosing describe. */
function useApiPair(env: Env): { one: ApiProcess; two: ApiProcess } {
  const pair = {} as { one: ApiProcess; two: ApiProcess };
  const started: ApiProcess[] = [];
  const index = pairs.length;
  pairs.push({
    start: async () => {
      const processes = await Promise.allSettled([
        startApiProcess(database, prisma, env),
        startApiProcess(database, prisma, env),
      ]);
      for (const result of processes) if (result.status === 'fulfilled') started.push(result.value);
      const failed = processes.find((result) => result.status === 'rejected');
      if (failed) throw failed.reason;
      [pair.one, pair.two] = started as [ApiProcess, ApiProcess];
    },
  });
  beforeAll(async () => {
    const own = startPair(index);
    startPair(index + 1);
    await own;
  }, 120_000);
  afterAll(() => Promise.all(started.map((service) => service.stop())));
  return pair;
}

const OPTIONS = '/v1/preferences/options';

/** Sends `count` requests at once, alternating between the processes. */
function burst(processes: ApiProcess[], count: number, token: string): Promise<ApiResponse[]> {
  return Promise.all(
    Array.from({ length: count }, (_item, index) =>
      processes[index % processes.length]!.request('GET', OPTIONS, { token }),
    ),
  );
}

function expectRefused(response: ApiResponse): void {
  expectError(response, 429, 'RATE_LIMITED');
  expect(response.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
}

describe('with REDIS_URL, the rate limit holds across API processes', () => {
  // 1 request per second sustained plus 5 in a 10 s burst: 6 of 12 requests sent at once (they land within one
  // second, as in test/shared-limits.test.ts). No in-flight limit, whose refusals are 429 too.
  const api = useApiPair({
    REDIS_URL,
    RATE_LIMIT_RPS: '1',
    RATE_LIMIT_BURST: '5',
    CONCURRENCY_LIMIT: '0',
    ORG_CONCURRENCY_LIMIT: '0',
  });

  it("one credential's requests split over both processes are admitted up to the one limit, the rest 429", async () => {
    const { adminKey } = await createOrg(prisma);
    const responses = await burst([api.one, api.two], 12, adminKey);
    const refused = responses.filter((response) => response.status !== 200);
    expect(responses.filter((response) => response.status === 200).length).toBe(6);
    expect(refused.length).toBe(6);
    refused.forEach(expectRefused);
  });
});

describe('with REDIS_URL, the in-flight limit holds across API processes', () => {
  // One slot per credential and no waiting queue, so a request beyond it is refused at once.
  const api = useApiPair({
    REDIS_URL,
    RATE_LIMIT_RPS: '0',
    CONCURRENCY_LIMIT: '1',
    CONCURRENCY_QUEUE: '0',
    ORG_CONCURRENCY_LIMIT: '0',
    DATABASE_POOL_SIZE: '10',
    QUERY_TIMEOUT_MS: '120000',
  });

  it('one credential holding its one slot on one process is refused on the other until the slot is given back', async () => {
    const org: TestOrg = await createOrg(prisma);
    const table: TestTable = await createSlowTable(api.one, org, 100);
    const { apiKey: reader } = await addMember(prisma, org.orgId, 'member');
    // The read waits on the test's lock on its table, holding its slot until the lock is released.
    const hold = await holdTable(api.one, table);
    const holding = api.one.request('GET', slowRowsPath(table), { token: reader });
    await waitForScans(api.one, table, (count) => count === 1, 60_000);
    expectRefused(await api.two.request('GET', `/v1/orgs/${org.orgId}/databases`, { token: reader }));
    await hold.release();
    const held = await holding;
    expect(held.status, held.text).toBe(200);
    expect(held.body.data).toEqual([]);
    expect((await api.two.request('GET', `/v1/orgs/${org.orgId}/databases`, { token: reader })).status).toBe(200);
  }, 120_000);
});

describe('with REDIS_URL, the open event-stream caps hold across API processes', () => {
  // One stream per credential; a lease lasts six re-checks (1.2 s here), renewed at each while the stream is open.
  const api = useApiPair({
    REDIS_URL,
    RATE_LIMIT_RPS: '0',
    CONCURRENCY_LIMIT: '0',
    ORG_CONCURRENCY_LIMIT: '0',
    EVENT_STREAMS_PER_CREDENTIAL: '1',
    EVENT_STREAM_RECHECK_MS: '200',
  });
  let org: TestOrg;
  let table: TestTable;
  beforeAll(async () => {
    org = await createOrg(prisma);
    table = await createTable(api.one, org, [{ name: 'Name', type: 'text' }]);
  });
  const feed = () => `/v1/orgs/${org.orgId}/databases/${table.databaseId}/changes`;

  /** A long poll of the feed from its head: it holds a stream slot until a change commits or `wait` runs out. */
  async function waitingPoll(on: ApiProcess, token: string, wait: number): Promise<{ answer: Promise<ApiResponse> }> {
    const head = await on.request('GET', `${feed()}/head`, { token });
    expect(head.status, head.text).toBe(200);
    const path = `${feed()}?wait=${wait}&after=${encodeURIComponent(head.body.cursor)}`;
    return { answer: on.request('GET', path, { token }) };
  }

  const refusedOn = async (on: ApiProcess, token: string) => await on.request('GET', `${feed()}?wait=1`, { token });

  /** Waits until the shared count holds `count` open streams of the org: a probe before that would take the slot. */
  async function untilCounted(count: number): Promise<void> {
    const redis = new Redis(REDIS_URL);
    try {
      await expect.poll(() => redis.zcard(`wds:streams:org:${org.orgId}`), { timeout: 20_000 }).toBe(count);
    } finally {
      redis.disconnect();
    }
  }

  it('a stream held on one process is counted on the other, and frees its slot there when it ends', async () => {
    const { apiKey } = await addMember(prisma, org.orgId, 'member');
    const held = (await waitingPoll(api.one, apiKey, 30)).answer;
    await untilCounted(1);
    const beyond = await refusedOn(api.two, apiKey);
    expectError(beyond, 429, 'RATE_LIMITED');
    expect(beyond.body.error.details).toEqual({ limit: 'event-streams', scope: 'credential', max: 1 });
    // Held longer than a lease: the slot stays taken because the process renews it.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expectError(await refusedOn(api.two, apiKey), 429, 'RATE_LIMITED');
    expect((await createRow(api.two, apiKey, table, { Name: 'wakes the poll' })).status).toBe(201);
    expect((await held).status).toBe(200);
    await untilCounted(0);
    expect((await refusedOn(api.two, apiKey)).status).toBe(200);
  });

  it('the streams of a process that died free their slots when their leases end', async () => {
    const { apiKey } = await addMember(prisma, org.orgId, 'member');
    const held = (await waitingPoll(api.one, apiKey, 30)).answer.catch(() => null);
    await untilCounted(1);
    expectError(await refusedOn(api.two, apiKey), 429, 'RATE_LIMITED');
    process.kill(-api.one.pid, 'SIGKILL');
    await held;
    await expect
      .poll(async () => (await refusedOn(api.two, apiKey)).status, { timeout: 10_000, interval: 200 })
      .toBe(200);
  });
});

describe('without REDIS_URL, each process counts on its own (documented)', () => {
  const api = useApiPair({
    RATE_LIMIT_RPS: '1',
    RATE_LIMIT_BURST: '0',
    CONCURRENCY_LIMIT: '0',
    ORG_CONCURRENCY_LIMIT: '0',
  });

  it('one credential gets the limit once per process', async () => {
    const { adminKey } = await createOrg(prisma);
    const [first, second] = [
      await api.one.request('GET', OPTIONS, { token: adminKey }),
      await api.two.request('GET', OPTIONS, { token: adminKey }),
    ];
    expect([first.status, second.status]).toEqual([200, 200]);
    expectRefused(await api.one.request('GET', OPTIONS, { token: adminKey }));
    expectRefused(await api.two.request('GET', OPTIONS, { token: adminKey }));
  });
});

describe('two API processes and two worker processes', () => {
  const api = useApiPair({ REDIS_URL, RATE_LIMIT_RPS: '0', CONCURRENCY_LIMIT: '0', ORG_CONCURRENCY_LIMIT: '0' });
  const workers: ServiceProcess[] = [];
  let org: TestOrg;
  beforeAll(async () => {
    const started = await Promise.allSettled(
      [0, 1].map(() => startWorkerProcess(database, { JOB_CONCURRENCY: '1', JOB_POLL_MS: '100' })),
    );
    for (const result of started) if (result.status === 'fulfilled') workers.push(result.value);
    const failed = started.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
    org = await createOrg(prisma);
  });
  afterAll(() => Promise.all(workers.map((worker) => worker.stop())));

  const FIELDS = [
    { name: 'Name', type: 'text', required: true },
    { name: 'Code', type: 'text', options: { maxLength: 20 } },
  ];
  const FILES = 6;
  const ROWS_PER_FILE = 5;
  const csvOf = (file: number) =>
    [
      'Name,Code',
      ...Array.from({ length: ROWS_PER_FILE }, (_item, row) => `Person ${file}-${row},C-${file}-${row}`),
    ].join('\n');

  async function accepted(response: Promise<ApiResponse>): Promise<{ jobId: string; statusUrl: string }> {
    const result = await response;
    expect(result.status, result.text).toBe(202);
    return result.body;
  }

  it('jobs enqueued through both processes each run exactly once, with one set of events each', async () => {
    const via = (index: number) => (index % 2 === 0 ? api.one : api.two);
    const table = await createTable(api.one, org, FIELDS);
    const previews = await Promise.all(
      Array.from({ length: FILES }, (_item, file) =>
        accepted(
          requestPreview(via(file), org.adminKey, table, {
            content: csvOf(file),
            mapping: mappingOf(table, ['Name', 'Code']),
            fileName: `file-${file}.csv`,
          }),
        ),
      ),
    );
    for (const [file, job] of previews.entries()) {
      expect((await waitForJob(via(file + 1), org.adminKey, job.statusUrl, undefined, 60_000)).state).toBe('succeeded');
    }
    const imports = await Promise.all(
      previews.map((job, file) => accepted(requestImport(via(file), org.adminKey, table, job.jobId, 'all-or-nothing'))),
    );
    for (const [file, job] of imports.entries()) {
      const finished = await waitForJob(via(file + 1), org.adminKey, job.statusUrl, undefined, 60_000);
      expect(finished.state, JSON.stringify(finished)).toBe('succeeded');
    }

    const jobIds = [...previews, ...imports].map((job) => job.jobId);
    const records = await prisma.job.findMany({
      where: { tableId: table.tableId },
      select: { id: true, state: true, attempts: true },
    });
    expect(records.map((record) => record.id).sort()).toEqual([...jobIds].sort());
    expect(records.every((record) => record.state === 'succeeded' && record.attempts === 1)).toBe(true);

    // The effect: every file's rows once.
    const codes = (await allRows(api.two, org.adminKey, table)).map((row) => row.values[table.fields.Code!]).sort();
    expect(codes).toEqual(
      Array.from({ length: FILES }, (_file, file) =>
        Array.from({ length: ROWS_PER_FILE }, (_row, row) => `C-${file}-${row}`),
      )
        .flat()
        .sort(),
    );

    // The activity feed: each job's queued and terminal events once.
    const events = (await tableActivity(api.one, org.adminKey, table)).filter((entry) => entry.jobId);
    const eventsOf = (jobId: string) => events.filter((entry) => entry.jobId === jobId).map((entry) => entry.event);
    for (const job of previews)
      expect(eventsOf(job.jobId)).toEqual(['job.previewImportRows.queued', 'job.previewImportRows.succeeded']);
    for (const job of imports)
      expect(eventsOf(job.jobId)).toEqual(['job.importRows.queued', 'records.changed', 'job.importRows.succeeded']);

    // The workers' own logs: between them, each job finished once.
    const finished = () =>
      workers.flatMap((worker) => logged(worker, 'job finished').map((entry) => entry.jobId as string)).sort();
    await expect.poll(finished, { timeout: 10_000, interval: 50 }).toEqual([...jobIds].sort());
  }, 180_000);

  it('what one process changes or hands out, the other honours: a schema change, a page cursor', async () => {
    const table = await createTable(api.one, org, FIELDS);
    for (const index of [0, 1, 2])
      expect((await createRow(api.two, org.adminKey, table, { Name: `Row ${index}` })).status).toBe(201);
    // The second process reads the table first, so its schema cache holds version 1 when the first changes it.
    expect((await api.two.request('GET', `${table.path}/rows?limit=2`, { token: org.adminKey })).status).toBe(200);
    const change = await accepted(
      api.one.request('POST', `${table.path}/schema/operations`, {
        token: org.adminKey,
        idempotencyKey: idempotencyKey(),
        body: {
          expectedSchemaVersion: table.schemaVersion,
          change: { kind: 'add_field', field: { name: 'Score', type: 'number' } },
        },
      }),
    );
    const job = await waitForJob(api.one, org.adminKey, change.statusUrl, undefined, 60_000);
    expect(job.state, JSON.stringify(job)).toBe('succeeded');
    const stale = await createRow(api.two, org.adminKey, table, { Name: 'Stale' });
    expectError(stale, 409, 'SCHEMA_VERSION_CONFLICT');
    const changed = await refreshSchemaVersion(api.two, org.adminKey, table);
    expect(changed.schemaVersion).toBe(table.schemaVersion + 1);

    const first = await api.one.request('GET', `${table.path}/rows?limit=2`, { token: org.adminKey });
    expect(first.status, first.text).toBe(200);
    const scoreId = (await api.two.request('GET', `${table.path}/schema`, { token: org.adminKey })).body.fields.find(
      (field: { name: string }) => field.name === 'Score',
    ).id;
    expect(first.body.data.map((row: { values: Record<string, unknown> }) => row.values[scoreId])).toEqual([
      null,
      null,
    ]);
    const next = await api.two.request(
      'GET',
      `${table.path}/rows?limit=2&cursor=${encodeURIComponent(first.body.nextCursor)}`,
      { token: org.adminKey },
    );
    expect(next.status, next.text).toBe(200);
    expect(next.body.data.map((row: { values: Record<string, unknown> }) => row.values[table.fields.Name!])).toEqual([
      'Row 2',
    ]);
    expect(next.body.nextCursor).toBeNull();
  }, 90_000);

  it('one Idempotency-Key sent to both processes at once applies once; both answers agree', async () => {
    const table = await createTable(api.two, org, FIELDS);
    const keys = Array.from({ length: 4 }, () => idempotencyKey());
    for (const [index, key] of keys.entries()) {
      const body = {
        expectedSchemaVersion: table.schemaVersion,
        values: { Name: `Same ${index}`, Code: `S-${index}` },
      };
      const send = (target: ApiProcess) =>
        target.request('POST', `${table.path}/rows`, { token: org.adminKey, idempotencyKey: key, body });
      const answers = await Promise.all([send(api.one), send(api.two)]);
      const created = answers.find((answer) => answer.status === 201);
      expect(created, answers.map((answer) => answer.text).join('\n')).toBeDefined();
      for (const [at, answer] of answers.entries()) {
        if (answer.status === 201) {
          expect(answer.text).toBe(created!.text);
        } else {
          // The duplicate arrived while the first was in flight (docs/decisions/idempotency.md): 409, then the replay.
          expectError(answer, 409, 'IDEMPOTENCY_IN_PROGRESS');
          expect(answer.headers.get('retry-after')).toBe('1');
          const replay = await send(at === 0 ? api.one : api.two);
          expect(replay.status).toBe(201);
          expect(replay.text).toBe(created!.text);
        }
      }
    }
    const rows = await allRows(api.one, org.adminKey, table);
    expect(rows.map((row) => row.values[table.fields.Code!]).sort()).toEqual(['S-0', 'S-1', 'S-2', 'S-3']);
    expect(await prisma.idempotencyRecord.count({ where: { key: { in: keys } } })).toBe(4);
  });

  it('one Idempotency-Key on a job-enqueuing mutation at both processes makes one job', async () => {
    const table = await createTable(api.one, org, FIELDS);
    const key = idempotencyKey();
    const request = { content: csvOf(0), mapping: mappingOf(table, ['Name', 'Code']) };
    const answers = await Promise.all([
      requestPreview(api.one, org.adminKey, table, request, key),
      requestPreview(api.two, org.adminKey, table, request, key),
    ]);
    const handles = [];
    for (const [at, answer] of answers.entries()) {
      if (answer.status === 409) {
        expectError(answer, 409, 'IDEMPOTENCY_IN_PROGRESS');
        handles.push(await accepted(requestPreview(at === 0 ? api.one : api.two, org.adminKey, table, request, key)));
      } else {
        handles.push(await accepted(Promise.resolve(answer)));
      }
    }
    expect(handles[1]).toEqual(handles[0]);
    expect(await prisma.job.count({ where: { tableId: table.tableId } })).toBe(1);
    expect((await waitForJob(api.two, org.adminKey, handles[0]!.statusUrl, undefined, 60_000)).state).toBe('succeeded');
  }, 90_000);
});
