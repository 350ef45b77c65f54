import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../src/http/app.ts';
import { loadConfig, type Config } from '../src/kernel/config.ts';
import { connectRedis } from '../src/db/redis.ts';
import { createLogger } from '../src/kernel/log.ts';
import { expectError } from './helpers/expectations.ts';
import { createOrg, type TestOrg } from './helpers/factories.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { createSlowTable, holdTable, slowRowsPath, waitForScans } from './helpers/slow-table.ts';
import type { TestTable } from './helpers/workspace.ts';
import { checkedFetch } from './helpers/contract.ts';

/**
 * DESIGN §5: with REDIS_URL, rate and in-flight limits are shared by every process. Two app instances over one
 * database stand for two processes; Redis runs on 127.0.0.1:6379 (REDIS_URL overrides).
 */
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const logger = createLogger('silent');

let base: TestServer;
let org: TestOrg;
const opened: { server: Server; redis: Redis }[] = [];

/** One more "process": the service's app over the test database, its limits in Redis at `redisUrl`. */
async function processOf(overrides: Partial<Record<keyof Config, string>>, redisUrl = REDIS_URL): Promise<string> {
  const config = loadConfig(
    {},
    {
      DATABASE_URL: base.database.url,
      LOG_LEVEL: 'silent',
      DATABASE_POOL_SIZE: '10',
      QUERY_TIMEOUT_MS: '120000',
      REDIS_URL: redisUrl,
      ...overrides,
    },
  );
  const redis = connectRedis(redisUrl, logger);
  // Commands sent before the connection is ready fail at once and count per process (by design): wait for it.
  if (redisUrl === REDIS_URL) await once(redis, 'ready');
  const server = createServer(createApp({ prisma: base.prisma, config, logger, redis }));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  opened.push({ server, redis });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function get(url: string, path: string, token: string) {
  const response = await checkedFetch(`${url}${path}`, { headers: { authorization: `Bearer ${token}` } });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined, text };
}

beforeAll(async () => {
  base = await startTestServer({ DATABASE_POOL_SIZE: '10', RUN_WORKER: 'false', QUERY_TIMEOUT_MS: '120000' });
  org = await createOrg(base.prisma);
}, 60_000);
afterAll(async () => {
  for (const { server, redis } of opened) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    redis.disconnect();
  }
  await base?.close();
});

describe('limits shared through Redis', () => {
  let table: TestTable;
  beforeAll(async () => {
    table = await createSlowTable(base, org, 100);
  }, 60_000);

  it("counts one credential's rate across processes", async () => {
    const limits = { RATE_LIMIT_RPS: '1', RATE_LIMIT_BURST: '0', CONCURRENCY_LIMIT: '0' };
    const [one, two] = [await processOf(limits), await processOf(limits)];
    const { adminKey } = await createOrg(base.prisma);
    expect((await get(one, '/v1/preferences/options', adminKey)).status).toBe(200);
    const refused = await get(two, '/v1/preferences/options', adminKey);
    expectError(refused as never, 429, 'RATE_LIMITED');
    expect(refused.headers.get('retry-after')).toBe('1');
  });

  it("counts one credential's requests in flight across processes", async () => {
    const limits = { RATE_LIMIT_RPS: '0', CONCURRENCY_LIMIT: '1', CONCURRENCY_QUEUE: '0' };
    const [one, two] = [await processOf(limits), await processOf(limits)];
    // The read waits on the test's lock on its table, holding its slot until the lock is released.
    const hold = await holdTable(base, table);
    const holding = get(one, slowRowsPath(table), org.adminKey);
    await waitForScans(base, table, (count) => count === 1);
    const refused = await get(two, `/v1/orgs/${org.orgId}/databases`, org.adminKey);
    expectError(refused as never, 429, 'RATE_LIMITED');
    await hold.release();
    expect((await holding).status).toBe(200);
    // The slot was given back: the other process admits the credential again.
    expect((await get(two, `/v1/orgs/${org.orgId}/databases`, org.adminKey)).status).toBe(200);
  }, 120_000);

  it('falls back to counting per process, without holding requests, when Redis is unreachable', async () => {
    const limits = { RATE_LIMIT_RPS: '1', RATE_LIMIT_BURST: '0', CONCURRENCY_LIMIT: '1' };
    const down = await processOf(limits, 'redis://127.0.0.1:1');
    const { adminKey } = await createOrg(base.prisma);
    expect((await get(down, '/v1/preferences/options', adminKey)).status).toBe(200);
    expectError((await get(down, '/v1/preferences/options', adminKey)) as never, 429, 'RATE_LIMITED');
  });
});
