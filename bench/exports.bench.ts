import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import { csvCopy, EXPORT_SESSION } from '../src/data/exports.ts';
import type { FieldDefinition } from '../src/data/field-types.ts';
import { columnOf, rowsTableOf } from '../src/data/identifiers.ts';
import { api, median, startServers, workerArgs, type Servers, spawnChild } from './harness.ts';

/**
 * CSV export (issue 15): BENCH_EXPORT_ROWS (default 1,000,000) rows of 8 typed columns exported end to end through
 * REST (`POST …/exports` → 202 → poll the statusUrl every 20 ms until the artifact is downloadable), against
 * PostgreSQL's own `COPY (SELECT … ORDER BY id) TO STDOUT WITH CSV` of the same rows read through `pg` with
 * pg-copy-streams in this process. Same machine, same PostgreSQL, same run, alternating rounds.
 *
 * The ratio is raw COPY seconds / end-to-end seconds (target ≥ 0.5). The export runs in a worker process of its
 * own (`src/bin/worker.ts`); its peak RSS growth is VmHWM at the end of a round minus VmRSS just before it (Linux
 * /proc), target < 150 MB for 1M rows. The download of the artifact is timed separately: it streams from the
 * chunks, is hashed as it arrives and checked against the artifact's sha256, and the API process's RSS is sampled
 * every 20 ms during it (growth = the highest sample minus VmRSS just before).
 */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ROWS = Number(process.env.BENCH_EXPORT_ROWS ?? 1_000_000);
const POLL_MS = 20;
const TERMINAL = new Set(['succeeded', 'failed', 'partially_completed', 'cancelled']);

const STATUSES = ['open', 'pending', 'closed', 'archived'];
const FIELDS = [
  { name: 'Code', type: 'text', required: true, options: { maxLength: 20 } },
  { name: 'Name', type: 'text', required: true },
  { name: 'Quantity', type: 'integer' },
  { name: 'Price', type: 'number' },
  { name: 'Active', type: 'boolean' },
  { name: 'Due', type: 'date' },
  { name: 'Updated', type: 'datetime' },
  { name: 'Status', type: 'select', options: { choices: STATUSES } },
];

interface BenchTable {
  databaseId: string;
  tableId: string;
  path: string;
  columns: string[];
  fields: FieldDefinition[];
}

async function createBenchTable(servers: Servers): Promise<BenchTable> {
  const database = await api(servers, 'POST', `/v1/orgs/${servers.orgId}/databases`, { name: `Bench ${Date.now()}` });
  const table = await api(servers, 'POST', `/v1/orgs/${servers.orgId}/databases/${database.id}/tables`, {
    name: 'Products',
    fields: FIELDS,
  });
  const fields = table.fields as FieldDefinition[];
  const columns = fields.map((field) => columnOf(field.id));
  return {
    databaseId: database.id,
    tableId: table.id,
    path: `/v1/orgs/${servers.orgId}/databases/${database.id}/tables/${table.id}`,
    columns,
    fields,
  };
}

/** Rows straight into the physical table in one statement (as imports.bench.ts); setseed keeps them the same. */
async function loadRows(client: pg.Client, table: BenchTable): Promise<void> {
  await client.query('SELECT setseed(0.42)');
  await client.query(
    `INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)} (id, version, created_at, updated_at, ${table.columns.join(', ')})
    SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), 'K' || lpad(g::text, 7, '0'), 'Customer "' || g || '", Ltd',
           floor(random() * 1000)::int, round((random() * 1000)::numeric, 2), random() < 0.5,
           date '2020-01-01' + floor(random() * 2000)::int, timestamptz '2024-01-01 00:00:00Z' + random() * interval '365 days',
           ($2::text[])[1 + floor(random() * 4)::int]
      FROM generate_series(1, $1::int) AS g`,
    [ROWS, STATUSES],
  );
  await client.query('UPDATE public.data_tables SET row_count = $1 WHERE id = $2', [ROWS, table.tableId]);
  await client.query(`VACUUM (ANALYZE) ${rowsTableOf(table.databaseId, table.tableId)}`);
}

async function timedCopy(client: pg.Client, statement: string): Promise<{ seconds: number; bytes: number }> {
  const started = performance.now();
  let bytes = 0;
  await pipeline(
    client.query(copyTo(statement)),
    new Writable({
      write(chunk: Buffer, _encoding, callback) {
        bytes += chunk.length;
        callback();
      },
    }),
  );
  return { seconds: (performance.now() - started) / 1000, bytes };
}

/** PostgreSQL's own CSV of the same rows in the same order, consumed and counted (the reference). */
function rawCopy(client: pg.Client, table: BenchTable): Promise<{ seconds: number; bytes: number }> {
  return timedCopy(
    client,
    `COPY (SELECT ${table.columns.join(', ')} FROM ${rowsTableOf(table.databaseId, table.tableId)} ORDER BY id) TO STDOUT WITH CSV`,
  );
}

/** The export's own COPY statement (values in the export's formats), alone: what the job adds beyond it is its own. */
async function formattedCopy(client: pg.Client, table: BenchTable): Promise<{ seconds: number; bytes: number }> {
  const plan = csvCopy({
    databaseId: table.databaseId,
    tableId: table.tableId,
    fields: table.fields,
    columns: table.fields,
    where: null,
    keys: [],
  });
  await client.query('BEGIN');
  for (const setting of EXPORT_SESSION) await client.query(setting);
  try {
    return await timedCopy(client, plan.copy);
  } finally {
    await client.query('COMMIT');
  }
}

function memoryOf(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

async function serviceExport(
  servers: Servers,
  table: BenchTable,
  worker: ChildProcess,
): Promise<{ seconds: number; download: number; bytes: number; growth: number; apiGrowth: number }> {
  const before = memoryOf(worker.pid!);
  const started = performance.now();
  const handle = await api(servers, 'POST', `${table.path}/exports`, { format: 'csv', fileName: 'products.csv' });
  let job: any;
  do {
    await sleep(POLL_MS);
    job = await api(servers, 'GET', handle.statusUrl);
  } while (!TERMINAL.has(job.state));
  const seconds = (performance.now() - started) / 1000;
  if (job.state !== 'succeeded' || job.result.rowsDone !== ROWS)
    throw new Error(`the export ended ${job.state}: ${JSON.stringify(job.error ?? job.result)}`);
  const after = memoryOf(worker.pid!);
  const download = await timedDownload(servers, job.artifacts[0]);
  return { seconds, ...download, growth: after.hwm - before.rss };
}

/** Streams the artifact through REST, hashing it, while sampling the API process's RSS. */
async function timedDownload(
  servers: Servers,
  artifact: { url: string; size: number; sha256: string },
): Promise<{ download: number; bytes: number; apiGrowth: number }> {
  const before = memoryOf(servers.pid).rss;
  let peak = before;
  const sampler = setInterval(() => {
    peak = Math.max(peak, memoryOf(servers.pid).rss);
  }, POLL_MS);
  const started = performance.now();
  try {
    const response = await fetch(`http://127.0.0.1:${servers.servicePort}${artifact.url}`, {
      headers: { authorization: `Bearer ${servers.apiKey}` },
    });
    const hash = createHash('sha256');
    let bytes = 0;
    for await (const part of response.body as unknown as AsyncIterable<Uint8Array>) {
      hash.update(part);
      bytes += part.length;
    }
    const digest = hash.digest('hex');
    if (response.status !== 200 || bytes !== artifact.size || digest !== artifact.sha256)
      throw new Error(`download: ${response.status}, ${bytes} bytes, sha256 ${digest}`);
    return { download: (performance.now() - started) / 1000, bytes, apiGrowth: peak - before };
  } finally {
    clearInterval(sampler);
  }
}

async function startWorker(databaseUrl: string): Promise<{ process: ChildProcess; stop(): Promise<void> }> {
  const env = {
    ...process.env,
    NODE_ENV: process.env.NODE_ENV ?? 'production',
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: 'info',
  };
  const child = spawnChild(process.execPath, workerArgs(), {
    stdio: ['ignore', 'pipe', 'inherit'],
    env,
  });
  const lines = createInterface({ input: child.stdout! });
  await new Promise<void>((resolve, reject) => {
    lines.on('line', (line) => {
      let entry: { level?: number; msg?: string } = {};
      try {
        entry = JSON.parse(line);
      } catch {
        process.stderr.write(`worker: ${line}\n`);
      }
      if (entry.msg === 'worker started') resolve();
      else if ((entry.level ?? 0) >= 40) process.stderr.write(`worker: ${line}\n`);
    });
    child.once('exit', (code) => reject(new Error(`bench worker exited (${code})`)));
  });
  return {
    process: child,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

const MB = 1024 * 1024;

async function main(): Promise<void> {
  const servers = await startServers();
  const client = new pg.Client({ connectionString: servers.databaseUrl });
  let worker: Awaited<ReturnType<typeof startWorker>> | undefined;
  try {
    await client.connect();
    const table = await createBenchTable(servers);
    await loadRows(client, table);
    worker = await startWorker(servers.databaseUrl);
    const raw: number[] = [];
    const service: number[] = [];
    const growth: number[] = [];
    const downloads: number[] = [];
    const apiGrowth: number[] = [];
    for (let round = 1; round <= ROUNDS; round += 1) {
      const copy = await rawCopy(client, table);
      const formatted = await formattedCopy(client, table);
      const exported = await serviceExport(servers, table, worker.process);
      raw.push(copy.seconds);
      service.push(exported.seconds);
      growth.push(exported.growth);
      downloads.push(exported.download);
      apiGrowth.push(exported.apiGrowth);
      console.log(
        `round ${round}: raw COPY ${copy.seconds.toFixed(2)} s (${(copy.bytes / MB).toFixed(1)} MB), the export's COPY alone ${formatted.seconds.toFixed(2)} s, export end to end ${exported.seconds.toFixed(2)} s` +
          ` (${(exported.bytes / MB).toFixed(1)} MB, download ${exported.download.toFixed(2)} s), ratio ${(copy.seconds / exported.seconds).toFixed(2)},` +
          ` worker peak RSS growth ${(exported.growth / MB).toFixed(0)} MB, API RSS growth during the download ${(exported.apiGrowth / MB).toFixed(0)} MB`,
      );
    }
    const [rawMedian, serviceMedian] = [median(raw), median(service)];
    console.log(
      `CSV export of ${ROWS} rows: raw COPY median ${rawMedian.toFixed(2)} s (${Math.round(ROWS / rawMedian)} rows/s),` +
        ` end to end median ${serviceMedian.toFixed(2)} s (${Math.round(ROWS / serviceMedian)} rows/s), ratio ${(rawMedian / serviceMedian).toFixed(2)} (target ≥ 0.5),` +
        ` worker peak RSS growth max ${(Math.max(...growth) / MB).toFixed(0)} MB (target < 150 MB);` +
        ` download median ${median(downloads).toFixed(2)} s, API RSS growth during it max ${(Math.max(...apiGrowth) / MB).toFixed(0)} MB`,
    );
  } finally {
    await worker?.stop();
    await client.end();
    servers.stop();
  }
}

await main();
