import { spawn } from 'node:child_process';
import { once } from 'node:events';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { columnOf, rowsTableOf } from '../src/data/identifiers.ts';
import { startWorker } from '../src/jobs/start-worker.ts';
import { createLogger } from '../src/kernel/log.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { allRows, controlJob, tableActivity } from './helpers/jobs.ts';
import { conversionLeftovers, NO_LEFTOVERS, schemaChangeApi } from './helpers/schema-changes.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createTable, type TestTable } from './helpers/workspace.ts';

/**
 * A conversion whose worker is killed mid-backfill resumes on another worker to the same result, and a conversion
 * cancelled mid-backfill leaves the table exactly as it was (and runs again to completion on retry). The server
 * runs no worker. The workers that are killed are `dist/worker.js` processes with a 2 s lease; the others (the
 * one that resumes, the one whose job is cancelled) run in the test's process: another worker all the same, without
 * the ~2 s of CPU a process takes to start. The backfill is held at exact points by row locks the test takes (no
 * sleeps): pg_stat_activity shows when the worker waits on them.
 */
const suite = useServerWithOrg({ RUN_WORKER: 'false' });
const admin = () => suite.org.adminKey;
type Body = Record<string, unknown>;

interface WorkerProcess {
  kill(): Promise<void>;
}

const workers: WorkerProcess[] = [];
const sessions: Session[] = [];
afterEach(async () => {
  await Promise.all(sessions.splice(0).map((session) => session.release().catch(() => undefined)));
  await Promise.all(workers.splice(0).map((worker) => worker.kill()));
});

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
  const worker = {
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGKILL');
      await exited;
    },
  };
  workers.push(worker);
  return worker;
}

/** A worker in this process, polling as often as the spawned ones. */
function localWorker(): WorkerProcess {
  const worker = startWorker(suite.server.prisma, { ...suite.server.config, JOB_POLL_MS: 50 }, createLogger('silent'));
  const handle = { kill: () => worker.stop() };
  workers.push(handle);
  return handle;
}

/** A test-held connection: its transaction's locks hold the worker at a known point. */
class Session {
  private constructor(
    readonly client: pg.Client,
    readonly pid: number,
  ) {}

  static async open(): Promise<Session> {
    const client = new pg.Client({ connectionString: suite.server.database.url });
    await client.connect();
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    await client.query('BEGIN');
    const session = new Session(client, rows[0]!.pid);
    sessions.push(session);
    return session;
  }

  async release(): Promise<void> {
    await this.client.query('COMMIT');
    await this.client.end();
  }
}

async function waitUntil(check: () => Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  await expect.poll(check, { timeout: timeoutMs, interval: 0, message: `${what}: not in time` }).toBe(true);
}

/** Some backend waits on a lock while running a statement like `pattern`. */
const lockWait = (pattern: string) =>
  waitUntil(
    async () =>
      (
        await suite.server.prisma.$queryRaw<{ pid: number }[]>`
  SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE ${pattern}`
      ).length > 0,
    `a lock wait on ${pattern}`,
  );

const { apply, accepted, finished, schemaOf } = schemaChangeApi(suite);

async function journalOf(
  jobId: string,
): Promise<{ state: string; attempts: number; journal: { phase?: string; done?: number } }> {
  const job = await suite.server.prisma.job.findUniqueOrThrow({ where: { id: jobId } });
  return { state: job.state, attempts: job.attempts, journal: job.journal as { phase?: string; done?: number } };
}

/**
 * Backfill batches are 5,000 rows: 17,000 rows is three whole batches and a short last one. The hold lands inside
 * the batch after the one that committed before the gate opened: the first, or the second when the worker slipped
 * one step past the gate on a loaded machine (12,000 rows left no room for that: a suite run failed on it). Either
 * way a committed batch lies behind the held worker and more than a batch ahead of it (a resumed or retried run
 * goes through a whole batch and a short one), and 17 values do not convert.
 */
const SEEDED = 17_000;
const UNCONVERTIBLE = SEEDED / 1_000;
const seededId = (n: number) => `0${String(n).padStart(25, '0')}`;

/** `SEEDED` rows in one statement; Code is the row's number as text, except every 1,000th, which is `x<n>`. */
async function seededTable(): Promise<TestTable> {
  const table = await createTable(suite.server, suite.org, [
    { name: 'Name', type: 'text' },
    { name: 'Code', type: 'text', options: { maxLength: 30 } },
  ]);
  await suite.server.prisma.$executeRawUnsafe(
    `
    INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)} (id, version, created_at, updated_at, ${columnOf(table.fields.Name!)}, ${columnOf(table.fields.Code!)})
    SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), 'Seed ' || g, CASE WHEN g % 1000 = 0 THEN 'x' || g ELSE g::text END
      FROM generate_series(1, $1::int) AS g`,
    SEEDED,
  );
  await suite.server.prisma.$executeRawUnsafe(
    'UPDATE public.data_tables SET row_count = $1 WHERE id = $2',
    SEEDED,
    table.tableId,
  );
  return table;
}

/**
 * Starts a conversion and holds its worker inside a backfill step: the catalog row is held so the first step waits
 * in its transaction, the job row is then requested FOR SHARE behind it (the next steps wait for it), a row two
 * batches further is locked, and the gate opens: the worker commits one batch and waits inside the next, on that row.
 * Returns the rows backfilled (committed) at that point.
 */
async function holdInsideBackfill(
  table: TestTable,
  change: Body,
): Promise<{ jobId: string; statusUrl: string; done: number; releaseRow(): Promise<void> }> {
  const catalog = await Session.open();
  await catalog.client.query('SELECT 1 FROM public.data_tables WHERE id = $1 FOR UPDATE', [table.tableId]);
  const handle = accepted(await apply(table, change));
  await lockWait('SELECT schema_version FROM public.data_tables WHERE id = $1::bpchar%');
  const gate = await Session.open();
  const gated = gate.client.query('SELECT 1 FROM public.jobs WHERE id = $1 FOR SHARE', [handle.jobId]);
  await waitUntil(
    async () =>
      (
        await suite.server.prisma.$queryRaw<{ waiting: boolean }[]>`
    SELECT wait_event_type = 'Lock' AS waiting FROM pg_stat_activity WHERE pid = ${gate.pid}`
      )[0]?.waiting === true,
    'the gate waiting',
  );
  await catalog.release();
  await gated;
  const paused = await journalOf(handle.jobId);
  expect(paused.journal.phase).toBe('backfill');
  const before = paused.journal.done!;
  expect(before + 7_345).toBeLessThanOrEqual(SEEDED);
  const row = await Session.open();
  await row.client.query(`SELECT 1 FROM ${rowsTableOf(table.databaseId, table.tableId)} WHERE id = $1 FOR UPDATE`, [
    seededId(before + 7_345),
  ]);
  await gate.release();
  await lockWait(`UPDATE ${rowsTableOf(table.databaseId, table.tableId)} t SET%`);
  const held = await journalOf(handle.jobId);
  expect(held).toMatchObject({ state: 'running', journal: { phase: 'backfill', done: before + 5_000 } });
  return { ...handle, done: before + 5_000, releaseRow: () => row.release() };
}

const leftovers = (table: TestTable) => conversionLeftovers(suite.server, table);
const NONE = NO_LEFTOVERS;

/** The Code cell of every row, by row id. */
async function codes(table: TestTable): Promise<Map<string, unknown>> {
  return new Map((await allRows(suite.server, admin(), table)).map((row) => [row.id, row.values[table.fields.Code!]]));
}

/** What a conversion to integer with empty mode must produce: each row's number, empty for every 1,000th. */
function expectConverted(values: Map<string, unknown>): void {
  expect(values.size).toBe(SEEDED);
  const wrong: number[] = [];
  for (let n = 1; n <= SEEDED; n += 1) if (values.get(seededId(n)) !== (n % 1000 === 0 ? null : n)) wrong.push(n);
  expect(wrong).toEqual([]);
}

const CONVERT = (table: TestTable): Body => ({
  kind: 'convert_field',
  fieldId: table.fields.Code,
  type: 'integer',
  onUnconvertible: 'empty',
});

describe('a worker killed mid-backfill', () => {
  it('resumes on a second worker from its last checkpoint to the same result as an uninterrupted run', async () => {
    const table = await seededTable();
    spawnWorker();
    const job = await holdInsideBackfill(table, CONVERT(table));
    const killed = workers[0]!;
    await killed.kill();
    // The killed worker's statement still waits on the row; once it gets it, its connection is gone and the batch
    // rolls back with it.
    await job.releaseRow();
    await waitUntil(
      async () =>
        (
          await suite.server.prisma.$queryRaw<{ n: number }[]>`
      SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE ${`UPDATE ${rowsTableOf(table.databaseId, table.tableId)} t SET%`} AND state <> 'idle'`
        )[0]!.n === 0,
      'the killed worker’s batch ending',
    );
    const atKill = await journalOf(job.jobId);
    expect(atKill).toMatchObject({ state: 'running', attempts: 1, journal: { phase: 'backfill', done: job.done } });

    localWorker();
    const resumed = await finished(job.statusUrl);
    expect((await journalOf(job.jobId)).attempts).toBe(2);
    expect(resumed.state, JSON.stringify(resumed)).toBe('partially_completed');

    // The reference: an identical table converted once, without interruption.
    const reference = await seededTable();
    const clean = await finished(accepted(await apply(reference, CONVERT(reference))).statusUrl);
    expect((await journalOf(clean.jobId)).attempts).toBe(1);
    const shape = (result: unknown) => {
      const { fieldId: _fieldId, report, ...rest } = result as { fieldId: string; report: Body };
      return { ...rest, report: { ...report, sha256: 'x', size: 'x' } };
    };
    expect(shape(resumed.result)).toEqual(shape(clean.result));
    expect(resumed.result).toMatchObject({
      schemaVersion: table.schemaVersion + 1,
      converted: SEEDED - UNCONVERTIBLE,
      emptied: UNCONVERTIBLE,
      report: { rows: UNCONVERTIBLE, truncated: false },
    });
    expect(resumed.progress).toEqual({ done: SEEDED, total: SEEDED });

    expectConverted(await codes(table));
    expectConverted(await codes(reference));
    expect((await schemaOf(table)).fields[1]).toMatchObject({ type: 'integer', options: {} });
    expect(await leftovers(table)).toEqual(NONE);
    const events = (await tableActivity(suite.server, admin(), table))
      .filter((entry) => entry.jobId === job.jobId)
      .map((entry) => entry.event);
    expect(events).toEqual(['job.applySchemaChange.queued', 'job.applySchemaChange.partially_completed']);
  }, 120_000);
});

describe('cancelling a running conversion', () => {
  it('leaves the table exactly as before (no shadow column, trigger or side table); a retry then converts it', async () => {
    const table = await seededTable();
    const schemaBefore = await schemaOf(table);
    const codesBefore = await codes(table);
    localWorker();
    const job = await holdInsideBackfill(table, CONVERT(table));
    const during = await leftovers(table);
    expect(during.columns).toEqual([`x_${job.jobId.toLowerCase()}`]);
    expect(during.triggers).toEqual([`c_${job.jobId.toLowerCase()}`]);

    // The cancel queues behind the step in progress (the job's step lock, src/jobs/engine/sql/queue.ts), so the very
    // next step sees it: however fast the worker asks for that step, the cancel was asking first.
    const cancel = controlJob(suite.server, admin(), suite.org.orgId, job.jobId, 'cancel');
    await lockWait('%SET cancel_requested = true%');
    await job.releaseRow();
    const response = await cancel;
    expect(response.status, response.text).toBe(200);
    expect(response.body).toMatchObject({ jobId: job.jobId, state: 'running' });

    const cancelled = await finished(job.statusUrl);
    expect(cancelled).toMatchObject({ state: 'cancelled', result: null, error: null });
    expect(cancelled.progress.done).toBe(job.done + 5_000);
    expect(await leftovers(table)).toEqual(NONE);
    expect(await schemaOf(table)).toEqual(schemaBefore);
    expect(await codes(table)).toEqual(codesBefore);

    const retried = await controlJob(suite.server, admin(), suite.org.orgId, job.jobId, 'retry');
    expect(retried.status, retried.text).toBe(200);
    expect(retried.body).toMatchObject({ jobId: job.jobId, state: 'queued', progress: { done: 0, total: null } });
    const done = await finished(job.statusUrl);
    expect(done.state, JSON.stringify(done)).toBe('partially_completed');
    expect(done.result).toMatchObject({
      schemaVersion: table.schemaVersion + 1,
      converted: SEEDED - UNCONVERTIBLE,
      emptied: UNCONVERTIBLE,
    });
    expectConverted(await codes(table));
    expect(await leftovers(table)).toEqual(NONE);

    const events = (await tableActivity(suite.server, admin(), table))
      .filter((entry) => entry.jobId === job.jobId)
      .map((entry) => entry.event);
    expect(events).toEqual([
      'job.applySchemaChange.queued',
      'job.applySchemaChange.cancelled',
      'job.applySchemaChange.queued',
      'job.applySchemaChange.partially_completed',
    ]);
  }, 120_000);

  it('a failed conversion, retried once its bad values are fixed, succeeds', async () => {
    const table = await seededTable();
    localWorker();
    const handle = accepted(await apply(table, { kind: 'convert_field', fieldId: table.fields.Code, type: 'integer' }));
    const failed = await finished(handle.statusUrl);
    expect(failed.state).toBe('failed');
    expect(failed.error).toMatchObject({ code: 'VALIDATION_FAILED', details: { unconvertible: UNCONVERTIBLE } });
    await suite.server.prisma.$executeRawUnsafe(
      `UPDATE ${rowsTableOf(table.databaseId, table.tableId)} SET ${columnOf(table.fields.Code!)} = NULL WHERE ${columnOf(table.fields.Code!)} LIKE 'x%'`,
    );
    expect((await controlJob(suite.server, admin(), suite.org.orgId, failed.jobId, 'retry')).status).toBe(200);
    const done = await finished(handle.statusUrl);
    expect(done.state, JSON.stringify(done)).toBe('succeeded');
    expect(done.result).toMatchObject({ converted: SEEDED, emptied: 0 });
    // The retried job's listed artifacts were replaced: one (empty) report.
    expect(done.artifacts.map((artifact) => [artifact.name, artifact.size])).toEqual([['unconvertible.jsonl', 0]]);
    expectConverted(await codes(table));
  }, 120_000);
});

describe('a worker killed during an online unique-rule build', () => {
  it('leaves no rule behind, and a second worker drops the interrupted index, builds it again and cuts over', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'Code', type: 'text', options: { maxLength: 20 } },
    ]);
    const physical = rowsTableOf(table.databaseId, table.tableId);
    await suite.server.prisma.$executeRawUnsafe(`
      INSERT INTO ${physical} (id, version, created_at, updated_at, ${columnOf(table.fields.Code!)})
      SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), 'C-' || g FROM generate_series(1, 1000) AS g`);
    await suite.server.prisma.$executeRawUnsafe(
      'UPDATE public.data_tables SET row_count = 1000 WHERE id = $1',
      table.tableId,
    );

    // An open writing transaction: CREATE INDEX CONCURRENTLY waits for it before it builds.
    const writer = await Session.open();
    await writer.client.query(
      `UPDATE ${physical} SET ${columnOf(table.fields.Code!)} = ${columnOf(table.fields.Code!)} WHERE id = $1`,
      [seededId(1)],
    );
    spawnWorker();
    const handle = accepted(await apply(table, { kind: 'add_unique_rule', fieldIds: ['Code'] }));
    await lockWait('CREATE UNIQUE INDEX CONCURRENTLY%');
    await workers[0]!.kill();
    await writer.release();
    await waitUntil(
      async () =>
        (
          await suite.server.prisma.$queryRaw<{ n: number }[]>`
      SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'CREATE UNIQUE INDEX CONCURRENTLY%' AND state <> 'idle'`
        )[0]!.n === 0,
      'the killed worker’s build ending',
    );
    expect(await journalOf(handle.jobId)).toMatchObject({ state: 'running', attempts: 1, journal: { phase: 'build' } });
    expect((await schemaOf(table)).uniqueRules).toEqual([]);

    localWorker();
    const job = await finished(handle.statusUrl);
    expect(job.state, JSON.stringify(job)).toBe('succeeded');
    expect((await journalOf(handle.jobId)).attempts).toBe(2);
    const ruleId = (job.result as { ruleId: string }).ruleId;
    const schema = await schemaOf(table);
    expect(schema.uniqueRules.map((rule) => rule.id)).toEqual([ruleId]);
    const indexes = await suite.server.prisma.$queryRaw<{ name: string; valid: boolean }[]>`
      SELECT c.relname::text AS name, i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
       WHERE i.indrelid = to_regclass(${physical}) AND starts_with(c.relname, 'u_')`;
    expect(indexes).toEqual([{ name: `u_${ruleId.toLowerCase()}`, valid: true }]);
    const clash = await suite.server.request('POST', `${table.path}/rows`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedSchemaVersion: schema.schemaVersion, values: { Code: 'C-7' } },
    });
    expect(clash.status, clash.text).toBe(409);
  }, 120_000);
});

describe('cancelling a running unique-rule build', () => {
  it('drops the index built so far, records no rule, and finishes cancelled', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'Code', type: 'text', options: { maxLength: 20 } },
    ]);
    const physical = rowsTableOf(table.databaseId, table.tableId);
    await suite.server.prisma.$executeRawUnsafe(`
      INSERT INTO ${physical} (id, version, created_at, updated_at, ${columnOf(table.fields.Code!)})
      SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), 'C-' || g FROM generate_series(1, 100) AS g`);
    await suite.server.prisma.$executeRawUnsafe(
      'UPDATE public.data_tables SET row_count = 100 WHERE id = $1',
      table.tableId,
    );
    const before = await schemaOf(table);

    const writer = await Session.open();
    await writer.client.query(
      `UPDATE ${physical} SET ${columnOf(table.fields.Code!)} = ${columnOf(table.fields.Code!)} WHERE id = $1`,
      [seededId(1)],
    );
    localWorker();
    const handle = accepted(await apply(table, { kind: 'add_unique_rule', fieldIds: ['Code'] }));
    await lockWait('CREATE UNIQUE INDEX CONCURRENTLY%');
    const cancel = await controlJob(suite.server, admin(), suite.org.orgId, handle.jobId, 'cancel');
    expect(cancel.status, cancel.text).toBe(200);
    expect(cancel.body).toMatchObject({ jobId: handle.jobId, state: 'running' });
    await writer.release();

    const job = await finished(handle.statusUrl);
    expect(job).toMatchObject({ state: 'cancelled', result: null, error: null });
    expect(await schemaOf(table)).toEqual(before);
    const indexes = await suite.server.prisma.$queryRaw<{ name: string }[]>`
      SELECT c.relname::text AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = to_regclass(${physical}) AND starts_with(c.relname, 'u_')`;
    expect(indexes).toEqual([]);
    const events = (await tableActivity(suite.server, admin(), table))
      .filter((entry) => entry.jobId === handle.jobId)
      .map((entry) => entry.event);
    expect(events).toEqual(['job.createUniqueRule.queued', 'job.createUniqueRule.cancelled']);
  }, 120_000);
});
