import { spawn } from 'node:child_process';
import { once } from 'node:events';
import pg from 'pg';
import { afterEach, expect, it } from 'vitest';
import { columnOf, rowsTableOf } from '../src/data/identifiers.ts';
import { schemaChangeApi } from './helpers/schema-changes.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createTable } from './helpers/workspace.ts';

/**
 * An add_index whose worker dies inside CREATE INDEX CONCURRENTLY (and whose session dies with it) leaves an
 * INVALID index behind; the job resumes on another worker, drops the leftover and builds the index again. The
 * server runs no worker; the build is held by a transaction holding ROW EXCLUSIVE on the table, which
 * CREATE INDEX CONCURRENTLY waits for after it has registered the (still invalid) index — no sleeps.
 */
const suite = useServerWithOrg({ RUN_WORKER: 'false' });
const { apply, accepted, finished, schemaOf } = schemaChangeApi(suite);
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup().catch(() => undefined);
});

function spawnWorker(leaseSeconds: number): { kill(): Promise<void> } {
  const child = spawn(process.execPath, ['dist/worker.js'], {
    detached: true,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      DATABASE_URL: suite.server.database.url,
      JOB_LEASE_SECONDS: String(leaseSeconds),
      LOG_LEVEL: 'silent',
      JOB_POLL_MS: '50',
      NODE_ENV: 'test',
    },
  });
  const exited = once(child, 'exit');
  const worker = {
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGKILL');
      await exited;
    },
  };
  cleanups.push(worker.kill);
  return worker;
}

async function waitUntil(check: () => Promise<boolean>, what: string): Promise<void> {
  await expect.poll(check, { timeout: 30_000, interval: 0, message: `${what}: not in time` }).toBe(true);
}

const buildBackends = () => suite.server.prisma.$queryRaw<{ pid: number; waiting: boolean }[]>`
  SELECT pid, wait_event_type = 'Lock' AS waiting FROM pg_stat_activity
   WHERE datname = current_database() AND query LIKE 'CREATE INDEX CONCURRENTLY%'`;

it('a build killed mid-CREATE INDEX CONCURRENTLY resumes: the INVALID leftover is dropped and the index built again', async () => {
  const table = await createTable(suite.server, suite.org, [{ name: 'N', type: 'integer' }]);
  const rows = rowsTableOf(table.databaseId, table.tableId);
  await suite.server.prisma.$executeRawUnsafe(`INSERT INTO ${rows} (id, version, created_at, updated_at, ${columnOf(table.fields.N!)})
    SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), g % 97 FROM generate_series(1, 5000) AS g`);
  const indexes = () => suite.server.prisma.$queryRaw<{ valid: boolean }[]>`
    SELECT i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
     WHERE i.indrelid = to_regclass(${rows}) AND c.relname LIKE 'i\\_%'`;

  const writer = new pg.Client({ connectionString: suite.server.database.url });
  await writer.connect();
  cleanups.push(() => writer.end());
  await writer.query('BEGIN');
  await writer.query(`LOCK TABLE ${rows} IN ROW EXCLUSIVE MODE`);

  const handle = accepted(await apply(table, { kind: 'add_index', fields: [{ field: 'N', direction: 'desc' }] }));
  const first = spawnWorker(1);
  await waitUntil(
    async () => (await buildBackends()).some((backend) => backend.waiting),
    'the build waiting for the writer',
  );
  await first.kill();
  await suite.server.prisma
    .$queryRaw`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'CREATE INDEX CONCURRENTLY%'`;
  await waitUntil(async () => (await buildBackends()).length === 0, 'the build’s session gone');
  expect(await indexes()).toEqual([{ valid: false }]);
  expect((await schemaOf(table)).indexes).toEqual([expect.objectContaining({ state: 'building', origin: 'explicit' })]);
  await writer.query('COMMIT');

  spawnWorker(30);
  const job = await finished(handle.statusUrl);
  expect(job.state, JSON.stringify(job)).toBe('succeeded');
  expect(job.result).toEqual({ indexId: expect.any(String), schemaVersion: table.schemaVersion + 1 });
  expect(await indexes()).toEqual([{ valid: true }]);
  expect((await schemaOf(table)).indexes).toEqual([
    expect.objectContaining({ id: (job.result as { indexId: string }).indexId, state: 'ready' }),
  ]);
});
