import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { newId } from '../src/kernel/ids.ts';
import { schedulerTick } from '../src/jobs/kinds/backups/scheduler.ts';
import { startWorker } from '../src/jobs/start-worker.ts';
import { createLogger } from '../src/kernel/log.ts';
import { backupDir, databasePath, runBackup } from './helpers/backups.ts';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createDatabase, createRow, createTable } from './helpers/workspace.ts';

/**
 * Issue 26 §7: backups every minute. A schedule runs at most once per BACKUP_MIN_INTERVAL_MINUTES (60 here, the
 * default), scheduled runs count in the org's queue cap (1 here), and retention keeps at most
 * BACKUP_RETAIN_MAX_COUNT backups (2 here) whatever the policy. No worker runs beside the server.
 */
const dir = backupDir();
const clockFile = join(dir, 'clock');
const suite = useServerWithOrg({
  RUN_WORKER: 'false',
  BACKUP_DIR: dir,
  BACKUP_SCHEDULER_CLOCK_FILE: clockFile,
  JOB_QUEUE_LIMIT_PER_ORG: '1',
  BACKUP_RETAIN_MAX_COUNT: '2',
});
const admin = () => suite.org.adminKey;
const orgId = () => suite.org.orgId;

function saveSchedule(databaseId: string, cron: string) {
  return suite.server.request('PUT', `${databasePath(orgId(), databaseId)}/backup-schedule`, {
    token: admin(),
    idempotencyKey: idempotencyKey(),
    body: { cron, timezone: 'UTC' },
  });
}

async function withWorker<T>(work: () => Promise<T>): Promise<T> {
  const worker = startWorker(suite.server.prisma, suite.server.config, createLogger('silent'));
  try {
    return await work();
  } finally {
    await worker.stop();
  }
}

describe('the minimum schedule interval', () => {
  it.each([
    ['* * * * *', 1],
    ['*/30 * * * *', 30],
    ['0,59 3 * * *', 59],
  ])('refuses %s (runs %i minutes apart): 422 at cron', async (cron, minutes) => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const refused = await saveSchedule(databaseId, cron);
    expectError(refused, 422, 'VALIDATION_FAILED');
    expectProblemPaths(refused, [['cron']]);
    expect(refused.body.error.details.problems[0].message).toContain(`${minutes} minute(s) apart`);
    expect(await suite.server.prisma.job.count({ where: { databaseId, kind: 'saveBackupSchedule' } })).toBe(0);
  });

  it('accepts an hourly schedule', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const accepted = await saveSchedule(databaseId, '0 * * * *');
    expect(accepted.status, accepted.text).toBe(202);
  });
});

describe('scheduled runs and the org’s queue cap', () => {
  it('skips a due instant while the org’s queue is full, and queues the next one once it has room', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const start = new Date(Date.UTC(2026, 10, 25, 10, 0, 0));
    await suite.server.prisma.backupSettings.create({
      data: {
        databaseId,
        orgId: orgId(),
        cron: '0 * * * *',
        timezone: 'UTC',
        nextRunAt: start,
        actorId: suite.org.adminUserId,
        actorKind: 'user',
        actorKey: null,
        actorName: 'Ada Admin',
      },
    });
    await suite.server.prisma.job.create({
      data: {
        id: newId(),
        orgId: orgId(),
        kind: 'exportRows',
        state: 'queued',
        payload: {},
        actorId: suite.org.adminUserId,
        actorKind: 'user',
        actorName: 'Ada',
      },
    });
    const pool = new pg.Pool({ connectionString: suite.server.database.url, max: 2 });
    const scheduled = () => suite.server.prisma.job.count({ where: { databaseId, kind: 'runDatabaseBackup' } });
    try {
      writeFileSync(clockFile, new Date(start.getTime() + 60_000).toISOString());
      await schedulerTick(pool, suite.server.config);
      expect(await scheduled()).toBe(0);
      const settings = await suite.server.prisma.backupSettings.findUniqueOrThrow({ where: { databaseId } });
      expect(settings.nextRunAt).toEqual(new Date(start.getTime() + 3_600_000));

      // Room again: the filler (and any job an earlier test left queued, with no worker here) ends.
      await suite.server.prisma.job.updateMany({
        where: { orgId: orgId(), state: 'queued' },
        data: { state: 'cancelled', finishedAt: new Date() },
      });
      writeFileSync(clockFile, new Date(start.getTime() + 3_660_000).toISOString());
      await schedulerTick(pool, suite.server.config);
      expect(await scheduled()).toBe(1);
      await suite.server.prisma.job.updateMany({
        where: { databaseId, kind: 'runDatabaseBackup' },
        data: { state: 'cancelled', finishedAt: new Date() },
      });
    } finally {
      await pool.end();
    }
  });
});

describe('retention bounds', () => {
  it('keeps at most BACKUP_RETAIN_MAX_COUNT backups of a database without a keepLast policy', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    expect((await createRow(suite.server, admin(), table, { Name: 'Ada' })).status).toBe(201);
    const ids = await withWorker(async () => {
      const done: string[] = [];
      for (let index = 0; index < 3; index += 1) {
        const job = await runBackup(suite.server, admin(), orgId(), table.databaseId);
        expect(job.state, JSON.stringify(job.error)).toBe('succeeded');
        done.push(job.jobId);
      }
      return done;
    });
    const listed = await suite.server.request('GET', `${databasePath(orgId(), table.databaseId)}/backups`, {
      token: admin(),
    });
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.data.map((backup: { id: string }) => backup.id)).toEqual([ids[2], ids[1]]);
  });
});
