import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { Config } from '../src/kernel/config.ts';
import { rowsTableOf, schemaOf } from '../src/data/identifiers.ts';
import { startWorker } from '../src/jobs/start-worker.ts';
import { createLogger } from '../src/kernel/log.ts';
import {
  backupDir,
  backupWorkspace,
  databasePath,
  databaseVersion,
  pictureOf,
  requestRestore,
  rowOf,
  runBackup,
  strayStagingSchemas,
} from './helpers/backups.ts';
import { expectError } from './helpers/expectations.ts';
import { idempotencyKey } from './helpers/factories.ts';
import {
  holdJobUpdate,
  holdTables,
  lockWaitOn,
  lockWaiter,
  waitFor,
  withClient,
  type JobUpdateHold,
} from './helpers/job-holds.ts';
import { activityOf, controlJob, waitForJob } from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createTable } from './helpers/workspace.ts';

/**
 * Cancelled backups and restores leave nothing behind (issue 16): no backup listed, no files, no staging schema,
 * the live database as it was. The server runs no worker: each test starts its own in-process one when the job
 * should run, and holds the job with a lock of its own, so that the cancel lands at a known point on any machine.
 */
const dir = backupDir();
// The restore test holds a cancel inside its UPDATE while the restore verifies and builds; on a loaded machine
// that may outlast the 5 s request budget, which would fail the cancel instead of the test's assertions.
const suite = useServerWithOrg({ RUN_WORKER: 'false', BACKUP_DIR: dir, QUERY_TIMEOUT_MS: '60000' });
const admin = () => suite.org.adminKey;
const server = () => suite.server;
const orgId = () => suite.org.orgId;

async function withWorker<T>(config: Partial<Config>, work: () => Promise<T>): Promise<T> {
  const worker = startWorker(server().prisma, { ...server().config, ...config }, createLogger('silent'));
  try {
    return await work();
  } finally {
    await worker.stop();
  }
}

const withDatabase = <T>(work: (client: pg.Client) => Promise<T>) => withClient(server().database.url, work);

async function requestBackup(databaseId: string): Promise<{ jobId: string; statusUrl: string }> {
  const response = await server().request('POST', `${databasePath(orgId(), databaseId)}/backups`, {
    token: admin(),
    idempotencyKey: idempotencyKey(),
  });
  expect(response.status, response.text).toBe(202);
  return response.body;
}

async function backupsOf(databaseId: string): Promise<{ id: string }[]> {
  const response = await server().request('GET', `${databasePath(orgId(), databaseId)}/backups`, { token: admin() });
  expect(response.status, response.text).toBe(200);
  return response.body.data;
}

async function eventsOf(databaseId: string, category: 'backups' | 'restores'): Promise<string[]> {
  return (await activityOf(server(), admin(), orgId(), { databaseId, category })).map((entry) => entry.event);
}

/**
 * A running job learns of a cancel from its heartbeat (every third of the lease). Waits for a heartbeat that began
 * after the cancel committed, and then for the next one: by then the worker has long handled the first's answer.
 */
async function heartbeatsAfterNow(client: pg.Client, jobId: string): Promise<void> {
  let since = (await client.query<{ now: string }>('SELECT clock_timestamp()::text AS now')).rows[0]!.now;
  for (let beat = 0; beat < 2; beat += 1) {
    await waitFor(
      client,
      'SELECT count(*)::int AS n FROM public.jobs WHERE id = $1::bpchar AND heartbeat_at > $2::timestamptz',
      [jobId, since],
    );
    since = (
      await client.query<{ at: string }>('SELECT heartbeat_at::text AS at FROM public.jobs WHERE id = $1::bpchar', [
        jobId,
      ])
    ).rows[0]!.at;
  }
}

/** 1 when the schema (a quoted identifier, as `schemaOf` gives it) exists, else 0. */
const SCHEMA_EXISTS = 'SELECT (to_regnamespace($1) IS NOT NULL)::int AS n';

/** Unlocks every hold before removing any: removing a trigger waits for the transactions another hold keeps waiting. */
async function releaseAll(holds: JobUpdateHold[]): Promise<void> {
  for (const hold of holds) await hold.unlock();
  for (const hold of holds) await hold.release();
}

describe('cancelling a backup', () => {
  it('cancels a queued one at once: no backup, no files, and a worker started later never runs it', async () => {
    const table = await createTable(server(), suite.org, [{ name: 'Name', type: 'text' }]);
    await rowOf(server(), admin(), table, { Name: 'Ada' });
    const job = await requestBackup(table.databaseId);

    const cancel = await controlJob(server(), admin(), orgId(), job.jobId, 'cancel');
    expect(cancel.status, cancel.text).toBe(200);
    expect(cancel.body).toMatchObject({
      jobId: job.jobId,
      kind: 'runDatabaseBackup',
      state: 'cancelled',
      startedAt: null,
      result: null,
      error: null,
    });
    expectError(await controlJob(server(), admin(), orgId(), job.jobId, 'cancel'), 409, 'JOB_STATE_CONFLICT');
    expect(await backupsOf(table.databaseId)).toEqual([]);
    expect(existsSync(join(dir, orgId(), table.databaseId))).toBe(false);
    expect(await eventsOf(table.databaseId, 'backups')).toEqual([
      'job.runDatabaseBackup.queued',
      'job.runDatabaseBackup.cancelled',
    ]);

    // Claims go in queue order, so a later backup of the same database that finishes proves the cancelled one was skipped.
    const later = await withWorker({}, () => runBackup(server(), admin(), orgId(), table.databaseId));
    expect(later.state, JSON.stringify(later)).toBe('succeeded');
    const status = await server().request('GET', job.statusUrl, { token: admin() });
    expect(status.body).toMatchObject({ state: 'cancelled', startedAt: null, result: null, error: null });
    expect((await backupsOf(table.databaseId)).map((backup) => backup.id)).toEqual([later.jobId]);
  });

  it('cancels a running one between tables and removes the files it had written', async () => {
    const first = await createTable(server(), suite.org, [{ name: 'Name', type: 'text' }]);
    const second = await createTable(server(), suite.org, [{ name: 'Name', type: 'text' }], {
      databaseId: first.databaseId,
    });
    await rowOf(server(), admin(), first, { Name: 'Ada' });
    await rowOf(server(), admin(), second, { Name: 'Grace' });
    const databaseId = first.databaseId;
    // A backup copies tables in id order. Its COPY of the first waits on this lock, after it has written the catalog.
    const [head, tail] = [first.tableId, second.tableId].sort().map((tableId) => rowsTableOf(databaseId, tableId)) as [
      string,
      string,
    ];
    const holds = [await holdTables(server().database.url, [head]), await holdTables(server().database.url, [tail])];
    // A 2 s lease: heartbeats every 667 ms bring the cancel to the worker.
    const done = await withWorker({ JOB_LEASE_SECONDS: 2 }, async () => {
      try {
        const job = await requestBackup(databaseId);
        await holds[0]!.reached();
        expect(existsSync(join(dir, orgId(), databaseId, job.jobId, 'catalog.json.gz'))).toBe(true);
        const cancel = await controlJob(server(), admin(), orgId(), job.jobId, 'cancel');
        expect(cancel.status, cancel.text).toBe(200);
        expect(cancel.body).toMatchObject({ jobId: job.jobId, state: 'running' });
        await withDatabase(async (client) => {
          await heartbeatsAfterNow(client, job.jobId);
          await holds[0]!.release();
          // The between-tables check stops the backup before the second table, which is still locked: a backup
          // that went on would wait for it, and this would see that instead of the job's end.
          await waitFor(
            client,
            `SELECT (NOT EXISTS (SELECT 1 FROM public.jobs WHERE id = $1::bpchar AND state = 'running') OR ${lockWaitOn([tail])})::int AS n`,
            [job.jobId],
          );
        });
        const status = await server().request('GET', job.statusUrl, { token: admin() });
        expect(status.status, status.text).toBe(200);
        return status.body;
      } finally {
        for (const hold of holds) await hold.release();
      }
    });
    expect(done).toMatchObject({ kind: 'runDatabaseBackup', state: 'cancelled', result: null, error: null });
    expect(await backupsOf(databaseId)).toEqual([]);
    expect(existsSync(join(dir, orgId(), databaseId))).toBe(false);
    expect(await eventsOf(databaseId, 'backups')).toEqual([
      'job.runDatabaseBackup.queued',
      'job.runDatabaseBackup.cancelled',
    ]);
  });
});

describe('cancelling a replace restore', () => {
  it('after its staging schema is built: the database is exactly as before and the staging schema is dropped', async () => {
    // The workspace's unique rule and foreign key are jobs too.
    const { databaseId, before, version, staging } = await withWorker({}, async () => {
      const { databaseId, customers } = await backupWorkspace(suite);
      const backup = await runBackup(server(), admin(), orgId(), databaseId);
      expect(backup.state, JSON.stringify(backup)).toBe('succeeded');
      // A row the backup lacks: a restore that went through would remove it.
      await rowOf(server(), admin(), customers, { Name: 'Linus', Age: 50 });
      const before = await pictureOf(server(), databaseId);
      const version = await databaseVersion(server(), admin(), orgId(), databaseId);
      expect(await strayStagingSchemas(server())).toEqual([]);

      // The restore's first checkpoint (which records the staging id) waits; the cancel queues behind it, then is
      // held itself with the job row locked. The restore builds its staging schema and waits at the swap.
      const url = server().database.url;
      const started = await holdJobUpdate(
        url,
        `NEW.kind = 'restoreDatabaseBackup' AND NEW.journal->>'phase' = 'started' AND OLD.journal->>'phase' IS NULL`,
      );
      const cancelling = await holdJobUpdate(
        url,
        `NEW.kind = 'restoreDatabaseBackup' AND NEW.cancel_requested AND NOT OLD.cancel_requested`,
      );
      let restore: { jobId: string; statusUrl: string } | undefined;
      let cancel: ReturnType<typeof controlJob> | undefined;
      let staging = '';
      try {
        const accepted = await requestRestore(server(), admin(), orgId(), databaseId, backup.jobId, {
          target: 'replace',
          expectedVersion: version,
        });
        expect(accepted.status, accepted.text).toBe(202);
        restore = accepted.body as { jobId: string; statusUrl: string };
        await started.reached();
        cancel = controlJob(server(), admin(), orgId(), restore.jobId, 'cancel');
        await started.queuedBehind();
        await started.unlock();
        await cancelling.reached();
        const { journal } = await server().prisma.job.findUniqueOrThrow({
          where: { id: restore.jobId },
          select: { journal: true },
        });
        expect(journal).toMatchObject({ phase: 'started', newDatabaseId: null });
        staging = schemaOf((journal as { stagingId: string }).stagingId);
        await withDatabase(async (client) => {
          await waitFor(client, SCHEMA_EXISTS, [staging]);
          await lockWaiter(client);
        });
        expect(await pictureOf(server(), databaseId)).toEqual(before);
      } finally {
        await releaseAll([started, cancelling]);
      }
      const cancelled = await cancel!;
      expect(cancelled.status, cancelled.text).toBe(200);
      expect(cancelled.body).toMatchObject({ jobId: restore!.jobId, state: 'running' });
      const done = await waitForJob(server(), admin(), restore!.statusUrl);
      expect(done).toMatchObject({ kind: 'restoreDatabaseBackup', state: 'cancelled', result: null, error: null });
      return { databaseId, before, version, staging };
    });

    expect(await pictureOf(server(), databaseId)).toEqual(before);
    expect(await databaseVersion(server(), admin(), orgId(), databaseId)).toBe(version);
    const [left] = await server().prisma.$queryRawUnsafe<{ n: number }[]>(SCHEMA_EXISTS, staging);
    expect(left!.n).toBe(0);
    expect(await strayStagingSchemas(server())).toEqual([]);
    expect(await eventsOf(databaseId, 'restores')).toEqual([
      'job.restoreDatabaseBackup.queued',
      'job.restoreDatabaseBackup.cancelled',
    ]);
  });
});
