import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { columnOf, rowsTableOf } from '../src/data/identifiers.ts';
import {
  backupDir,
  databasePath,
  databaseVersion,
  finished,
  pictureOf,
  requestRestore,
  strayStagingSchemas,
} from './helpers/backups.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { waitForJob } from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Backups under writes and under SIGKILL (issue 16). The server runs no worker; the workers are `dist/worker.js`
 * processes with a 2 s lease, killed (no handover) while they copy, and a second one finishes the job.
 */
const dir = backupDir();
const suite = useServerWithOrg({ RUN_WORKER: 'false', BACKUP_DIR: dir });
const admin = () => suite.org.adminKey;
const server = () => suite.server;
const orgId = () => suite.org.orgId;

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

async function withWorkers<T>(run: (workers: { kill(): Promise<void> }[]) => Promise<T>): Promise<T> {
  const workers: { kill(): Promise<void> }[] = [];
  try {
    return await run(workers);
  } finally {
    await Promise.all(workers.map((worker) => worker.kill()));
  }
}

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  await expect.poll(check, { timeout: 60_000, interval: 10, message: `timed out waiting for ${what}` }).toBe(true);
}

/**
 * A set-up statement on a connection of its own: Prisma commits a raw statement as a transaction that expires after
 * 5 s, and the server's pool has the request time budget (QUERY_TIMEOUT_MS); writing or deleting 100,000 rows
 * outran each on a loaded machine.
 */
async function rawSql(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: server().database.url });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

/** `count` rows written straight into the physical table (fast), with the catalog's count to match. */
async function fill(table: TestTable, count: number): Promise<void> {
  const column = columnOf(table.fields.Name!);
  await rawSql(
    `INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)} (id, version, created_at, updated_at, ${column})
     SELECT lpad(n::text, 26, '0'), 1, now(), now(), repeat(md5(n::text), 4) FROM generate_series(1, ${count}) AS n`,
  );
  await server().prisma.dataTable.update({ where: { id: table.tableId }, data: { rowCount: count } });
}

const copying = (direction: 'TO' | 'FROM') => async () => {
  const rows = await server().prisma.$queryRawUnsafe<unknown[]>(
    `SELECT 1 FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'COPY %${direction} STDOUT%' OR (state = 'active' AND query LIKE 'COPY %${direction} STDIN%')`,
  );
  return rows.length > 0;
};

describe('a backup taken while writes go on', () => {
  it('holds exactly the rows of one instant, across tables', async () => {
    const first = await createTable(server(), suite.org, [{ name: 'Seq', type: 'integer' }]);
    const second = await createTable(server(), suite.org, [{ name: 'Seq', type: 'integer' }], {
      databaseId: first.databaseId,
    });
    await withWorkers(async (workers) => {
      workers.push(spawnWorker());
      let stop = false;
      let written = 0;
      // One writer: first then second, so any instant holds n rows in `first` and n or n-1 in `second`.
      const writer = (async () => {
        for (let n = 0; !stop; n += 1) {
          expect((await createRow(server(), admin(), first, { Seq: n })).status).toBe(201);
          expect((await createRow(server(), admin(), second, { Seq: n })).status).toBe(201);
          written = n + 1;
        }
      })();
      await until(async () => written >= 5, 'the first writes');
      const backup = await finished(
        server(),
        admin(),
        await server().request('POST', `${databasePath(orgId(), first.databaseId)}/backups`, {
          token: admin(),
          idempotencyKey: idempotencyKey(),
        }),
      );
      const during = written;
      await until(async () => written >= during + 3, 'writes after the backup');
      stop = true;
      await writer;
      expect(backup.state, JSON.stringify(backup)).toBe('succeeded');
      const copy = await finished(
        server(),
        admin(),
        await requestRestore(server(), admin(), orgId(), first.databaseId, backup.jobId, { target: 'new-database' }),
      );
      expect(copy.state, JSON.stringify(copy)).toBe('succeeded');
      const picture = (await pictureOf(server(), copy.result.databaseId)) as Record<
        string,
        { rows: { Seq: string }[]; history: unknown[]; table: { row_count: string } }
      >;
      const tables = Object.values(picture).sort((a, b) => b.rows.length - a.rows.length);
      const [a, b] = [tables[0]!, tables[1]!];
      const seqs = (table: typeof a) => table.rows.map((row) => Number(row.Seq)).sort((x, y) => x - y);
      expect(seqs(a)).toEqual([...Array(a.rows.length).keys()]);
      expect(seqs(b)).toEqual([...Array(b.rows.length).keys()]);
      expect(a.rows.length - b.rows.length).toBeGreaterThanOrEqual(0);
      expect(a.rows.length - b.rows.length).toBeLessThanOrEqual(1);
      expect(a.rows.length).toBeLessThan(written);
      for (const table of [a, b]) {
        expect(Number(table.table.row_count)).toBe(table.rows.length);
        expect(table.history).toHaveLength(table.rows.length);
      }
    });
  }, 120_000);
});

describe('a worker killed mid-backup and mid-restore', () => {
  it('resumes or restarts, ends correct, and never shows a half-restored database', async () => {
    const table = await createTable(server(), suite.org, [{ name: 'Name', type: 'text' }]);
    await fill(table, 400_000);
    const path = databasePath(orgId(), table.databaseId);
    await withWorkers(async (workers) => {
      const doomed = spawnWorker();
      workers.push(doomed);
      const accepted = await server().request('POST', `${path}/backups`, {
        token: admin(),
        idempotencyKey: idempotencyKey(),
      });
      expect(accepted.status, accepted.text).toBe(202);
      await until(copying('TO'), 'the backup to copy rows');
      await doomed.kill();
      workers.push(spawnWorker());
      const backup = await waitForJob(server(), admin(), accepted.body.statusUrl, undefined, 60_000);
      expect(backup.state, JSON.stringify(backup)).toBe('succeeded');
      expect(backup.result.rows).toBe(400_000);
      const job = await server().prisma.job.findUniqueOrThrow({ where: { id: backup.jobId } });
      expect(job.attempts).toBe(2);
      const files = readdirSync(join(dir, orgId(), table.databaseId, backup.jobId), { recursive: true }).map(String);
      expect(files.filter((file) => file.endsWith('.partial'))).toEqual([]);

      // Change the database, then restore over it and kill the restoring worker while it loads rows.
      const snapshot = await pictureOf(server(), table.databaseId);
      await rawSql(`DELETE FROM ${rowsTableOf(table.databaseId, table.tableId)} WHERE id > lpad('300000', 26, '0')`);
      await server().prisma.dataTable.update({ where: { id: table.tableId }, data: { rowCount: 300_000 } });
      const version = await databaseVersion(server(), admin(), orgId(), table.databaseId);
      const killer = spawnWorker();
      workers.push(killer);
      const restore = await requestRestore(server(), admin(), orgId(), table.databaseId, backup.jobId, {
        target: 'replace',
        expectedVersion: version,
      });
      expect(restore.status, restore.text).toBe(202);
      const counts = new Set<number>();
      let done = false;
      // A reader the whole time: the table holds the old 300,000 rows or the restored 400,000, never anything else.
      const reader = (async () => {
        while (!done) {
          const [row] = await server().prisma.$queryRawUnsafe<{ count: number }[]>(
            `SELECT count(*)::int AS count FROM ${rowsTableOf(table.databaseId, table.tableId)}`,
          );
          counts.add(row!.count);
        }
      })();
      await until(copying('FROM'), 'the restore to load rows');
      await killer.kill();
      expect(await strayStagingSchemas(server())).toEqual([]);
      workers.push(spawnWorker());
      const restored = await waitForJob(server(), admin(), restore.body.statusUrl, undefined, 60_000);
      done = true;
      await reader;
      expect(restored.state, JSON.stringify(restored)).toBe('succeeded');
      expect(
        [...counts].every((count) => count === 300_000 || count === 400_000),
        JSON.stringify([...counts]),
      ).toBe(true);
      expect(await pictureOf(server(), table.databaseId)).toEqual(snapshot);
      expect(await strayStagingSchemas(server())).toEqual([]);

      // A new-database copy killed while it loads: no new database is listed until the copy is whole.
      const databasesBefore = await server().prisma.database.count({ where: { orgId: orgId() } });
      const copier = spawnWorker();
      workers.push(copier);
      const copy = await requestRestore(server(), admin(), orgId(), table.databaseId, backup.jobId, {
        target: 'new-database',
      });
      expect(copy.status, copy.text).toBe(202);
      await until(copying('FROM'), 'the copy to load rows');
      await copier.kill();
      expect(await server().prisma.database.count({ where: { orgId: orgId() } })).toBe(databasesBefore);
      workers.push(spawnWorker());
      const copied = await waitForJob(server(), admin(), copy.body.statusUrl, undefined, 60_000);
      expect(copied.state, JSON.stringify(copied)).toBe('succeeded');
      const listed = await server().request('GET', `/v1/orgs/${orgId()}/databases/${copied.result.databaseId}`, {
        token: admin(),
      });
      expect(listed.status, listed.text).toBe(200);
      const [rows] = await server().prisma.$queryRawUnsafe<{ count: number }[]>(
        `SELECT count(*)::int AS count FROM ${rowsTableOf(copied.result.databaseId, copied.result.tableIds[0].to)}`,
      );
      expect(rows!.count).toBe(400_000);
      expect(await strayStagingSchemas(server())).toEqual([]);
    });
  }, 180_000);
});
