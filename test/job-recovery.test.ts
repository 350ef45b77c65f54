import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { columnOf, historyTableOf, rowsTableOf } from '../src/data/identifiers.ts';
import { startWorker } from '../src/jobs/start-worker.ts';
import { createLogger } from '../src/kernel/log.ts';
import { JobResponse } from '../src/contracts/job-results.ts';
import { allRows, mappingOf, reportOf, requestImport, requestPreview, waitForJob } from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { addUniqueRule, createTable, refreshSchemaVersion, type TestTable } from './helpers/workspace.ts';

/**
 * A worker killed mid-job (SIGKILL: no handover, its lease simply runs out) and a second worker that reclaims the
 * job resume it from its last checkpoint to the same result as a run that was never interrupted. The server runs no
 * worker; the killed workers are separate `dist/worker.js` processes with a 2 s lease, and the second worker runs in
 * the test's process (another worker all the same, without the ~2 s of CPU a process takes to start).
 */
const suite = useServerWithOrg({ RUN_WORKER: 'false' });
const admin = () => suite.org.adminKey;

interface WorkerProcess {
  child: ChildProcess;
  kill(): Promise<void>;
  stop(): Promise<void>;
}

function spawnWorker(): WorkerProcess {
  // The built worker (test/global-setup.ts builds dist/ from the sources under test), as `npm run worker` runs it.
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
  const signal = async (name: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, name);
    await exited;
  };
  return { child, kill: () => signal('SIGKILL'), stop: () => signal('SIGTERM') };
}

/** A worker in this process, polling as often as the spawned ones. */
function localWorker(): Pick<WorkerProcess, 'kill' | 'stop'> {
  const worker = startWorker(suite.server.prisma, { ...suite.server.config, JOB_POLL_MS: 50 }, createLogger('silent'));
  return { kill: () => worker.stop(), stop: () => worker.stop() };
}

async function withWorkers<T>(run: (workers: Pick<WorkerProcess, 'kill' | 'stop'>[]) => Promise<T>): Promise<T> {
  const workers: Pick<WorkerProcess, 'kill' | 'stop'>[] = [];
  try {
    return await run(workers);
  } finally {
    await Promise.all(workers.map((worker) => worker.kill()));
  }
}

const FIELDS = [
  { name: 'Name', type: 'text', required: true },
  { name: 'Code', type: 'text', options: { maxLength: 20 } },
  { name: 'Age', type: 'integer' },
];

/** `rows` records; every 997th has a bad Age, every 1,009th repeats an earlier Code, every 1,013th has no Name. */
function csvOf(rows: number): string {
  const lines = ['Name,Code,Age'];
  for (let index = 0; index < rows; index += 1) {
    const code = index % 1_009 === 1_008 ? `C-${index - 500}` : `C-${index}`;
    const age = index % 997 === 996 ? 'old' : String(index % 100);
    const name = index % 1_013 === 1_012 ? '' : `"Person ${index}, the ${index % 7}th"`;
    lines.push(`${name},${code},${age}`);
  }
  return `${lines.join('\r\n')}\r\n`;
}

async function accepted(
  response: Promise<{ status: number; text: string; body: any }>,
): Promise<{ jobId: string; statusUrl: string }> {
  const result = await response;
  expect(result.status, result.text).toBe(202);
  return result.body;
}

async function attemptsOf(jobId: string): Promise<number> {
  const job = await suite.server.prisma.job.findUniqueOrThrow({ where: { id: jobId }, select: { attempts: true } });
  return job.attempts;
}

const HOLD_LOCK = 918_273;

interface CheckpointHold {
  /** Resolves once a worker's step is waiting on the hold, i.e. it cannot commit that checkpoint. */
  reached(): Promise<void>;
  /** Lets the waiting step go on (a killed worker's transaction then rolls back) and removes the hold. */
  release(): Promise<void>;
}

/**
 * Stops a job of `kind` at the checkpoint of `phase` (its journal's) that takes its progress to `progress` or past
 * it: a trigger makes that
 * UPDATE wait on an advisory lock this test holds. The test kills the worker while it waits, so the kill lands
 * mid-job on every machine, however fast or loaded, instead of racing the job to its end.
 */
async function holdCheckpoint(kind: string, phase: string, progress: number): Promise<CheckpointHold> {
  const client = new pg.Client({ connectionString: suite.server.database.url });
  await client.connect();
  await client.query(`SELECT pg_advisory_lock(${HOLD_LOCK})`);
  await client.query(`CREATE FUNCTION test_hold_checkpoint() RETURNS trigger LANGUAGE plpgsql
    AS $$ BEGIN PERFORM pg_advisory_xact_lock(${HOLD_LOCK}); RETURN NEW; END $$`);
  await client.query(`CREATE TRIGGER test_hold_checkpoint BEFORE UPDATE ON public.jobs FOR EACH ROW
    WHEN (NEW.kind = '${kind}' AND NEW.journal->>'phase' = '${phase}' AND OLD.progress_done < ${progress} AND NEW.progress_done >= ${progress})
    EXECUTE FUNCTION test_hold_checkpoint()`);
  return {
    reached: async () => {
      await expect
        .poll(
          async () =>
            (
              await client.query<{ waiting: number }>(
                `SELECT count(*)::int AS waiting FROM pg_locks WHERE locktype = 'advisory' AND objid = ${HOLD_LOCK} AND NOT granted`,
              )
            ).rows[0]!.waiting,
          { timeout: 60_000, interval: 25, message: `no ${kind} job reached the held checkpoint in time` },
        )
        .toBeGreaterThan(0);
    },
    release: async () => {
      // Unlock before dropping: DROP TRIGGER waits for the held step's transaction, which waits for this lock.
      await client.query(`SELECT pg_advisory_unlock(${HOLD_LOCK})`);
      await client.query('DROP TRIGGER test_hold_checkpoint ON public.jobs');
      await client.query('DROP FUNCTION test_hold_checkpoint()');
      await client.end();
    },
  };
}

/** Adds a unique rule (a job) with an in-process worker of its own, stopped before the test's workers start. */
async function addRuleNow(table: TestTable, fieldIds: string[]) {
  const worker = startWorker(suite.server.prisma, suite.server.config, createLogger('silent'));
  try {
    const rule = await addUniqueRule(suite.server, admin(), table, { fieldIds });
    expect(rule.job.state, JSON.stringify(rule.job)).toBe('succeeded');
    return rule;
  } finally {
    await worker.stop();
  }
}

describe('a worker killed mid-job', () => {
  it('a preview resumes on a second worker to the same counts, preview and report as an uninterrupted run', async () => {
    const created = await createTable(suite.server, suite.org, FIELDS);
    await addRuleNow(created, ['Code']);
    const table = await refreshSchemaVersion(suite.server, admin(), created);
    // Three load steps of 10,000 rows: one committed, one held when the worker is killed, one after it.
    const request = { content: csvOf(30_000), fileName: 'big.csv', mapping: mappingOf(table, ['Name', 'Code', 'Age']) };

    await withWorkers(async (workers) => {
      const interrupted = await accepted(requestPreview(suite.server, admin(), table, request));
      // Loading stages 10,000 rows a step: the step that would reach 20,000 waits, so 10,000 are checkpointed.
      const hold = await holdCheckpoint('previewImportRows', 'load', 20_000);
      try {
        workers.push(spawnWorker());
        await hold.reached();
        await workers[0]!.kill();
      } finally {
        await hold.release();
      }
      const atKill = JobResponse.parse(
        (await suite.server.request('GET', interrupted.statusUrl, { token: admin() })).body,
      );
      expect(atKill.state, 'the killed worker still holds the job until its lease runs out').toBe('running');
      expect(atKill.progress).toEqual({ done: 10_000, total: 30_000 });

      workers.push(localWorker());
      const resumed = await waitForJob(suite.server, admin(), interrupted.statusUrl, undefined, 40_000);
      expect(await attemptsOf(resumed.jobId)).toBe(2);

      // The reference: the same file on the same table (a preview inserts nothing), run once without interruption.
      const clean = await waitForJob(
        suite.server,
        admin(),
        (await accepted(requestPreview(suite.server, admin(), table, request))).statusUrl,
        undefined,
        40_000,
      );
      expect(await attemptsOf(clean.jobId)).toBe(1);

      expect(resumed.state).toBe('succeeded');
      expect(resumed.result).toEqual(clean.result);
      expect(resumed.result).toMatchObject({ totalRows: 30_000, report: { truncated: false } });
      // 30 bad ages, 29 missing names and 29 repeated codes in 30,000 lines.
      const invalid = resumed.result.invalidRows;
      expect(invalid).toBeGreaterThan(75);
      const report = await reportOf(suite.server, admin(), resumed);
      expect(new Set(report.map((problem) => problem.line)).size).toBe(invalid);
      expect(report.filter((problem) => problem.code === 'UNIQUE_CONFLICT').length).toBeGreaterThan(25);
      expect(resumed.artifacts[0].sha256).toBe(clean.artifacts[0].sha256);
    });
    // No staging table outlives either job.
    const staging = await suite.server.prisma.$queryRaw<
      { count: number }[]
    >`SELECT count(*)::int AS count FROM pg_tables WHERE schemaname = 'wds_jobs'`;
    expect(staging).toEqual([{ count: 0 }]);
  }, 90_000);

  it('a row import resumes on a second worker and inserts every valid row exactly once', async () => {
    const table = await createTable(suite.server, suite.org, FIELDS);
    const request = {
      content: csvOf(10_000),
      fileName: 'rows.csv',
      mapping: mappingOf(table, ['Name', 'Code', 'Age']),
    };
    let valid = 0;

    await withWorkers(async (workers) => {
      workers.push(spawnWorker());
      const previewed = await waitForJob(
        suite.server,
        admin(),
        (await accepted(requestPreview(suite.server, admin(), table, request))).statusUrl,
        undefined,
        40_000,
      );
      expect(previewed.state).toBe('succeeded');
      valid = previewed.result.validRows;

      // Killed once the inserts have begun: the batch that would take the import to 5,000 rows waits, so some
      // rows are in (four batches of 1,000), not all.
      const rowsTable = rowsTableOf(table.databaseId, table.tableId);
      const hold = await holdCheckpoint('importRows', 'insert', 5_000);
      let handle: { jobId: string; statusUrl: string };
      try {
        handle = await accepted(requestImport(suite.server, admin(), table, previewed.jobId, 'valid-rows-only'));
        await hold.reached();
        await workers[0]!.kill();
      } finally {
        await hold.release();
      }
      const [{ count: atKill }] = (await suite.server.prisma.$queryRawUnsafe<{ count: number }[]>(
        `SELECT count(*)::int AS count FROM ${rowsTable}`,
      )) as [{ count: number }];
      expect(atKill).toBeGreaterThan(0);
      expect(atKill, 'the worker was killed before the last batch').toBeLessThan(valid);
      expect(atKill % 1_000, 'inserts commit in whole batches of 1,000').toBe(0);

      workers.push(localWorker());
      const job = await waitForJob(suite.server, admin(), handle.statusUrl, undefined, 40_000);
      expect(await attemptsOf(job.jobId)).toBe(2);
      expect(job).toMatchObject({
        state: 'partially_completed',
        result: { totalRows: 10_000, validRows: valid, insertedRows: valid, skippedRows: 10_000 - valid },
      });
    });

    const rows = await allRows(suite.server, admin(), table);
    expect(rows).toHaveLength(valid);
    // Names are unique per line of the file (codes repeat: this table has no unique rule).
    const names = rows.map((row) => row.values[table.fields.Name!]);
    expect(new Set(names).size, 'no row was inserted twice').toBe(names.length);
    const name = columnOf(table.fields.Name!);
    const [physical] = (await suite.server.prisma.$queryRawUnsafe<
      { rows: number; names: number; history: number; counted: number }[]
    >(`
      SELECT (SELECT count(*)::int FROM ${rowsTableOf(table.databaseId, table.tableId)}) AS rows,
             (SELECT count(DISTINCT ${name})::int FROM ${rowsTableOf(table.databaseId, table.tableId)}) AS names,
             (SELECT count(*)::int FROM ${historyTableOf(table.databaseId, table.tableId)}) AS history,
             (SELECT row_count::int FROM public.data_tables WHERE id = '${table.tableId}') AS counted`)) as [
      { rows: number; names: number; history: number; counted: number },
    ];
    expect(physical).toEqual({
      rows: rows.length,
      names: rows.length,
      history: rows.length * FIELDS.length,
      counted: rows.length,
    });
    const events = await suite.server.prisma.activityEvent.findMany({
      where: { tableId: table.tableId, event: 'records.changed' },
    });
    expect(events.map((event) => event.affectedRows)).toEqual([rows.length]);
  }, 90_000);
});
