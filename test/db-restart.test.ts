import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { rowsTableOf } from '../src/data/identifiers.ts';
import { ensureDatabase } from '../src/db/database.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded.ts';
import { migrate } from '../src/db/migrate.ts';
import { createPrisma, type PrismaClient } from '../src/db/prisma.ts';
import { createLogger } from '../src/kernel/log.ts';
import { databasePath, rowOf } from './helpers/backups.ts';
import { createOrg, idempotencyKey, type TestOrg } from './helpers/factories.ts';
import { waitForJob } from './helpers/jobs.ts';
import { startApiProcess, type ApiProcess } from './helpers/processes.ts';
import { createTable } from './helpers/workspace.ts';

/**
 * Issue 26 item 2: PostgreSQL restarts (a fast shutdown, and an immediate one, which PostgreSQL treats as a crash)
 * under a running job and under request load. The service is `npm start` with its worker, as operators run it, over
 * a PostgreSQL this file starts itself: restarting the shared test server would break every other test file.
 */
const silent = createLogger('silent');
let postgres: EmbeddedPostgres;
let dataDir: string;
let port: number;
let prisma: PrismaClient;
let service: ApiProcess;
let org: TestOrg;
let url: string;

beforeAll(async () => {
  dataDir = join(mkdtempSync(join(tmpdir(), 'wds-fault-pg-')), 'cluster');
  postgres = await startEmbeddedPostgres({ dataDir });
  port = Number(new URL(postgres.url).port);
  url = await ensureDatabase(postgres.url, 'wds');
  await migrate(url);
  prisma = createPrisma(url, 2, 0, silent);
  service = await startApiProcess({ url, name: 'wds', drop: async () => undefined }, prisma, {
    RUN_WORKER: 'true',
    JOB_POLL_MS: '100',
    JOB_LEASE_SECONDS: '3',
    DATABASE_POOL_SIZE: '5',
    RATE_LIMIT_RPS: '0',
    CONCURRENCY_LIMIT: '0',
    ORG_CONCURRENCY_LIMIT: '0',
    BACKUP_DIR: mkdtempSync(join(tmpdir(), 'wds-fault-backups-')),
  });
  org = await createOrg(prisma);
}, 180_000);

afterAll(async () => {
  await service?.stop();
  await prisma?.$disconnect().catch(() => undefined);
  await postgres?.stop();
});

function alive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A connection of the test's own that survives the restart it watches (its error is expected, not thrown). */
async function connection(): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/** Stops PostgreSQL, checks how the service answers while it is down, and starts it again on the same port. */
async function restart(mode: 'fast' | 'immediate'): Promise<void> {
  await postgres.stop(mode);
  const down = await service.request('GET', '/v1/me/preferences', { token: org.adminKey });
  expect(down.status, down.text).toBe(503);
  expect(down.body.error.code).toBe('DEPENDENCY_UNAVAILABLE');
  expect(down.body.error.details).toEqual({ dependency: 'database' });
  expect(down.headers.get('retry-after')).toBe('2');
  postgres = await startEmbeddedPostgres({ dataDir, port });
}

async function recovered(): Promise<void> {
  await vi.waitFor(
    async () => {
      const response = await service.request('GET', '/v1/me/preferences', { token: org.adminKey });
      if (response.status !== 200) throw new Error(`not recovered yet: ${response.status}`);
    },
    { timeout: 30_000, interval: 50 },
  );
}

describe('a PostgreSQL restart while a job holds its connection', () => {
  it.each([
    ['an export', 'fast', (table: { path: string }) => ({ path: `${table.path}/exports`, body: { format: 'csv' } })],
    [
      'a backup',
      'immediate',
      (table: { orgId: string; databaseId: string }) => ({
        path: `${databasePath(table.orgId, table.databaseId)}/backups`,
      }),
    ],
  ] as const)(
    '%s survives a %s restart: the process lives, answers 503 meanwhile, and the job resumes',
    async (_what, mode, request) => {
      const table = await createTable(service, org, [{ name: 'Name', type: 'text' }]);
      for (const name of ['Ada', 'Grace', 'Edsger']) await rowOf(service, org.adminKey, table, { Name: name });
      // The job's COPY of the rows waits on this lock, inside the job's transaction on its held connection.
      const hold = await connection();
      await hold.query('BEGIN');
      await hold.query(`LOCK TABLE ${rowsTableOf(table.databaseId, table.tableId)} IN ACCESS EXCLUSIVE MODE`);
      const { path, ...body } = request(table as never) as { path: string; body?: unknown };
      const accepted = await service.request('POST', path, {
        token: org.adminKey,
        idempotencyKey: idempotencyKey(),
        ...body,
      });
      expect(accepted.status, accepted.text).toBe(202);
      await vi.waitFor(
        async () => {
          const { rows } = await hold.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
          );
          if (rows[0]!.n === 0) throw new Error('the job does not wait on the lock yet');
        },
        { timeout: 30_000, interval: 25 },
      );

      await restart(mode);
      await hold.end().catch(() => undefined);
      expect(alive(service.pid)).toBe(true);
      await recovered();
      const job = await waitForJob(service, org.adminKey, accepted.body.statusUrl, undefined, 60_000);
      expect(job.state).toBe('succeeded');
      expect(alive(service.pid)).toBe(true);
    },
    150_000,
  );
});

describe('a PostgreSQL restart under request load', () => {
  it('every answer is 200 or 503 DEPENDENCY_UNAVAILABLE with Retry-After, and the service recovers by itself', async () => {
    const table = await createTable(service, org, [{ name: 'Name', type: 'text' }]);
    await rowOf(service, org.adminKey, table, { Name: 'Ada' });
    const answers: { status: number; code?: string; retryAfter: string | null }[] = [];
    let stop = false;
    const load = async () => {
      while (!stop) {
        const response = await service.request('GET', `${table.path}/rows`, { token: org.adminKey });
        answers.push({
          status: response.status,
          code: response.body?.error?.code,
          retryAfter: response.headers.get('retry-after'),
        });
        await sleep(10);
      }
    };
    const clients = Array.from({ length: 4 }, load);
    // The load is under way (answers coming back) before the restart, and goes on for a few answers after it.
    await expect.poll(() => answers.length, { timeout: 30_000, interval: 10 }).toBeGreaterThanOrEqual(8);
    await restart('immediate');
    await recovered();
    const recoveredAt = answers.length;
    await expect
      .poll(() => answers.slice(recoveredAt).filter((answer) => answer.status === 200).length, {
        timeout: 30_000,
        interval: 10,
      })
      .toBeGreaterThanOrEqual(8);
    stop = true;
    await Promise.all(clients);
    expect(alive(service.pid)).toBe(true);
    const unexpected = answers.filter(
      (answer) =>
        answer.status !== 200 &&
        !(answer.status === 503 && answer.code === 'DEPENDENCY_UNAVAILABLE' && answer.retryAfter === '2'),
    );
    expect(unexpected).toEqual([]);
    expect(answers.some((answer) => answer.status === 503)).toBe(true);
    expect(answers.at(-1)?.status).toBe(200);
  }, 150_000);
});
