import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { newId } from '../src/kernel/ids.ts';
import { sqlPoolOf } from '../src/db/prisma.ts';
import { JOB_HANDLERS } from '../src/jobs/kinds/registry.ts';
import { startJobRunner } from '../src/jobs/engine/runner.ts';
import { startWorker } from '../src/jobs/start-worker.ts';
import { createLogger } from '../src/kernel/log.ts';
import { JobResponse } from '../src/contracts/job-results.ts';
import { Page } from '../src/contracts/pages.ts';
import { expectError, expectTimestamp } from './helpers/expectations.ts';
import { requestExport } from './helpers/exports.ts';
import { addMember, createOrg, type TestOrg } from './helpers/factories.ts';
import {
  controlJob,
  importPreviewed,
  mappingOf,
  reportOf,
  requestImport,
  requestPreview,
  tableActivity,
  waitForJob,
} from './helpers/jobs.ts';
import type { TestServer } from './helpers/server.ts';
import { useServerWithOrg, type Suite } from './helpers/suite.ts';
import { addUniqueRule, createTable, type TestTable } from './helpers/workspace.ts';

/** The jobs API: status, list, cancel, retry, artifacts, and the activity events of each job. */
const JobPage = Page(JobResponse);
const CLEAN = 'Name,Age\nAda,36\nBob,41\n';
const WITH_ERRORS = 'Name,Age\nAda,36\nBob,old\n,5\n';
const MALFORMED = 'Name,Age\nAda,36\n"Bob,41\n';

const peopleTable = (suite: Suite, org: TestOrg = suite.org) =>
  createTable(suite.server, org, [
    { name: 'Name', type: 'text', required: true },
    { name: 'Age', type: 'integer' },
  ]);

function accept(server: TestServer, token: string, table: TestTable, content: string, fileName = 'people.csv') {
  return requestPreview(server, token, table, { content, fileName, mapping: mappingOf(table, ['Name', 'Age']) }).then(
    (response) => {
      expect(response.status, response.text).toBe(202);
      return response.body as { jobId: string; statusUrl: string };
    },
  );
}

async function statusOf(server: TestServer, token: string, orgId: string, jobId: string) {
  const response = await server.request('GET', `/v1/orgs/${orgId}/jobs/${jobId}`, { token });
  expect(response.status, response.text).toBe(200);
  return JobResponse.parse(response.body);
}

/** The table's job events (its table.create left out), oldest first. */
const jobEntries = async (server: TestServer, token: string, table: TestTable) =>
  (await tableActivity(server, token, table)).filter((entry) => entry.event !== 'table.create');
const eventsOf = async (server: TestServer, token: string, table: TestTable) =>
  (await jobEntries(server, token, table)).map((entry) => ({
    event: entry.event,
    jobId: entry.jobId,
    fileName: entry.fileName,
  }));

describe('with a worker', () => {
  const suite = useServerWithOrg();
  const admin = () => suite.org.adminKey;

  describe('GET /v1/orgs/{orgId}/jobs/{jobId}', () => {
    it('answers the status shape exactly, from queued to a terminal state with its timestamps in order', async () => {
      const table = await peopleTable(suite);
      const handle = await accept(suite.server, admin(), table, WITH_ERRORS);
      const job = JobResponse.parse(await waitForJob(suite.server, admin(), handle.statusUrl));
      expect(Object.keys(job).sort()).toEqual([
        'artifacts',
        'createdAt',
        'error',
        'finishedAt',
        'jobId',
        'kind',
        'progress',
        'result',
        'startedAt',
        'state',
        'updatedAt',
      ]);
      expect(job).toMatchObject({
        jobId: handle.jobId,
        kind: 'previewImportRows',
        state: 'succeeded',
        progress: { done: 3, total: 3 },
        error: null,
      });
      for (const stamp of [job.createdAt, job.updatedAt, job.startedAt, job.finishedAt]) expectTimestamp(stamp);
      expect(
        job.createdAt <= job.startedAt! && job.startedAt! <= job.finishedAt! && job.finishedAt! <= job.updatedAt,
      ).toBe(true);
      expect(job.result).toMatchObject({ totalRows: 3, validRows: 1, invalidRows: 2 });
      expect(job.artifacts.map((artifact) => artifact.name)).toEqual(['errors.jsonl']);
    });

    it('is readable by a viewer; 404 for an unknown job and for another org’s job', async () => {
      const table = await peopleTable(suite);
      const { jobId } = await accept(suite.server, admin(), table, CLEAN);
      const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
      expect((await statusOf(suite.server, viewer.apiKey, suite.org.orgId, jobId)).jobId).toBe(jobId);
      expectError(
        await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/jobs/${newId()}`, { token: admin() }),
        404,
        'RESOURCE_NOT_FOUND',
      );
      const other = await createOrg(suite.server.prisma);
      expectError(
        await suite.server.request('GET', `/v1/orgs/${other.orgId}/jobs/${jobId}`, { token: other.adminKey }),
        404,
        'RESOURCE_NOT_FOUND',
      );
      expectError(
        await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/jobs/${jobId}`, { token: other.adminKey }),
        404,
        'RESOURCE_NOT_FOUND',
      );
    });
  });

  describe('GET /v1/orgs/{orgId}/jobs', () => {
    it('lists the org’s jobs newest first, filters by state and kind, and pages with a cursor', async () => {
      const org = await createOrg(suite.server.prisma);
      const table = await peopleTable(suite, org);
      const ok = await waitForJob(
        suite.server,
        org.adminKey,
        (await accept(suite.server, org.adminKey, table, CLEAN)).statusUrl,
      );
      const bad = await waitForJob(
        suite.server,
        org.adminKey,
        (await accept(suite.server, org.adminKey, table, MALFORMED)).statusUrl,
      );
      const imported = await importPreviewed(suite.server, org.adminKey, table, ok.jobId, 'valid-rows-only');
      const list = async (query: string) => {
        const response = await suite.server.request('GET', `/v1/orgs/${org.orgId}/jobs${query}`, {
          token: org.adminKey,
        });
        expect(response.status, response.text).toBe(200);
        return JobPage.parse(response.body);
      };
      const all = await list('');
      expect(all.data.map((job) => job.jobId)).toEqual([imported.jobId, bad.jobId, ok.jobId]);
      expect(all).toMatchObject({ hasMore: false, nextCursor: null });
      expect(all.data[0]).toEqual(await statusOf(suite.server, org.adminKey, org.orgId, imported.jobId));
      expect((await list('?state=failed')).data.map((job) => job.jobId)).toEqual([bad.jobId]);
      expect((await list('?kind=importRows')).data.map((job) => job.jobId)).toEqual([imported.jobId]);
      expect((await list('?kind=previewImportRows&state=succeeded')).data.map((job) => job.jobId)).toEqual([ok.jobId]);
      expect((await list('?state=cancelled')).data).toEqual([]);

      const walked: string[] = [];
      let cursor: string | null = null;
      do {
        const page = await list(`?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        expect(page.data).toHaveLength(1);
        expect(page.hasMore).toBe(page.nextCursor !== null);
        walked.push(page.data[0]!.jobId);
        cursor = page.nextCursor;
      } while (cursor);
      expect(walked).toEqual(all.data.map((job) => job.jobId));

      const first = await list('?limit=1');
      expectError(
        await suite.server.request(
          'GET',
          `/v1/orgs/${org.orgId}/jobs?state=failed&cursor=${encodeURIComponent(first.nextCursor!)}`,
          { token: org.adminKey },
        ),
        400,
        'CURSOR_INVALID',
      );
      expectError(
        await suite.server.request('GET', `/v1/orgs/${org.orgId}/jobs?state=done`, { token: org.adminKey }),
        422,
        'VALIDATION_FAILED',
      );
      expectError(
        await suite.server.request('GET', `/v1/orgs/${org.orgId}/jobs?kind=notAKind`, { token: org.adminKey }),
        422,
        'VALIDATION_FAILED',
      );
      // Another org sees none of them.
      expect(
        (
          await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/jobs?limit=100`, { token: admin() })
        ).body.data.filter((job: { jobId: string }) => [ok.jobId, bad.jobId, imported.jobId].includes(job.jobId)),
      ).toEqual([]);
      expectError(
        await suite.server.request('GET', `/v1/orgs/${org.orgId}/jobs`, { token: admin() }),
        404,
        'RESOURCE_NOT_FOUND',
      );
    });
  });

  describe('POST …/jobs/{jobId}/cancel and /retry on finished jobs', () => {
    it('cancelling a finished job is 409 JOB_STATE_CONFLICT; retrying a succeeded job is 409 too', async () => {
      const table = await peopleTable(suite);
      const job = await waitForJob(
        suite.server,
        admin(),
        (await accept(suite.server, admin(), table, CLEAN)).statusUrl,
      );
      expect(job.state).toBe('succeeded');
      const cancel = await controlJob(suite.server, admin(), suite.org.orgId, job.jobId, 'cancel');
      expectError(cancel, 409, 'JOB_STATE_CONFLICT');
      expect(cancel.body.error.details).toEqual({ state: 'succeeded' });
      expectError(
        await controlJob(suite.server, admin(), suite.org.orgId, job.jobId, 'retry'),
        409,
        'JOB_STATE_CONFLICT',
      );
      expect(await statusOf(suite.server, admin(), suite.org.orgId, job.jobId)).toEqual(JobResponse.parse(job));
    });

    it('retrying a failed job runs it again to the same result, with a new queued event', async () => {
      const table = await peopleTable(suite);
      const failed = await waitForJob(
        suite.server,
        admin(),
        (await accept(suite.server, admin(), table, MALFORMED, 'broken.csv')).statusUrl,
      );
      expect(failed).toMatchObject({ state: 'failed', error: { code: 'VALIDATION_FAILED' } });
      const report = await reportOf(suite.server, admin(), failed);
      const retried = await controlJob(suite.server, admin(), suite.org.orgId, failed.jobId, 'retry');
      expect(retried.status, retried.text).toBe(200);
      expect(JobResponse.parse(retried.body)).toMatchObject({
        jobId: failed.jobId,
        state: 'queued',
        progress: { done: 0, total: null },
        result: null,
        error: null,
        startedAt: null,
        finishedAt: null,
        artifacts: [],
      });
      const again = await waitForJob(
        suite.server,
        admin(),
        failed.statusUrl ?? `/v1/orgs/${suite.org.orgId}/jobs/${failed.jobId}`,
      );
      expect({ state: again.state, error: again.error, result: again.result }).toEqual({
        state: failed.state,
        error: failed.error,
        result: failed.result,
      });
      expect(await reportOf(suite.server, admin(), again)).toEqual(report);
      expect(await eventsOf(suite.server, admin(), table)).toEqual([
        { event: 'job.previewImportRows.queued', jobId: failed.jobId, fileName: 'broken.csv' },
        { event: 'job.previewImportRows.failed', jobId: failed.jobId, fileName: 'broken.csv' },
        { event: 'job.previewImportRows.queued', jobId: failed.jobId, fileName: 'broken.csv' },
        { event: 'job.previewImportRows.failed', jobId: failed.jobId, fileName: 'broken.csv' },
      ]);
    });

    it('cancels a running job at its next checkpoint: cancelled, its staging dropped, its event recorded', async () => {
      const table = await peopleTable(suite);
      const content = `Name,Age\n${Array.from({ length: 60_000 }, (_, index) => `Person ${index},${index}`).join('\n')}\n`;
      const handle = await accept(suite.server, admin(), table, content, 'big.csv');
      await waitForJob(
        suite.server,
        admin(),
        handle.statusUrl,
        (job) => job.state === 'running' && job.progress.done > 0,
      );
      const cancel = await controlJob(suite.server, admin(), suite.org.orgId, handle.jobId, 'cancel');
      expect(cancel.status, cancel.text).toBe(200);
      expect(JobResponse.parse(cancel.body).state).toBe('running');
      const job = await waitForJob(suite.server, admin(), handle.statusUrl);
      expect(job).toMatchObject({ state: 'cancelled', result: null, error: null, artifacts: [] });
      expectTimestamp(job.finishedAt);
      const staging = await suite.server.prisma.$queryRaw<{ name: string }[]>`
        SELECT tablename::text AS name FROM pg_tables WHERE schemaname = 'wds_jobs' AND tablename LIKE ${`%${handle.jobId.toLowerCase()}`}`;
      expect(staging).toEqual([]);
      expect((await eventsOf(suite.server, admin(), table)).slice(-1)).toEqual([
        { event: 'job.previewImportRows.cancelled', jobId: handle.jobId, fileName: 'big.csv' },
      ]);
    });
  });

  describe('GET …/jobs/{jobId}/artifacts/{name}', () => {
    it('serves the report with its content type and a Content-Digest of its sha256', async () => {
      const table = await peopleTable(suite);
      const job = await waitForJob(
        suite.server,
        admin(),
        (await accept(suite.server, admin(), table, WITH_ERRORS)).statusUrl,
      );
      const [artifact] = job.artifacts;
      const response = await suite.server.request('GET', artifact.url, { token: admin() });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
      const digest = createHash('sha256').update(response.text, 'utf8').digest();
      expect(response.headers.get('content-digest')).toBe(`sha-256=:${digest.toString('base64')}:`);
      expect(digest.toString('hex')).toBe(artifact.sha256);
      expect(Buffer.byteLength(response.text)).toBe(artifact.size);
      expect(response.headers.get('content-disposition')).toBe('attachment; filename="errors.jsonl"');
      const lines = response.text.split('\n');
      expect(lines.at(-1)).toBe('');
      expect(lines.slice(0, -1).map((line) => JSON.parse(line))).toEqual([
        { line: 3, column: 'Age', fieldId: table.fields.Age, code: 'TYPE_MISMATCH', message: 'Age must be an integer' },
        { line: 4, column: 'Name', fieldId: table.fields.Name, code: 'REQUIRED', message: 'Name is required' },
      ]);
      const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
      expect((await suite.server.request('GET', artifact.url, { token: viewer.apiKey })).text).toBe(response.text);
    });

    it('answers 404 for an unknown artifact, the unlisted upload, an unknown job and another org', async () => {
      const table = await peopleTable(suite);
      const job = await waitForJob(
        suite.server,
        admin(),
        (await accept(suite.server, admin(), table, CLEAN)).statusUrl,
      );
      const base = `/v1/orgs/${suite.org.orgId}/jobs`;
      for (const path of [
        `${base}/${job.jobId}/artifacts/nope.jsonl`,
        `${base}/${job.jobId}/artifacts/upload`,
        `${base}/${newId()}/artifacts/errors.jsonl`,
      ]) {
        expectError(await suite.server.request('GET', path, { token: admin() }), 404, 'RESOURCE_NOT_FOUND');
      }
      const other = await createOrg(suite.server.prisma);
      expectError(
        await suite.server.request('GET', `${base}/${job.jobId}/artifacts/errors.jsonl`, { token: other.adminKey }),
        404,
        'RESOURCE_NOT_FOUND',
      );
    });

    it('refuses content that no longer matches its digest: 409 ARTIFACT_UNVERIFIED', async () => {
      const table = await peopleTable(suite);
      const job = await waitForJob(
        suite.server,
        admin(),
        (await accept(suite.server, admin(), table, WITH_ERRORS)).statusUrl,
      );
      const tampered = await suite.server.prisma.$executeRaw`
        UPDATE public.job_artifacts SET content = convert_to('{"line":1}' || chr(10), 'UTF8') WHERE job_id = ${job.jobId}::bpchar AND name = 'errors.jsonl'`;
      expect(tampered).toBe(1);
      expectError(
        await suite.server.request('GET', job.artifacts[0].url, { token: admin() }),
        409,
        'ARTIFACT_UNVERIFIED',
      );
      // Same size, one byte changed, is caught by the digest alone.
      const original = await suite.server.prisma.jobArtifact.findFirstOrThrow({
        where: { jobId: job.jobId, name: 'errors.jsonl' },
      });
      await suite.server.prisma.$executeRaw`
        UPDATE public.job_artifacts SET content = convert_to(repeat('x', ${Number(original.sizeBytes)}::int), 'UTF8') WHERE job_id = ${job.jobId}::bpchar AND name = 'errors.jsonl'`;
      expectError(
        await suite.server.request('GET', job.artifacts[0].url, { token: admin() }),
        409,
        'ARTIFACT_UNVERIFIED',
      );
    });
  });

  describe('activity events of an import preview', () => {
    it('job.previewImportRows.queued on accept and .succeeded on finish, each with the jobId and fileName', async () => {
      const table = await peopleTable(suite);
      const handle = await accept(suite.server, admin(), table, CLEAN, 'ok.csv');
      await waitForJob(suite.server, admin(), handle.statusUrl);
      const entries = await jobEntries(suite.server, admin(), table);
      expect(
        entries.map((entry) => ({
          category: entry.category,
          event: entry.event,
          jobId: entry.jobId,
          fileName: entry.fileName,
          table: entry.table.id,
          actor: entry.actor.id,
        })),
      ).toEqual([
        {
          category: 'imports',
          event: 'job.previewImportRows.queued',
          jobId: handle.jobId,
          fileName: 'ok.csv',
          table: table.tableId,
          actor: suite.org.adminUserId,
        },
        {
          category: 'imports',
          event: 'job.previewImportRows.succeeded',
          jobId: handle.jobId,
          fileName: 'ok.csv',
          table: table.tableId,
          actor: suite.org.adminUserId,
        },
      ]);
    });

    it('job.previewImportRows.failed for a malformed file', async () => {
      const table = await peopleTable(suite);
      const handle = await accept(suite.server, admin(), table, MALFORMED, 'bad.csv');
      await waitForJob(suite.server, admin(), handle.statusUrl);
      expect(await eventsOf(suite.server, admin(), table)).toEqual([
        { event: 'job.previewImportRows.queued', jobId: handle.jobId, fileName: 'bad.csv' },
        { event: 'job.previewImportRows.failed', jobId: handle.jobId, fileName: 'bad.csv' },
      ]);
    });
  });
});

describe('without a worker (jobs stay queued)', () => {
  const suite = useServerWithOrg({ RUN_WORKER: 'false' });
  const admin = () => suite.org.adminKey;

  /** Runs the queue with a worker of this test's own until `until` holds. */
  async function withWorker<T>(run: () => Promise<T>): Promise<T> {
    const worker = startWorker(suite.server.prisma, suite.server.config, createLogger('silent'));
    try {
      return await run();
    } finally {
      await worker.stop();
    }
  }

  it('stops a worker twice, at once and again after, without an error (SIGINT after SIGTERM)', async () => {
    const worker = startWorker(suite.server.prisma, suite.server.config, createLogger('silent'));
    await expect(Promise.all([worker.stop(), worker.stop()])).resolves.toEqual([undefined, undefined]);
    await expect(worker.stop()).resolves.toBeUndefined();
  });

  /**
   * Adds a unique rule (a schema-change job) with a runner of its own that claims only createUniqueRule jobs, so
   * the rule reaches its cutover while the jobs queued before it stay queued.
   */
  async function addRuleAhead(table: TestTable, fieldIds: string[], key: string) {
    const { config } = suite.server;
    const runner = startJobRunner({
      pool: sqlPoolOf(suite.server.prisma),
      prisma: suite.server.prisma,
      config,
      log: createLogger('silent'),
      handlers: JOB_HANDLERS.filter((handler) => handler.kind === 'createUniqueRule'),
      concurrency: 1,
      leaseSeconds: config.JOB_LEASE_SECONDS,
      pollMs: config.JOB_POLL_MS,
    });
    try {
      const rule = await addUniqueRule(suite.server, admin(), table, { fieldIds }, key);
      expect(rule.job, JSON.stringify(rule.job)).toMatchObject({
        state: 'succeeded',
        result: { schemaVersion: table.schemaVersion + 1 },
      });
      return rule;
    } finally {
      await runner.stop();
    }
  }

  it('cancels a queued job at once: cancelled, finishedAt set, event job.previewImportRows.cancelled; a second cancel is 409', async () => {
    const table = await peopleTable(suite);
    const handle = await accept(suite.server, admin(), table, CLEAN, 'waiting.csv');
    expect((await statusOf(suite.server, admin(), suite.org.orgId, handle.jobId)).state).toBe('queued');
    const response = await controlJob(suite.server, admin(), suite.org.orgId, handle.jobId, 'cancel');
    expect(response.status, response.text).toBe(200);
    const job = JobResponse.parse(response.body);
    expect(job).toMatchObject({
      jobId: handle.jobId,
      state: 'cancelled',
      startedAt: null,
      result: null,
      error: null,
      artifacts: [],
    });
    expectTimestamp(job.finishedAt);
    expect(await statusOf(suite.server, admin(), suite.org.orgId, handle.jobId)).toEqual(job);
    expect(await eventsOf(suite.server, admin(), table)).toEqual([
      { event: 'job.previewImportRows.queued', jobId: handle.jobId, fileName: 'waiting.csv' },
      { event: 'job.previewImportRows.cancelled', jobId: handle.jobId, fileName: 'waiting.csv' },
    ]);
    const again = await controlJob(suite.server, admin(), suite.org.orgId, handle.jobId, 'cancel');
    expectError(again, 409, 'JOB_STATE_CONFLICT');
    expect(again.body.error.details).toEqual({ state: 'cancelled' });
  });

  it('retries a cancelled job: queued again, and a worker runs it to the result of a job never cancelled', async () => {
    const table = await peopleTable(suite);
    const cancelled = await accept(suite.server, admin(), table, WITH_ERRORS);
    const reference = await accept(suite.server, admin(), table, WITH_ERRORS);
    expect((await controlJob(suite.server, admin(), suite.org.orgId, cancelled.jobId, 'cancel')).body.state).toBe(
      'cancelled',
    );
    const retried = await controlJob(suite.server, admin(), suite.org.orgId, cancelled.jobId, 'retry');
    expect(retried.status, retried.text).toBe(200);
    expect(JobResponse.parse(retried.body)).toMatchObject({ state: 'queued', finishedAt: null, result: null });
    const [again, clean] = await withWorker(() =>
      Promise.all([
        waitForJob(suite.server, admin(), cancelled.statusUrl),
        waitForJob(suite.server, admin(), reference.statusUrl),
      ]),
    );
    expect(again.state).toBe('succeeded');
    expect(again.result).toEqual(clean.result);
  });

  it('a member may not cancel or retry an admin’s job (403) but may their own; an admin may cancel a member’s; a viewer may not', async () => {
    const table = await peopleTable(suite);
    const member = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    const adminJob = await accept(suite.server, admin(), table, CLEAN);
    expectError(
      await controlJob(suite.server, member.apiKey, suite.org.orgId, adminJob.jobId, 'cancel'),
      403,
      'FORBIDDEN',
    );
    expectError(
      await controlJob(suite.server, viewer.apiKey, suite.org.orgId, adminJob.jobId, 'cancel'),
      403,
      'FORBIDDEN',
    );
    expect((await statusOf(suite.server, admin(), suite.org.orgId, adminJob.jobId)).state).toBe('queued');
    expect((await controlJob(suite.server, admin(), suite.org.orgId, adminJob.jobId, 'cancel')).body.state).toBe(
      'cancelled',
    );
    expectError(
      await controlJob(suite.server, member.apiKey, suite.org.orgId, adminJob.jobId, 'retry'),
      403,
      'FORBIDDEN',
    );
    expectError(
      await controlJob(suite.server, viewer.apiKey, suite.org.orgId, adminJob.jobId, 'retry'),
      403,
      'FORBIDDEN',
    );

    const own = await accept(suite.server, member.apiKey, table, CLEAN);
    expect((await controlJob(suite.server, member.apiKey, suite.org.orgId, own.jobId, 'cancel')).body.state).toBe(
      'cancelled',
    );
    expect((await controlJob(suite.server, member.apiKey, suite.org.orgId, own.jobId, 'retry')).body.state).toBe(
      'queued',
    );
    expect((await controlJob(suite.server, admin(), suite.org.orgId, own.jobId, 'cancel')).body.state).toBe(
      'cancelled',
    );

    const other = await createOrg(suite.server.prisma);
    expectError(
      await controlJob(suite.server, other.adminKey, suite.org.orgId, own.jobId, 'cancel'),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(await controlJob(suite.server, admin(), suite.org.orgId, newId(), 'cancel'), 404, 'RESOURCE_NOT_FOUND');
  });

  it('a viewer cancels and retries their own export, not another’s; a member demoted to viewer cancels but may not retry their import', async () => {
    const table = await peopleTable(suite);
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    const own = await requestExport(suite.server, viewer.apiKey, table, { format: 'csv' });
    expect(own.status, own.text).toBe(202);
    const cancelled = await controlJob(suite.server, viewer.apiKey, suite.org.orgId, own.body.jobId, 'cancel');
    expect(cancelled.status, cancelled.text).toBe(200);
    expect(cancelled.body).toMatchObject({ jobId: own.body.jobId, kind: 'exportRows', state: 'cancelled' });
    expect(
      (await controlJob(suite.server, viewer.apiKey, suite.org.orgId, own.body.jobId, 'retry')).body,
    ).toMatchObject({ state: 'queued' });
    const adminExport = await requestExport(suite.server, admin(), table, { format: 'csv' });
    expectError(
      await controlJob(suite.server, viewer.apiKey, suite.org.orgId, adminExport.body.jobId, 'cancel'),
      403,
      'FORBIDDEN',
    );

    const member = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    const preview = await accept(suite.server, member.apiKey, table, CLEAN);
    await suite.server.prisma.member.updateMany({
      where: { orgId: suite.org.orgId, userId: member.userId },
      data: { role: 'viewer' },
    });
    expect(
      (await controlJob(suite.server, member.apiKey, suite.org.orgId, preview.jobId, 'cancel')).body,
    ).toMatchObject({ state: 'cancelled' });
    const retry = await controlJob(suite.server, member.apiKey, suite.org.orgId, preview.jobId, 'retry');
    expectError(retry, 403, 'FORBIDDEN');
    expect(retry.body.error.details).toEqual({ requiredCapability: 'write' });
  });

  it('a preview whose table changed between accept and run fails with SCHEMA_VERSION_CONFLICT', async () => {
    const table = await peopleTable(suite);
    const handle = await accept(suite.server, admin(), table, CLEAN, 'late.csv');
    await addRuleAhead(table, ['Age'], `rule-${handle.jobId}`);
    expect((await statusOf(suite.server, admin(), suite.org.orgId, handle.jobId)).state).toBe('queued');
    const job = await withWorker(() => waitForJob(suite.server, admin(), handle.statusUrl));
    expect(job).toMatchObject({
      state: 'failed',
      result: null,
      artifacts: [],
      error: {
        code: 'SCHEMA_VERSION_CONFLICT',
        details: { expectedSchemaVersion: table.schemaVersion, currentSchemaVersion: table.schemaVersion + 1 },
      },
    });
    expect((await eventsOf(suite.server, admin(), table)).filter((entry) => entry.jobId === handle.jobId)).toEqual([
      { event: 'job.previewImportRows.queued', jobId: handle.jobId, fileName: 'late.csv' },
      { event: 'job.previewImportRows.failed', jobId: handle.jobId, fileName: 'late.csv' },
    ]);
  });

  it('an import whose table changed between accept and run fails with SCHEMA_VERSION_CONFLICT and inserts nothing', async () => {
    const table = await peopleTable(suite);
    const previewed = await withWorker(async () =>
      waitForJob(suite.server, admin(), (await accept(suite.server, admin(), table, CLEAN)).statusUrl),
    );
    const handle = await requestImport(suite.server, admin(), table, previewed.jobId, 'valid-rows-only');
    expect(handle.status, handle.text).toBe(202);
    await addRuleAhead(table, ['Age'], `rule-${handle.body.jobId}`);
    expect((await statusOf(suite.server, admin(), suite.org.orgId, handle.body.jobId)).state).toBe('queued');
    const job = await withWorker(() => waitForJob(suite.server, admin(), handle.body.statusUrl));
    expect(job).toMatchObject({ state: 'failed', error: { code: 'SCHEMA_VERSION_CONFLICT' } });
    expect((await suite.server.request('GET', `${table.path}/rows`, { token: admin() })).body.data).toEqual([]);
  });

  it('cancel needs an Idempotency-Key (400); the same key replays the same answer', async () => {
    const table = await peopleTable(suite);
    const handle = await accept(suite.server, admin(), table, CLEAN);
    expectError(
      await suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/jobs/${handle.jobId}/cancel`, { token: admin() }),
      400,
      'BAD_REQUEST',
    );
    const key = `cancel-${handle.jobId}`;
    const first = await controlJob(suite.server, admin(), suite.org.orgId, handle.jobId, 'cancel', key);
    expect(first.status, first.text).toBe(200);
    const replay = await controlJob(suite.server, admin(), suite.org.orgId, handle.jobId, 'cancel', key);
    expect({ status: replay.status, body: replay.body }).toEqual({ status: 200, body: first.body });
  });
});

describe('once artifacts have expired', () => {
  const suite = useServerWithOrg();

  /**
   * Moves a job's artifacts (its report and the stored upload) back by their whole lifetime: the state an expired
   * artifact is in, reached without waiting for a clock (issue 18 §5). Returns the report's new expiry.
   */
  async function expireArtifactsOf(jobId: string): Promise<string> {
    const ttl = `${suite.server.config.ARTIFACT_TTL_HOURS} hours`;
    await suite.server.prisma.$executeRaw`
      UPDATE job_artifacts SET created_at = created_at - ${ttl}::interval, expires_at = expires_at - ${ttl}::interval WHERE job_id = ${jobId}`;
    const report = await suite.server.prisma.jobArtifact.findFirstOrThrow({ where: { jobId, listed: true } });
    return report.expiresAt.toISOString();
  }

  it('answers 410 ARTIFACT_EXPIRED for the report; the preview’s upload has expired too, so it cannot be imported (410)', async () => {
    const table = await peopleTable(suite);
    const job = await waitForJob(
      suite.server,
      suite.org.adminKey,
      (await accept(suite.server, suite.org.adminKey, table, WITH_ERRORS)).statusUrl,
    );
    const url = job.artifacts[0].url;
    expect((await suite.server.request('GET', url, { token: suite.org.adminKey })).status).toBe(200);
    // ARTIFACT_TTL_HOURS (72 by default) is the lifetime the job gave its report.
    expect(Date.parse(job.artifacts[0].expiresAt) - Date.parse(job.artifacts[0].createdAt)).toBe(
      suite.server.config.ARTIFACT_TTL_HOURS * 3_600_000,
    );
    const expiredAt = await expireArtifactsOf(job.jobId);
    const response = await suite.server.request('GET', url, { token: suite.org.adminKey });
    expectError(response, 410, 'ARTIFACT_EXPIRED');
    expect(response.body.error.details).toEqual({ expiredAt });
    expectError(
      await requestImport(suite.server, suite.org.adminKey, table, job.jobId, 'valid-rows-only'),
      410,
      'ARTIFACT_EXPIRED',
    );
  });
});
