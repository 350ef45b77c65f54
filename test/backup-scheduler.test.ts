import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { schedulerTick } from '../src/jobs/kinds/backups/scheduler.ts';
import { backupDir, databasePath, finished } from './helpers/backups.ts';
import { expectError } from './helpers/expectations.ts';
import { addMember, idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createDatabase, createRow, createTable } from './helpers/workspace.ts';

/**
 * The backup schedule and its scheduler (issue 16): two worker processes, a schedule due every minute and a test
 * clock (BACKUP_SCHEDULER_CLOCK_FILE) that the test moves, so minutes pass without waiting for them.
 */
const dir = backupDir();
const clockFile = join(dir, 'clock');
const suite = useServerWithOrg({
  RUN_WORKER: 'false',
  BACKUP_DIR: dir,
  BACKUP_SCHEDULER_CLOCK_FILE: clockFile,
  BACKUP_OVERDUE_GRACE_MINUTES: '1',
  BACKUP_MIN_INTERVAL_MINUTES: '1',
});
const admin = () => suite.org.adminKey;
const server = () => suite.server;
const orgId = () => suite.org.orgId;
const setClock = (instant: Date) => writeFileSync(clockFile, instant.toISOString());

function spawnWorker(): { child: ChildProcess; kill(): Promise<void> } {
  const child = spawn(process.execPath, ['dist/worker.js'], {
    detached: true,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      DATABASE_URL: server().database.url,
      LOG_LEVEL: 'silent',
      NODE_ENV: 'test',
      JOB_POLL_MS: '50',
      JOB_LEASE_SECONDS: '2',
      BACKUP_DIR: dir,
      BACKUP_SCHEDULER_CLOCK_FILE: clockFile,
      BACKUP_SCHEDULER_INTERVAL_MS: '50',
      BACKUP_OVERDUE_GRACE_MINUTES: '1',
    },
  });
  const exited = once(child, 'exit');
  return {
    child,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGKILL');
      await exited;
    },
  };
}

const workers: { kill(): Promise<void> }[] = [];
afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.kill()));
});

async function runsOf(databaseId: string): Promise<{ scheduledFor: string; jobId: string }[]> {
  const rows = await server().prisma.backupRun.findMany({ where: { databaseId }, orderBy: { scheduledFor: 'asc' } });
  return rows.map((row) => ({ scheduledFor: row.scheduledFor.toISOString(), jobId: row.jobId }));
}

async function backupJobs(databaseId: string) {
  return server().prisma.job.findMany({
    where: { databaseId, kind: 'runDatabaseBackup' },
    orderBy: { createdAt: 'asc' },
  });
}

/** Polls (with a deadline) until `done` holds. */
async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string): Promise<T> {
  return vi.waitFor(
    async () => {
      const value = await read();
      if (done(value)) return value;
      throw new Error(`${what}: ${JSON.stringify(value)}`);
    },
    { timeout: 30_000, interval: 50 },
  );
}

async function allSucceeded(databaseId: string, count: number): Promise<void> {
  await eventually(
    () => backupJobs(databaseId),
    (jobs) => jobs.length === count && jobs.every((job) => job.state === 'succeeded'),
    `${count} succeeded backups`,
  );
}

async function events(databaseId: string): Promise<string[]> {
  const rows = await server().prisma.activityEvent.findMany({
    where: { databaseId, category: 'backups' },
    orderBy: [{ occurredAt: 'asc' }, { id: 'asc' }],
  });
  return rows.map((row) => row.event).filter((event) => !event.startsWith('job.'));
}

describe('schedule and policy routes', () => {
  it('saves, shows and deletes a schedule and a policy; admin authority; 404 and 422', async () => {
    const databaseId = await createDatabase(server(), suite.org);
    const path = `${databasePath(orgId(), databaseId)}/backup-schedule`;
    const empty = await server().request('GET', path, { token: admin() });
    expect(empty.status, empty.text).toBe(200);
    expect(empty.body).toEqual({
      databaseId,
      schedule: null,
      policy: { keepLast: null, keepDays: null },
      nextRuns: [],
      lastSuccessAt: null,
      overdueSince: null,
      failedJobId: null,
      version: '0',
    });
    expectError(
      await server().request('PUT', path, {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { cron: '0 0 31 4 *', timezone: 'UTC' },
      }),
      422,
      'VALIDATION_FAILED',
    );
    const member = await addMember(server().prisma, orgId(), 'member');
    expectError(
      await server().request('PUT', path, {
        token: member.apiKey,
        idempotencyKey: idempotencyKey(),
        body: { cron: '0 3 * * *', timezone: 'UTC' },
      }),
      403,
      'FORBIDDEN',
    );
    expectError(await server().request('GET', path, { token: member.apiKey }), 403, 'FORBIDDEN');
    expectError(
      await server().request('GET', `${databasePath(orgId(), '01ARZ3NDEKTSV4RRFFQ69G5FAV')}/backup-schedule`, {
        token: admin(),
      }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(
      await server().request('DELETE', path, { token: admin(), idempotencyKey: idempotencyKey() }),
      404,
      'RESOURCE_NOT_FOUND',
    );

    const worker = spawnWorker();
    workers.push(worker);
    try {
      const saved = await finished(
        server(),
        admin(),
        await server().request('PUT', path, {
          token: admin(),
          idempotencyKey: idempotencyKey(),
          body: { cron: '30 2 * * *', timezone: 'Europe/Berlin' },
        }),
      );
      expect(saved.state, JSON.stringify(saved)).toBe('succeeded');
    } finally {
      await worker.kill();
    }
    const shown = await server().request('GET', path, { token: admin() });
    expect(shown.body).toMatchObject({ schedule: { cron: '30 2 * * *', timezone: 'Europe/Berlin' }, version: '1' });
    expect(shown.body.nextRuns).toHaveLength(3);
    const policy = await server().request('PUT', `${databasePath(orgId(), databaseId)}/backup-policy`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { keepLast: 2, keepDays: 30 },
    });
    expect(policy.status, policy.text).toBe(200);
    expect(policy.body.policy).toEqual({ keepLast: 2, keepDays: 30 });
    const deleted = await server().request('DELETE', path, { token: admin(), idempotencyKey: idempotencyKey() });
    expect(deleted.status, deleted.text).toBe(200);
    expect(deleted.body).toMatchObject({ schedule: null, nextRuns: [], policy: { keepLast: 2, keepDays: 30 } });
    expect(await events(databaseId)).toEqual([
      'database.backup_schedule.update',
      'database.backup_policy.update',
      'database.backup_schedule.delete',
    ]);
  });
});

describe('the scheduler', () => {
  it('runs each due minute exactly once across two workers, catches up once, prunes, and raises and resolves alerts', async () => {
    const table = await createTable(server(), suite.org, [{ name: 'Name', type: 'text' }]);
    const { databaseId } = table;
    expect((await createRow(server(), admin(), table, { Name: 'Ada' })).status).toBe(201);
    setClock(new Date());
    workers.push(spawnWorker(), spawnWorker());
    const path = databasePath(orgId(), databaseId);
    await finished(
      server(),
      admin(),
      await server().request('PUT', `${path}/backup-schedule`, {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { cron: '* * * * *', timezone: 'UTC' },
      }),
    );
    const policy = await server().request('PUT', `${path}/backup-policy`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { keepLast: 2, keepDays: null },
    });
    expect(policy.status, policy.text).toBe(200);
    const first = (await server().prisma.backupSettings.findUniqueOrThrow({ where: { databaseId } })).nextRunAt!;

    // Three due minutes, one at a time: each runs once, whichever worker sees it first.
    for (let minute = 0; minute < 3; minute += 1) {
      setClock(new Date(first.getTime() + minute * 60_000 + 5_000));
      await allSucceeded(databaseId, minute + 1);
    }
    // Ten minutes of "downtime": one catch-up run, for the latest due minute (and the database was overdue meanwhile).
    setClock(new Date(first.getTime() + 12 * 60_000 + 5_000));
    await allSucceeded(databaseId, 4);
    const runs = await runsOf(databaseId);
    expect(runs.map((run) => run.scheduledFor)).toEqual(
      [0, 1, 2, 12].map((minute) => new Date(first.getTime() + minute * 60_000).toISOString()),
    );
    expect(new Set(runs.map((run) => run.jobId)).size).toBe(4);
    expect((await backupJobs(databaseId)).map((job) => (job.payload as { scheduledFor: string }).scheduledFor)).toEqual(
      runs.map((run) => run.scheduledFor),
    );

    // Retention kept the newest two.
    const listed = await server().request('GET', `${path}/backups`, { token: admin() });
    expect(listed.body.data.map((backup: { id: string }) => backup.id)).toEqual([runs[3]!.jobId, runs[2]!.jobId]);
    const pruned = await server().prisma.activityEvent.findMany({
      where: { databaseId, event: 'database.backup.prune' },
    });
    expect(pruned.map((event) => event.affectedRows)).toEqual([1, 1]);
    expect(pruned.map((event) => event.summary).join(' ')).toContain(runs[0]!.jobId);
    expect(runs.map((run) => existsSync(join(dir, orgId(), databaseId, run.jobId)))).toEqual([
      false,
      false,
      true,
      true,
    ]);
    await Promise.all(workers.splice(0).map((worker) => worker.kill()));

    // With no worker running the due job, the scheduler (here called in-process) finds the database overdue…
    setClock(new Date(first.getTime() + 16 * 60_000 + 5_000));
    const pool = new pg.Pool({ connectionString: server().database.url, max: 2 });
    try {
      // The killed workers' sessions may still hold the settings row for a moment, and the tick skips locked rows.
      await vi.waitFor(
        async () => {
          await schedulerTick(pool, server().config);
          expect(
            (await server().prisma.backupSettings.findUniqueOrThrow({ where: { databaseId } })).overdueSince,
          ).not.toBeNull();
        },
        { timeout: 10_000, interval: 200 },
      );
      // …and a failed backup is detected once.
      const failed = await server().prisma.job.findFirstOrThrow({
        where: { databaseId, kind: 'runDatabaseBackup', state: 'queued' },
      });
      await server().prisma.job.update({
        where: { id: failed.id },
        data: { state: 'failed', finishedAt: new Date(), error: { code: 'JOB_FAILED', message: 'disk full' } },
      });
      await schedulerTick(pool, server().config);
      await schedulerTick(pool, server().config);
      expect((await server().prisma.backupSettings.findUniqueOrThrow({ where: { databaseId } })).failedJobId).toBe(
        failed.id,
      );
    } finally {
      await pool.end();
    }
    // The next success resolves both.
    setClock(new Date(first.getTime() + 17 * 60_000 + 5_000));
    workers.push(spawnWorker());
    await eventually(
      () => backupJobs(databaseId),
      (jobs) => jobs.at(-1)?.state === 'succeeded' && jobs.length === 6,
      'the next scheduled backup',
    );
    expect(await events(databaseId)).toEqual([
      'database.backup_schedule.update',
      'database.backup_policy.update',
      'database.backup.prune',
      'backup.overdue.detected',
      'backup.overdue.resolved',
      'database.backup.prune',
      'backup.overdue.detected',
      'backup.failed.detected',
      'backup.failed.resolved',
      'backup.overdue.resolved',
      'database.backup.prune',
    ]);
    const settings = await server().prisma.backupSettings.findUniqueOrThrow({ where: { databaseId } });
    expect(settings).toMatchObject({
      overdueSince: null,
      failedJobId: null,
      lastSuccessAt: new Date(first.getTime() + 17 * 60_000),
    });
  }, 90_000);
});
