import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventEmitter } from 'node:events';
import type { Request, Response } from 'express';
import { loadConfig } from '../src/kernel/config.ts';
import type { PrismaClient } from '../src/db/prisma.ts';
import { issueApiKeySecret } from '../src/identity/secrets.ts';
import { createLogger } from '../src/kernel/log.ts';
import { inFlightLimit } from '../src/http/middleware/in-flight.ts';
import { MemorySlotStore } from '../src/http/middleware/slot-stores.ts';
import { expectError } from './helpers/expectations.ts';
import { createOrg, createTeamKey, type TestOrg } from './helpers/factories.ts';
import { startTestServer, type ApiResponse, type TestServer } from './helpers/server.ts';
import { createSlowTable, holdTable, slowRowsPath, waitForScans } from './helpers/slow-table.ts';
import type { TestTable } from './helpers/workspace.ts';

/**
 * Issue 18 §1-2: in-flight limits per credential and per org held below the pool, a bounded queue then 429, and
 * limits keyed on the resolved credential (or the client address), never on the Authorization header's text.
 * The slow reads wait on a lock the test holds on their table (holdTable): each holds its pooled connection for as
 * long as the test needs, whatever the machine's load, and costs no CPU.
 */

function expectRateLimited(response: ApiResponse): void {
  expectError(response, 429, 'RATE_LIMITED');
  expect(response.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
}

/** Every upper/lower-case spelling of "Bearer": 2^6 = 64. */
const BEARER_SPELLINGS = Array.from({ length: 64 }, (_item, mask) =>
  [...'bearer'].map((letter, index) => ((mask >> index) & 1 ? letter.toUpperCase() : letter)).join(''),
);

describe('one credential flooding slow reads', () => {
  let server: TestServer;
  let orgA: TestOrg;
  let orgB: TestOrg;
  let table: TestTable;

  beforeAll(async () => {
    // CONCURRENCY_LIMIT 16 is the old default: on a pool of 10 it is held to 5 in flight.
    server = await startTestServer({
      DATABASE_POOL_SIZE: '10',
      CONCURRENCY_LIMIT: '16',
      ORG_CONCURRENCY_LIMIT: '6',
      CONCURRENCY_QUEUE: '16',
      CONCURRENCY_QUEUE_WAIT_MS: '60000',
      QUERY_TIMEOUT_MS: '120000',
      RUN_WORKER: 'false',
    });
    orgA = await createOrg(server.prisma);
    orgB = await createOrg(server.prisma);
    table = await createSlowTable(server, orgA, 100);
  }, 60_000);
  afterAll(() => server?.close());

  it("cannot hold the pool: another org's simple read completes while every flooding read is still running", async () => {
    const hold = await holdTable(server, table);
    let settled = 0;
    const flood = Array.from({ length: 12 }, () =>
      server.request('GET', slowRowsPath(table), { token: orgA.adminKey }).finally(() => {
        settled += 1;
      }),
    );
    const running = await waitForScans(server, table, (count) => count >= 5);
    expect(running).toBe(5);
    const other = await server.request('GET', `/v1/orgs/${orgB.orgId}/databases`, { token: orgB.adminKey });
    expect(other.status, other.text).toBe(200);
    expect(settled).toBe(0);
    expect(await waitForScans(server, table, () => true)).toBe(5);
    await hold.release();
    const statuses = (await Promise.all(flood)).map((response) => response.status);
    expect(statuses).toEqual(Array(12).fill(200));
  }, 120_000);
});

describe('the in-flight queue and the org limit', () => {
  let server: TestServer;
  let org: TestOrg;
  let table: TestTable;

  beforeAll(async () => {
    server = await startTestServer({
      DATABASE_POOL_SIZE: '10',
      CONCURRENCY_LIMIT: '1',
      ORG_CONCURRENCY_LIMIT: '2',
      CONCURRENCY_QUEUE: '1',
      CONCURRENCY_QUEUE_WAIT_MS: '60000',
      QUERY_TIMEOUT_MS: '120000',
      RUN_WORKER: 'false',
    });
    org = await createOrg(server.prisma);
    table = await createSlowTable(server, org, 100);
  }, 60_000);
  afterAll(() => server?.close());

  it('queues one request beyond the limit and answers the next 429 RATE_LIMITED with Retry-After at once', async () => {
    const hold = await holdTable(server, table);
    const holding = server.request('GET', slowRowsPath(table), { token: org.adminKey });
    await waitForScans(server, table, (count) => count === 1);
    const later = [
      server.request('GET', slowRowsPath(table), { token: org.adminKey }),
      server.request('GET', slowRowsPath(table), { token: org.adminKey }),
    ];
    // Whichever arrived second found the queue full and is answered while the first still holds the slot.
    const refused = await Promise.race(later);
    expectRateLimited(refused);
    expect(Object.keys(refused.body.error).sort()).toEqual(['code', 'message', 'requestId']);
    await hold.release();
    // The queued one ran after the first.
    expect((await Promise.all(later)).map((response) => response.status).sort()).toEqual([200, 429]);
    expect((await holding).status).toBe(200);
  }, 120_000);

  it("counts every credential of an org against the org limit, and no other org's", async () => {
    const teamKey = await createTeamKey(server.prisma, org, 'read');
    const other = await createOrg(server.prisma);
    const hold = await holdTable(server, table);
    const first = server.request('GET', slowRowsPath(table), { token: org.adminKey });
    const second = server.request('GET', slowRowsPath(table), { token: teamKey });
    await waitForScans(server, table, (count) => count === 2);
    // Org limit 2 reached by two credentials; a third credential of the same org waits in the org's queue (1)...
    const thirdKey = await createTeamKey(server.prisma, org, 'read');
    const fourthKey = await createTeamKey(server.prisma, org, 'read');
    const queuedOrRefused = [
      server.request('GET', `/v1/orgs/${org.orgId}/databases`, { token: thirdKey }),
      server.request('GET', `/v1/orgs/${org.orgId}/databases`, { token: fourthKey }),
    ];
    expectRateLimited(await Promise.race(queuedOrRefused));
    // ...while another org is untouched.
    const elsewhere = await server.request('GET', `/v1/orgs/${other.orgId}/databases`, { token: other.adminKey });
    expect(elsewhere.status, elsewhere.text).toBe(200);
    await hold.release();
    const answers = await Promise.all(queuedOrRefused);
    expect(answers.map((response) => response.status).sort()).toEqual([200, 429]);
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
  }, 120_000);
});

describe('limits keyed on the resolved credential', () => {
  let server: TestServer;
  let org: TestOrg;

  beforeAll(async () => {
    server = await startTestServer({ RATE_LIMIT_RPS: '5', RATE_LIMIT_BURST: '0' });
    org = await createOrg(server.prisma);
  });
  afterAll(() => server?.close());

  it('counts 64 spellings of "Bearer" with one key against that one credential', async () => {
    expect(new Set(BEARER_SPELLINGS).size).toBe(64);
    const responses = await Promise.all(
      BEARER_SPELLINGS.map((scheme) =>
        server.request('GET', '/v1/preferences/options', { headers: { authorization: `${scheme} ${org.adminKey}` } }),
      ),
    );
    const statuses = responses.map((response) => response.status);
    expect(statuses.every((status) => status === 200 || status === 429)).toBe(true);
    // 5 a second: the 64 requests take a few seconds at most, nowhere near 64 allowances.
    expect(statuses.filter((status) => status === 200).length).toBeLessThanOrEqual(20);
    expectRateLimited(responses.find((response) => response.status === 429)!);
  });

  it('limits random well-formed keys by the client address: 429 once the address has spent its rate', async () => {
    const responses = await Promise.all(
      Array.from({ length: 40 }, () =>
        server.request('GET', '/v1/preferences/options', { token: issueApiKeySecret().token }),
      ),
    );
    const statuses = responses.map((response) => response.status);
    expect(statuses.every((status) => status === 401 || status === 429)).toBe(true);
    expect(statuses.filter((status) => status === 401).length).toBeLessThanOrEqual(20);
    expectRateLimited(responses.find((response) => response.status === 429)!);
  });

  it('gives another credential its own allowance while one is limited', async () => {
    const other = await createOrg(server.prisma);
    const response = await server.request('GET', '/v1/preferences/options', { token: other.adminKey });
    expect(response.status, response.text).toBe(200);
  });
});

describe('a client that leaves before its slot is taken', () => {
  it('holds no slot: its response closed before the limit was reached, so nothing would ever give one back', async () => {
    const store = new MemorySlotStore();
    const config = loadConfig({}, { CONCURRENCY_LIMIT: '1', ORG_CONCURRENCY_LIMIT: '1', DATABASE_POOL_SIZE: '10' });
    const limit = inFlightLimit({} as PrismaClient, config, createLogger('silent'), store);
    // The response of a client that hung up while its credential was read: already closed, 'close' already emitted.
    const res = Object.assign(new EventEmitter(), {
      closed: true,
      locals: { limitKeys: { credential: 'api-key:K', org: 'org:O' } },
    });
    let nextCalled = false;
    await limit({} as Request, res as unknown as Response, () => {
      nextCalled = true;
    });
    expect(nextCalled).toBe(false);
    expect(store.take('cred:api-key:K', 1)).not.toBeNull();
    expect(store.take('org:O', 1)).not.toBeNull();
  });
});
