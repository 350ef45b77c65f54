import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { columnOf, historyTableOf, rowsTableOf } from '../src/data/identifiers.ts';
import { startWorker } from '../src/jobs/start-worker.ts';
import { createLogger } from '../src/kernel/log.ts';
import {
  backupDir,
  databasePath,
  databaseVersion,
  finished,
  pictureOf,
  requestRestore,
  strayStagingSchemas,
} from './helpers/backups.ts';
import { MANIFEST, rowsFileOf } from '../src/jobs/kinds/backups/archive-format.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { holdTables, waitFor } from './helpers/job-holds.ts';
import { waitForJob } from './helpers/jobs.ts';
import type { ApiResponse } from './helpers/server.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { addUniqueRule, createRow, createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Backups under writes and under SIGKILL (issue 16). The server runs no worker; the workers are `dist/worker.js`
 * processes with a 2 s lease, killed (no handover) while a hold keeps them mid-job, and a second one finishes it.
 */
const dir = backupDir();
const suite = useServerWithOrg({ RUN_WORKER: 'false', BACKUP_DIR: dir });
const admin = () => suite.org.adminKey;
const server = () => suite.server;
const orgId = () => suite.org.orgId;
/** The backed-up rows, and what is left of them when the restore starts: enough to tell one content from the other. */
const ROWS = 20_000;
const CHANGED = 15_000;

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

/** `count` rows written straight into the physical table (fast), with the catalog's count to match; names are unique. */
async function fill(table: TestTable, count: number): Promise<void> {
  const column = columnOf(table.fields.Name!);
  await rawSql(
    `INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)} (id, version, created_at, updated_at, ${column})
     SELECT lpad(n::text, 26, '0'), 1, now(), now(), repeat(md5(n::text), 4) FROM generate_series(1, ${count}) AS n`,
  );
  await server().prisma.dataTable.update({ where: { id: table.tableId }, data: { rowCount: count } });
}

let builds = 0;

/**
 * Holds a restore inside the one transaction that builds its staging schema, after every row and history entry is
 * loaded: an event trigger makes the build's first unique-rule index (`u_…`, built after the rows, as pg_restore
 * does) in a schema that no database owns yet wait on an advisory lock this test holds. Killed there, the worker
 * leaves a whole uncommitted copy, the latest point at which a half-restored database could show.
 */
async function holdStagingBuild(): Promise<{ reached(): Promise<void>; release(): Promise<void> }> {
  builds += 1;
  const lock = 716_411 + builds;
  const name = `test_hold_build_${builds}`;
  const client = new pg.Client({ connectionString: server().database.url });
  await client.connect();
  await client.query(`SELECT pg_advisory_lock(${lock})`);
  await client.query(`CREATE FUNCTION ${name}() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN
    IF EXISTS (SELECT 1 FROM pg_event_trigger_ddl_commands() c WHERE c.object_type = 'index'
                 AND c.object_identity LIKE 'd\\_%.u\\_%'
                 AND NOT EXISTS (SELECT 1 FROM public.databases d WHERE 'd_' || lower(trim(d.id)) = c.schema_name))
    THEN PERFORM pg_advisory_xact_lock(${lock}); END IF; END $$`);
  await client.query(
    `CREATE EVENT TRIGGER ${name} ON ddl_command_end WHEN TAG IN ('CREATE INDEX') EXECUTE FUNCTION ${name}()`,
  );
  let released = false;
  return {
    reached: () =>
      waitFor(
        client,
        `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = ${lock} AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      ),
    release: async () => {
      if (released) return;
      released = true;
      // Unlock first: the held build may still run the trigger's function, which DROP would wait for.
      await client.query(`SELECT pg_advisory_unlock(${lock})`);
      await client.query(`DROP EVENT TRIGGER ${name}`);
      await client.query(`DROP FUNCTION ${name}()`);
      await client.end();
    },
  };
}

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
    // Holds, not sizes, put each kill mid-job: the rows only tell the old content from the restored one.
    const table = await createTable(server(), suite.org, [{ name: 'Name', type: 'text' }]);
    const ruleWorker = startWorker(server().prisma, server().config, createLogger('silent'));
    try {
      const rule = await addUniqueRule(server(), admin(), table, { fieldIds: ['Name'] });
      expect(rule.job.state, JSON.stringify(rule.job)).toBe('succeeded');
    } finally {
      await ruleWorker.stop();
    }
    await fill(table, ROWS);
    const path = databasePath(orgId(), table.databaseId);
    await withWorkers(async (workers) => {
      // The backup copies a table's rows, then its history: holding the history table keeps the worker
      // mid-archive when it is killed, its snapshot open, the rows file written and the history not.
      const doomed = spawnWorker();
      workers.push(doomed);
      const history = await holdTables(server().database.url, [historyTableOf(table.databaseId, table.tableId)]);
      let accepted!: ApiResponse;
      try {
        accepted = await server().request('POST', `${path}/backups`, {
          token: admin(),
          idempotencyKey: idempotencyKey(),
        });
        expect(accepted.status, accepted.text).toBe(202);
        await history.reached();
        await doomed.kill();
      } finally {
        await history.release();
      }
      const jobDir = join(dir, orgId(), table.databaseId, accepted.body.jobId);
      // Killed mid-archive: the rows file is written, the backup is not.
      const atKill = readdirSync(jobDir, { recursive: true }).map(String);
      expect(atKill, JSON.stringify(atKill)).toContain(rowsFileOf(table.tableId));
      expect(atKill, JSON.stringify(atKill)).not.toContain(MANIFEST);
      workers.push(spawnWorker());
      const backup = await waitForJob(server(), admin(), accepted.body.statusUrl, undefined, 60_000);
      expect(backup.state, JSON.stringify(backup)).toBe('succeeded');
      expect(backup.result.rows).toBe(ROWS);
      const job = await server().prisma.job.findUniqueOrThrow({ where: { id: backup.jobId } });
      expect(job.attempts).toBe(2);
      const files = readdirSync(jobDir, { recursive: true }).map(String);
      expect(files.filter((file) => file.endsWith('.partial'))).toEqual([]);

      // Change the database, then restore over it and kill the restoring worker with the copy loaded, uncommitted.
      const snapshot = await pictureOf(server(), table.databaseId);
      await rawSql(
        `DELETE FROM ${rowsTableOf(table.databaseId, table.tableId)} WHERE id > lpad('${CHANGED}', 26, '0')`,
      );
      await server().prisma.dataTable.update({ where: { id: table.tableId }, data: { rowCount: CHANGED } });
      const version = await databaseVersion(server(), admin(), orgId(), table.databaseId);
      const killer = spawnWorker();
      workers.push(killer);
      const build = await holdStagingBuild();
      const counts = new Set<number>();
      let done = false;
      let restore!: ApiResponse;
      let reader: Promise<void> = Promise.resolve();
      try {
        restore = await requestRestore(server(), admin(), orgId(), table.databaseId, backup.jobId, {
          target: 'replace',
          expectedVersion: version,
        });
        expect(restore.status, restore.text).toBe(202);
        // A reader the whole time: the table holds the old CHANGED rows or the restored ROWS, never anything else.
        reader = (async () => {
          while (!done) {
            const [row] = await server().prisma.$queryRawUnsafe<{ count: number }[]>(
              `SELECT count(*)::int AS count FROM ${rowsTableOf(table.databaseId, table.tableId)}`,
            );
            counts.add(row!.count);
          }
        })();
        await build.reached();
        await killer.kill();
        expect(await strayStagingSchemas(server())).toEqual([]);
      } finally {
        await build.release();
      }
      workers.push(spawnWorker());
      const restored = await waitForJob(server(), admin(), restore.body.statusUrl, undefined, 60_000);
      done = true;
      await reader;
      expect(restored.state, JSON.stringify(restored)).toBe('succeeded');
      expect(
        [...counts].every((count) => count === CHANGED || count === ROWS),
        JSON.stringify([...counts]),
      ).toBe(true);
      expect(await pictureOf(server(), table.databaseId)).toEqual(snapshot);
      expect(await strayStagingSchemas(server())).toEqual([]);

      // A new-database copy killed with its copy loaded: no new database is listed until the copy is whole.
      const databasesBefore = await server().prisma.database.count({ where: { orgId: orgId() } });
      const copier = spawnWorker();
      workers.push(copier);
      const copyBuild = await holdStagingBuild();
      let copy!: ApiResponse;
      try {
        copy = await requestRestore(server(), admin(), orgId(), table.databaseId, backup.jobId, {
          target: 'new-database',
        });
        expect(copy.status, copy.text).toBe(202);
        await copyBuild.reached();
        await copier.kill();
        expect(await server().prisma.database.count({ where: { orgId: orgId() } })).toBe(databasesBefore);
      } finally {
        await copyBuild.release();
      }
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
      expect(rows!.count).toBe(ROWS);
      expect(await strayStagingSchemas(server())).toEqual([]);
    });
  }, 180_000);
});
