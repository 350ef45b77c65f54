import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { columnOf, rowsTableOf } from '../src/data/identifiers.ts';
import { startWorker } from '../src/jobs/start-worker.ts';
import { createLogger } from '../src/kernel/log.ts';
import { download, requestExport } from './helpers/exports.ts';
import { holdJobUpdate, withClient, type JobUpdateHold } from './helpers/job-holds.ts';
import { controlJob, tableActivity, waitForJob } from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/**
 * An export reads one snapshot while writes go on, can be cancelled mid-way, and after its worker is SIGKILLed
 * starts again on another worker and still ends with a correct artifact. The server runs no worker: each test
 * starts its own (in-process, or `dist/worker.js` processes with a 2 s lease to kill).
 */
const suite = useServerWithOrg({ RUN_WORKER: 'false' });
const admin = () => suite.org.adminKey;
const ROWS = 150_000;

const idOf = (n: number) => `0${String(n).padStart(25, '0')}`;

const withDatabase = <T>(work: (client: pg.Client) => Promise<T>) => withClient(suite.server.database.url, work);

/** A two-field table of ROWS rows (JSONL ≈ 22 MB: several 4 MiB chunks), seeded in one statement. */
async function bigTable(): Promise<TestTable> {
  const table = await createTable(suite.server, suite.org, [
    { name: 'Name', type: 'text' },
    { name: 'Score', type: 'integer' },
  ]);
  await withDatabase(async (client) => {
    await client.query(
      `INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)} (id, version, created_at, updated_at, ${columnOf(table.fields.Name!)}, ${columnOf(table.fields.Score!)})
      SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), md5(g::text) || ' customer ' || g, g FROM generate_series(1, $1::int) AS g`,
      [ROWS],
    );
    await client.query('UPDATE public.data_tables SET row_count = $2 WHERE id = $1', [table.tableId, ROWS]);
  });
  return table;
}

/**
 * Makes the export's checkpoint that takes its progress to `progress` or past it wait on a lock this test holds,
 * so writes, cancels and kills land mid-export on any machine.
 */
function holdExport(progress: number): Promise<JobUpdateHold> {
  return holdJobUpdate(
    suite.server.database.url,
    `NEW.kind LIKE 'export%' AND NEW.journal->>'phase' = 'export' AND OLD.progress_done < ${progress} AND NEW.progress_done >= ${progress}`,
  );
}

async function chunksOf(jobId: string): Promise<number> {
  return withDatabase(
    async (client) =>
      (
        await client.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM public.job_artifact_chunks WHERE job_id = $1',
          [jobId],
        )
      ).rows[0]!.n,
  );
}

/** The exported JSONL lines, parsed. */
async function linesOf(job: any): Promise<{ id: string; version: string; values: Record<string, unknown> }[]> {
  const file = await download(suite.server, admin(), job);
  expect(file.status).toBe(200);
  const lines = file.text.split('\n');
  expect(lines.pop()).toBe('');
  return lines.map((line) => JSON.parse(line));
}

/** Exactly the seeded rows, each once, in id order. */
function expectSeeded(lines: { id: string }[]): void {
  expect(lines).toHaveLength(ROWS);
  lines.forEach((line, index) => {
    if (line.id !== idOf(index + 1)) expect(line.id).toBe(idOf(index + 1));
  });
}

async function accepted(
  table: TestTable,
  body: Record<string, unknown>,
): Promise<{ jobId: string; statusUrl: string }> {
  const response = await requestExport(suite.server, admin(), table, body);
  expect(response.status, response.text).toBe(202);
  return response.body;
}

describe('an export under concurrent work', () => {
  it('holds one snapshot: rows written, changed or deleted during the export are as they were when it began', async () => {
    const table = await bigTable();
    const worker = startWorker(suite.server.prisma, suite.server.config, createLogger('silent'));
    try {
      const job = await accepted(table, { format: 'jsonl' });
      const hold = await holdExport(1);
      try {
        await hold.reached();
        for (const name of ['new 1', 'new 2', 'new 3']) {
          const created = await createRow(suite.server, admin(), table, { [table.fields.Name!]: name });
          expect(created.status, created.text).toBe(201);
        }
        await withDatabase(async (client) => {
          const target = rowsTableOf(table.databaseId, table.tableId);
          await client.query(
            `UPDATE ${target} SET ${columnOf(table.fields.Name!)} = 'changed', version = version + 1 WHERE id = $1`,
            [idOf(1)],
          );
          await client.query(`DELETE FROM ${target} WHERE id = $1`, [idOf(ROWS)]);
        });
      } finally {
        await hold.release();
      }
      const done = await waitForJob(suite.server, admin(), job.statusUrl, undefined, 60_000);
      expect(done).toMatchObject({
        state: 'succeeded',
        progress: { done: ROWS, total: ROWS },
        result: { rowsDone: ROWS, rowsTotal: ROWS },
      });
      const lines = await linesOf(done);
      expectSeeded(lines);
      expect(lines[0]).toEqual({
        id: idOf(1),
        version: '1',
        values: { [table.fields.Name!]: 'c4ca4238a0b923820dcc509a6f75849b customer 1', [table.fields.Score!]: 1 },
      });
    } finally {
      await worker.stop();
    }
  });

  it('is cancelled mid-way: no artifact, no stored chunks, a cancelled event', async () => {
    const table = await bigTable();
    const worker = startWorker(suite.server.prisma, suite.server.config, createLogger('silent'));
    try {
      const job = await accepted(table, { format: 'csv', fileName: 'stopped.csv' });
      const hold = await holdExport(1);
      let cancel: ReturnType<typeof controlJob> | undefined;
      try {
        await hold.reached();
        // The held step holds its step lock: the cancel queues behind it, and the next step sees it.
        cancel = controlJob(suite.server, admin(), table.orgId, job.jobId, 'cancel');
        await hold.queuedBehind();
      } finally {
        await hold.release();
      }
      expect((await cancel!).status).toBe(200);
      const done = await waitForJob(suite.server, admin(), job.statusUrl, undefined, 60_000);
      expect(done.state).toBe('cancelled');
      expect(done.artifacts).toEqual([]);
      expect(await chunksOf(job.jobId)).toBe(0);
      const events = (await tableActivity(suite.server, admin(), table))
        .filter((entry) => entry.category === 'exports')
        .map((entry) => entry.event);
      expect(events).toEqual(['job.exportRows.queued', 'job.exportRows.cancelled']);
    } finally {
      await worker.stop();
    }
  });
});

interface WorkerProcess {
  child: ChildProcess;
  kill(): Promise<void>;
}

function spawnWorker(): WorkerProcess {
  const child = spawn(process.execPath, ['dist/worker.js'], {
    detached: true,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      DATABASE_URL: suite.server.database.url,
      JOB_LEASE_SECONDS: '2',
      LOG_LEVEL: 'silent',
      JOB_POLL_MS: '50',
      NODE_ENV: 'test',
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

describe('a worker SIGKILLed mid-export', () => {
  it('leaves a half-written file that is never served; another worker starts over and ends with the correct artifact', async () => {
    const table = await bigTable();
    const workers: WorkerProcess[] = [];
    try {
      const job = await accepted(table, { format: 'jsonl', fileName: 'all.jsonl' });
      // Chunks hold ~28,000 rows each: the kill lands after at least two chunks were committed.
      const hold = await holdExport(50_000);
      try {
        workers.push(spawnWorker());
        await hold.reached();
        await workers[0]!.kill();
      } finally {
        await hold.release();
      }
      expect(await chunksOf(job.jobId)).toBeGreaterThanOrEqual(1);
      const atKill = (await suite.server.request('GET', job.statusUrl, { token: admin() })).body;
      expect(atKill).toMatchObject({ state: 'running', artifacts: [] });

      workers.push(spawnWorker());
      const done = await waitForJob(suite.server, admin(), job.statusUrl, undefined, 60_000);
      expect(done).toMatchObject({ state: 'succeeded', result: { rowsDone: ROWS, rowsTotal: ROWS } });
      const attempts = await suite.server.prisma.job.findUniqueOrThrow({
        where: { id: job.jobId },
        select: { attempts: true },
      });
      expect(attempts.attempts).toBe(2);
      expectSeeded(await linesOf(done));
      const artifact = await suite.server.prisma.jobArtifact.findFirstOrThrow({
        where: { jobId: job.jobId },
        select: { chunks: true },
      });
      expect(await chunksOf(job.jobId)).toBe(artifact.chunks);
    } finally {
      await Promise.all(workers.map((worker) => worker.kill()));
    }
  }, 90_000);
});
