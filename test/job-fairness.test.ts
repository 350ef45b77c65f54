import { describe, expect, it } from 'vitest';
import { startWorker } from '../src/jobs/start-worker.ts';
import { createLogger } from '../src/kernel/log.ts';
import { JobResponse } from '../src/contracts/jobs.ts';
import { expectError } from './helpers/expectations.ts';
import { createOrg, idempotencyKey, type TestOrg } from './helpers/factories.ts';
import { controlJob, mappingOf, requestPreview, waitForJob } from './helpers/jobs.ts';
import type { TestServer } from './helpers/server.ts';
import { useServerWithOrg, type Suite } from './helpers/suite.ts';
import { createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Issue 18: workers claim jobs fairly across organisations, and each org's queue has a cap (429 CAPACITY_LIMIT).
 * The server runs no worker, so the tests decide when jobs are claimed; they observe job states, never time.
 */
const QUEUE_LIMIT = 6;
const CSV = 'Name\nAda\nBob\n';

const nameTable = (server: TestServer, org: TestOrg) => createTable(server, org, [{ name: 'Name', type: 'text' }]);

function preview(server: TestServer, org: TestOrg, table: TestTable, key = idempotencyKey()) {
  return requestPreview(server, org.adminKey, table, { content: CSV, mapping: mappingOf(table, ['Name']) }, key);
}

async function enqueue(
  server: TestServer,
  org: TestOrg,
  table: TestTable,
): Promise<{ jobId: string; statusUrl: string }> {
  const response = await preview(server, org, table);
  expect(response.status, response.text).toBe(202);
  return response.body;
}

async function queuedJobIds(server: TestServer, org: TestOrg): Promise<string[]> {
  const response = await server.request('GET', `/v1/orgs/${org.orgId}/jobs?state=queued&limit=100`, {
    token: org.adminKey,
  });
  expect(response.status, response.text).toBe(200);
  return response.body.data.map((job: { jobId: string }) => job.jobId);
}

describe('claiming across organisations', () => {
  const suite: Suite = useServerWithOrg({ RUN_WORKER: 'false', JOB_QUEUE_LIMIT_PER_ORG: String(QUEUE_LIMIT) });

  it("claims org B's one job right after org A's first, before A's backlog drains", async () => {
    const { server } = suite;
    const orgA = suite.org;
    const orgB = await createOrg(server.prisma);
    const [tableA, tableB] = [await nameTable(server, orgA), await nameTable(server, orgB)];
    const backlog = [];
    for (let index = 0; index < 5; index += 1) backlog.push(await enqueue(server, orgA, tableA));
    const lone = await enqueue(server, orgB, tableB);

    // One job at a time, so claims are strictly ordered and each job's startedAt records its place in that order.
    const worker = startWorker(server.prisma, { ...server.config, JOB_CONCURRENCY: 1 }, createLogger('silent'));
    try {
      const finished = [];
      for (const handle of [...backlog, lone])
        finished.push(
          JobResponse.parse(
            await waitForJob(server, handle === lone ? orgB.adminKey : orgA.adminKey, handle.statusUrl),
          ),
        );
      expect(finished.map((job) => job.state)).toEqual(Array(6).fill('succeeded'));
      const claimOrder = [...finished]
        .sort((left, right) => left.startedAt!.localeCompare(right.startedAt!))
        .map((job) => job.jobId);
      // First come, first served would run B's job last, after all five of A's.
      expect(claimOrder).toEqual([backlog[0]!.jobId, lone.jobId, ...backlog.slice(1).map((handle) => handle.jobId)]);
    } finally {
      await worker.stop();
    }
  });
});

describe('the per-org queue cap', () => {
  const suite: Suite = useServerWithOrg({ RUN_WORKER: 'false', JOB_QUEUE_LIMIT_PER_ORG: String(QUEUE_LIMIT) });

  it('refuses one job beyond the cap with 429 CAPACITY_LIMIT and Retry-After, and changes nothing', async () => {
    const { server, org } = suite;
    const table = await nameTable(server, org);
    for (let index = 0; index < QUEUE_LIMIT; index += 1) await enqueue(server, org, table);
    const before = await queuedJobIds(server, org);
    const activityBefore = await server.request('GET', `/v1/orgs/${org.orgId}/activity?limit=100`, {
      token: org.adminKey,
    });

    const key = idempotencyKey();
    const refused = await preview(server, org, table, key);
    expectError(refused, 429, 'CAPACITY_LIMIT');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(refused.body.error.details).toEqual({ limit: QUEUE_LIMIT, queued: QUEUE_LIMIT });
    expect((await queuedJobIds(server, org)).sort()).toEqual([...before].sort());
    const activityAfter = await server.request('GET', `/v1/orgs/${org.orgId}/activity?limit=100`, {
      token: org.adminKey,
    });
    expect(activityAfter.body.data).toEqual(activityBefore.body.data);

    // The cap is per organisation: another org still enqueues.
    const other = await createOrg(server.prisma);
    expect((await preview(server, other, await nameTable(server, other))).status).toBe(202);

    // The refusal is transient and not recorded: once a queued job leaves the queue, the same key is accepted.
    const cancelled = await controlJob(server, org.adminKey, org.orgId, before[0]!, 'cancel');
    expect(cancelled.status, cancelled.text).toBe(200);
    const accepted = await preview(server, org, table, key);
    expect(accepted.status, accepted.text).toBe(202);

    // Retrying a job puts it back in the queue, so the cap applies to it too.
    const retried = await controlJob(server, org.adminKey, org.orgId, before[0]!, 'retry');
    expectError(retried, 429, 'CAPACITY_LIMIT');
    expect(
      JobResponse.parse(
        (await server.request('GET', `/v1/orgs/${org.orgId}/jobs/${before[0]}`, { token: org.adminKey })).body,
      ).state,
    ).toBe('cancelled');
  });
});
