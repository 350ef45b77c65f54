import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { bootstrapOrg } from '../src/identity/provision.ts';
import { loadConfig } from '../src/kernel/config.ts';
import { createDatabaseSchema, createTable } from '../src/data/ddl.ts';
import { columnOf, historyTableOf, rowsTableOf, schemaOf } from '../src/data/identifiers.ts';
import { ensureDatabase, openDatabase } from '../src/db/database.ts';
import { migrate } from '../src/db/migrate.ts';
import { createPrisma } from '../src/db/prisma.ts';
import { newId } from '../src/kernel/ids.ts';
import { insertJob } from '../src/jobs/engine/sql/queue.ts';
import { startWorker } from '../src/jobs/start-worker.ts';
import { createLogger } from '../src/kernel/log.ts';

/**
 * Backup and restore of a BENCH_BACKUP_ROWS-row database (1,000,000 by default; one table of three fields and one
 * history entry per row), through the real job kinds on an in-process worker, against `pg_dump -Fc -n <schema>`
 * and `pg_restore` of the same schema in the same run. Target: each ≥ 0.5 of the raw tool's throughput.
 * `BENCH_DATABASE_URL` picks the server (embedded otherwise); pg_dump / pg_restore of a matching major version
 * must be on PATH. It drops and recreates `wds_bench_backups` and `wds_bench_backups_raw`.
 */
const ROWS = Number(process.env.BENCH_BACKUP_ROWS ?? 1_000_000);
const run = promisify(execFile);
const logger = createLogger('silent');
const server = await openDatabase(
  loadConfig(process.env, { LOG_LEVEL: 'silent', DATABASE_URL: process.env.BENCH_DATABASE_URL ?? '' }),
  logger,
);

async function freshDatabase(name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
  return ensureDatabase(server.url, name);
}

const url = await freshDatabase('wds_bench_backups');
await migrate(url);
const dir = mkdtempSync(join(tmpdir(), 'wds-bench-backups-'));
const config = loadConfig(process.env, {
  LOG_LEVEL: 'silent',
  DATABASE_URL: url,
  BACKUP_DIR: dir,
  JOB_POLL_MS: '20',
  JOB_CONCURRENCY: '1',
});
const prisma = createPrisma(url, 4);
const { orgId, userId } = await bootstrapOrg(prisma, {
  orgName: 'Bench',
  email: `bench-${Date.now()}@example.com`,
  name: 'Bench',
});
const pool = new pg.Pool({ connectionString: url, max: 2 });

// The workspace: catalog rows and the physical table, filled in bulk.
const databaseId = newId();
const tableId = newId();
const fields = [
  { id: newId(), name: 'Name', type: 'text' as const, required: false, options: { maxLength: 1000 }, position: 0 },
  { id: newId(), name: 'Age', type: 'integer' as const, required: false, options: {}, position: 1 },
  {
    id: newId(),
    name: 'Note',
    type: 'longText' as const,
    required: false,
    options: { maxLength: 100000 },
    position: 2,
  },
];
await prisma.database.create({ data: { id: databaseId, orgId, name: 'Bench' } });
await prisma.dataTable.create({ data: { id: tableId, orgId, databaseId, name: 'People', rowCount: ROWS } });
for (const field of fields) await prisma.field.create({ data: { ...field, tableId } });
for (const statement of [...createDatabaseSchema(databaseId), ...createTable(databaseId, tableId, fields)])
  await pool.query(statement.sql);
const [name, age, note] = fields.map((field) => columnOf(field.id));
const fillStarted = performance.now();
await pool.query(`INSERT INTO ${rowsTableOf(databaseId, tableId)} (id, version, created_at, updated_at, ${name}, ${age}, ${note})
  SELECT lpad(n::text, 26, '0'), 1, now(), now(), 'Person ' || n, n % 100, md5(n::text) || ' ' || md5((n * 7)::text) FROM generate_series(1, ${ROWS}) AS n`);
await pool.query(`INSERT INTO ${historyTableOf(databaseId, tableId)} (row_id, version, field_id, operation, value, mutation_id, actor_id, actor_kind, actor_name, changed_at)
  SELECT lpad(n::text, 26, '0'), 1, '${fields[0]!.id}', 'create', to_jsonb('Person ' || n), lpad(n::text, 26, '0'), '${userId}', 'user', 'Bench', now() FROM generate_series(1, ${ROWS}) AS n`);
await pool.query('VACUUM ANALYZE');
console.log(
  `filled ${ROWS} rows (+ ${ROWS} history entries) in ${((performance.now() - fillStarted) / 1000).toFixed(1)} s`,
);

const actor = { id: userId, kind: 'user', key: null, name: 'Bench' };
const worker = startWorker(prisma, config, logger);

/** Enqueues a job as a request would, waits for it, and answers the job's own running time. */
async function timedJob(kind: string, payload: unknown): Promise<{ seconds: number; result: any }> {
  const id = newId();
  const statement = insertJob({
    id,
    orgId,
    kind,
    databaseId,
    tableId: null,
    payload,
    serialKey: null,
    maxAttempts: 1,
    actor,
    runAt: null,
  });
  await pool.query(statement.sql, statement.params as unknown[]);
  for (;;) {
    const {
      rows: [job],
    } = await pool.query(
      'SELECT state, result, error, extract(epoch FROM finished_at - started_at)::float8 AS seconds FROM jobs WHERE id = $1',
      [id],
    );
    if (job.state === 'succeeded') return { seconds: job.seconds, result: job.result };
    if (['failed', 'cancelled'].includes(job.state))
      throw new Error(`${kind} ${job.state}: ${JSON.stringify(job.error)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return (performance.now() - started) / 1000;
}

const schema = schemaOf(databaseId).replaceAll('"', '');
const dumpFile = join(dir, 'raw.dump');
const rawDump = await timed(() => run('pg_dump', ['-Fc', '-n', schema, '-f', dumpFile, url]));
const backup = await timedJob('runDatabaseBackup', { scheduledFor: null });
const rawUrl = await freshDatabase('wds_bench_backups_raw');
const rawRestore = await timed(() => run('pg_restore', ['-d', rawUrl, dumpFile]));
const {
  rows: [database],
} = await pool.query('SELECT version::text AS version FROM databases WHERE id = $1', [databaseId]);
const restore = await timedJob('restoreDatabaseBackup', {
  backupId: backup.result.backupId,
  target: 'replace',
  expectedVersion: database.version,
});

const line = (what: string, ours: number, raw: number) =>
  console.log(
    `${what.padEnd(8)} service ${ours.toFixed(2)} s (${Math.round(ROWS / ours)} rows/s)  raw ${raw.toFixed(2)} s (${Math.round(ROWS / raw)} rows/s)  ratio ${(raw / ours).toFixed(2)} (target ≥ 0.5)`,
  );
line('backup', backup.seconds, rawDump);
line('restore', restore.seconds, rawRestore);
console.log(`sizes: service ${backup.result.sizeBytes} bytes, pg_dump -Fc ${statSync(dumpFile).size} bytes`);

await worker.stop();
await pool.end();
await prisma.$disconnect();
rmSync(dir, { recursive: true, force: true });
await server.close?.();
