import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse } from 'csv-parse';
import pg from 'pg';
import { columnOf, rowsTableOf } from '../src/data/identifiers.ts';
import { parseCsv } from '../src/jobs/kinds/imports/source.ts';
import { api, median, ratioLine, startServers, workerArgs, type Servers, spawnChild } from './harness.ts';
import { profileDir, profileSince, topSelfTime } from './profile.ts';

/**
 * Import preview (issue 5): a ~4 MiB CSV of 8 typed columns previewed into a 1,000,000-row table with one
 * unconditional unique rule, end to end through REST (`POST …/imports/preview` → 202 → poll the job's statusUrl
 * every 20 ms until it succeeds), against the bare parse of the same bytes by csv-parse alone (the options of
 * src/jobs/kinds/imports/source.ts) in this process. Same machine, same PostgreSQL, same run, alternating rounds.
 *
 * The ratio is bare parse seconds / end-to-end seconds: how close a preview comes to the parser's own speed.
 * The service's own parseCsv (csv-parse plus its physical line numbers) is timed too, as a third reference.
 *
 * The job runs in a worker process of its own (`src/bin/worker.ts`, as `npm run worker` runs it) beside the bench
 * servers, which run no worker. BENCH_PROFILE=1 profiles that worker as well as the servers (the job's CPU is spent
 * there) and prints its top self-time functions when it stops.
 *
 * The file is mostly valid; every check does real work and the expected outcome is known exactly (checked):
 * - some lines have one invalid cell (bad integer, decimal, boolean, date, timestamp, choice, or a missing name);
 * - some codes collide with existing rows (unique check against the 1M rows, through the rule's index);
 * - some codes repeat an earlier line of the file (the within-file unique check);
 * - some names are quoted (commas, doubled quotes) and some are not ASCII.
 * Each line falls in exactly one of those classes, so invalidRows = bad cells + collisions + repeats.
 *
 * Besides the job's own timeline (createdAt/startedAt/finishedAt), the poll loop reads the job's journal phase
 * straight from public.jobs (one primary-key lookup per poll), so the time of each phase of the pipeline
 * (src/jobs/kinds/imports/pipeline.ts) is visible: parse + staging tables, staging batches, unique check, summary/report.
 * BENCH_SAMPLE_PG=1 also samples pg_stat_activity on each poll and prints, per stretch, what the service's
 * PostgreSQL sessions were doing (statement, or `idle in transaction` while the worker computes inside a step).
 */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const TABLE_ROWS = Number(process.env.BENCH_TABLE_ROWS ?? 1_000_000);
const MAX_CHARACTERS = 4_194_304;
const POLL_MS = 20;
const JOB_TIMEOUT_MS = 120_000;

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
const COLUMNS = FIELDS.map((field) => field.name);
const CSV_OPTIONS = {
  bom: true,
  relax_column_count: true,
  skip_empty_lines: true,
  record_delimiter: ['\r\n', '\n', '\r'],
};
const TERMINAL = new Set(['succeeded', 'failed', 'partially_completed', 'cancelled']);
const SAMPLE_PG = process.env.BENCH_SAMPLE_PG === '1';
const BENCH_APPLICATION = 'wds-imports-bench';

interface BenchTable {
  databaseId: string;
  tableId: string;
  schemaVersion: number;
  path: string;
  fieldIds: Map<string, string>;
}

async function createBenchTable(servers: Servers): Promise<BenchTable> {
  const { orgId } = servers;
  const database = await api(servers, 'POST', `/v1/orgs/${orgId}/databases`, { name: `Bench ${Date.now()}` });
  const table = await api(servers, 'POST', `/v1/orgs/${orgId}/databases/${database.id}/tables`, {
    name: 'Products',
    fields: FIELDS,
  });
  const path = `/v1/orgs/${orgId}/databases/${database.id}/tables/${table.id}`;
  // The rule goes on while the table is empty: the seed then fills its index in key order. Creating it is a job
  // (202, issue 5): a short-lived worker of its own runs it, so the measured worker starts as fresh as before.
  const ruleWorker = await startWorker(servers.databaseUrl, { profile: false });
  try {
    const handle = await api(servers, 'POST', `${path}/unique-rules`, { fieldIds: ['Code'] });
    const job = await waitForJob(servers, handle.statusUrl, Date.now() + JOB_TIMEOUT_MS);
    if (job.state !== 'succeeded')
      throw new Error(`the unique rule's job ended ${job.state}: ${JSON.stringify(job.error)}`);
  } finally {
    await ruleWorker.stop();
  }
  const schema = await api(servers, 'GET', `${path}/schema`);
  if (schema.uniqueRules?.length !== 1)
    throw new Error(`expected one unique rule, found ${JSON.stringify(schema.uniqueRules)}`);
  const fieldIds = new Map<string, string>(
    schema.fields.map((field: { id: string; name: string }) => [field.name, field.id]),
  );
  return { databaseId: database.id, tableId: table.id, schemaVersion: schema.schemaVersion, path, fieldIds };
}

async function waitForJob(servers: Servers, statusUrl: string, deadline = Infinity): Promise<any> {
  for (;;) {
    const job = await api(servers, 'GET', statusUrl);
    if (TERMINAL.has(job.state)) return job;
    if (Date.now() > deadline) throw new Error(`job did not finish in time: ${JSON.stringify(job)}`);
    await sleep(POLL_MS);
  }
}

/**
 * Rows go straight into the physical table in one statement, as in views.bench.ts: through the API a million
 * creates would take far longer than the benchmark, and a preview never reads history. Ids are digits only, valid
 * ULID-alphabet strings in insertion order; codes are K0000001…K1000000; setseed keeps the data the same every run.
 */
async function loadRows(client: pg.Client, table: BenchTable): Promise<void> {
  const column = (name: string) => columnOf(table.fieldIds.get(name)!);
  await client.query('SELECT setseed(0.42)');
  await client.query(
    `INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)}
      (id, version, created_at, updated_at, ${COLUMNS.map(column).join(', ')})
    SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), 'K' || lpad(g::text, 7, '0'), 'Customer ' || g,
           floor(random() * 1000)::int, round((random() * 1000)::numeric, 2), random() < 0.5,
           date '2020-01-01' + floor(random() * 2000)::int, timestamptz '2024-01-01 00:00:00Z' + random() * interval '365 days',
           ($2::text[])[1 + floor(random() * 4)::int]
      FROM generate_series(1, $1::int) AS g`,
    [TABLE_ROWS, STATUSES],
  );
  await client.query('UPDATE public.data_tables SET row_count = $1 WHERE id = $2', [TABLE_ROWS, table.tableId]);
  // VACUUM as well as ANALYZE: hint bits and the visibility map now, so the measured unique probes do not write.
  await client.query(`VACUUM (ANALYZE) ${rowsTableOf(table.databaseId, table.tableId)}`);
}

/** A small deterministic PRNG (mulberry32), so the file is the same on every run. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

interface BenchFile {
  content: string;
  rows: number;
  badCells: number;
  collisions: number;
  repeats: number;
}

const NAMES = [
  'Customer',
  'Müller GmbH',
  'Østergaard & Søn',
  '"Smith, Jones"',
  '"The ""Best"" Shop"',
  'Acme Corp',
  'Café Lumière',
  'Northwind',
];
const BAD_CELLS: [column: string, value: string][] = [
  ['Quantity', '12x'],
  ['Price', '12.345'],
  ['Active', 'yes'],
  ['Due', '2024-02-30'],
  ['Updated', '2024-01-01 10:00'],
  ['Status', 'unknown'],
  ['Name', ''],
];
const pad = (value: number, width: number) => String(value).padStart(width, '0');

/**
 * Lines until the next one would pass the 4,194,304-character limit. 2% have one bad cell, 1% reuse an existing
 * row's code, 0.5% repeat the code of an earlier valid line of the file; the rest are valid and new.
 */
function generateCsv(existingRows: number): BenchFile {
  const next = random(7);
  const int = (below: number) => Math.floor(next() * below);
  const lines = [COLUMNS.join(',')];
  let characters = lines[0]!.length + 1;
  const validCodes: string[] = [];
  const counts = { badCells: 0, collisions: 0, repeats: 0 };
  for (let index = 1; ; index += 1) {
    const roll = next();
    const kind =
      roll < 0.01
        ? 'collisions'
        : roll < 0.015 && validCodes.length > 0
          ? 'repeats'
          : roll >= 0.015 && roll < 0.035
            ? 'badCells'
            : 'valid';
    const code =
      kind === 'collisions'
        ? `K${pad(1 + int(existingRows), 7)}`
        : kind === 'repeats'
          ? validCodes[int(validCodes.length)]!
          : `N${pad(index, 7)}`;
    const row: Record<string, string> = {
      Code: code,
      Name: `${NAMES[int(NAMES.length)]} ${index}`.replace(/^"(.*)" (\d+)$/, '"$1 $2"'),
      Quantity: String(int(10_000)),
      Price: `${int(100_000)}.${pad(int(100), 2)}`,
      Active: next() < 0.5 ? 'true' : 'false',
      Due: `20${pad(20 + int(8), 2)}-${pad(1 + int(12), 2)}-${pad(1 + int(28), 2)}`,
      Updated: `2025-${pad(1 + int(12), 2)}-${pad(1 + int(28), 2)}T${pad(int(24), 2)}:${pad(int(60), 2)}:${pad(int(60), 2)}.${pad(int(1000), 3)}Z`,
      Status: STATUSES[int(STATUSES.length)]!,
    };
    if (kind === 'badCells') {
      const [column, value] = BAD_CELLS[int(BAD_CELLS.length)]!;
      row[column] = value;
    }
    const line = COLUMNS.map((column) => row[column]).join(',');
    if (characters + line.length + 1 > MAX_CHARACTERS) break;
    lines.push(line);
    characters += line.length + 1;
    if (kind === 'valid') validCodes.push(code);
    else counts[kind] += 1;
  }
  return { content: `${lines.join('\n')}\n`, rows: lines.length - 1, ...counts };
}

interface Phase {
  name: string;
  seconds: number;
}
interface TimedPhase extends Phase {
  from: number;
  to: number;
}
interface EndToEnd {
  seconds: number;
  acceptSeconds: number;
  job: any;
  /** Seconds from the POST to each journal phase the poll loop first saw. */
  phases: Phase[];
  /** BENCH_SAMPLE_PG: per stretch, how many polls saw the service's sessions doing what. */
  samples: Map<string, Map<string, number>>;
}

/**
 * What the service's sessions are doing (the bench's own are left out by application name): the statement of an
 * active session, with identifiers and literals shortened, or its state (`idle in transaction`: the client works).
 */
const ACTIVITY_SQL = `SELECT CASE WHEN state = 'active'
         THEN left(regexp_replace(regexp_replace(query, '\\s+', ' ', 'g'), '[0-9a-z]{26}|[0-9A-Z]{26}', '…', 'g'), 70)
           || coalesce(' [' || wait_event_type || ':' || wait_event || ']', '')
         ELSE state END AS what
    FROM pg_stat_activity
   WHERE datname = current_database() AND backend_type = 'client backend' AND application_name <> '${BENCH_APPLICATION}'
     AND state IN ('active', 'idle in transaction') AND query NOT LIKE 'LISTEN%'`;

/**
 * The stretches of a preview, each starting when the poll loop first sees one of its journal phases ('' is a
 * claimed job with an empty journal). The summary step writes `done` in the same transaction as its work, so
 * `checked` (short) and `done` mark one stretch.
 */
const PHASES: [journal: string[], label: string][] = [
  [[], 'POST until 202 (upload stored, job queued)'],
  [[], '202 → claimed by the worker'],
  [[''], 'read upload + parse + create staging'],
  [['load'], 'stage batches (+ index, ANALYZE)'],
  [['check'], 'unique check vs 1M rows + file'],
  [['checked', 'done'], 'count, preview, report, drop, finish'],
];

async function previewOnce(servers: Servers, table: BenchTable, body: string, pool: pg.Pool): Promise<EndToEnd> {
  const seen = new Map<string, number>();
  const activity: { at: number; what: string[] }[] = [];
  const started = performance.now();
  const response = await fetch(`http://127.0.0.1:${servers.servicePort}${table.path}/imports/preview`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${servers.apiKey}`,
      'content-type': 'application/json',
      'idempotency-key': randomUUID(),
    },
    body,
  });
  if (response.status !== 202) throw new Error(`preview: ${response.status} ${await response.text()}`);
  const handle = (await response.json()) as { jobId: string; statusUrl: string };
  const acceptSeconds = (performance.now() - started) / 1000;
  const deadline = Date.now() + JOB_TIMEOUT_MS;
  for (;;) {
    const [sampled, status, journal] = await Promise.all([
      SAMPLE_PG ? pool.query<{ what: string }>(ACTIVITY_SQL) : null,
      fetch(`http://127.0.0.1:${servers.servicePort}${handle.statusUrl}`, {
        headers: { authorization: `Bearer ${servers.apiKey}` },
      }),
      pool.query<{ phase: string | null; state: string }>(
        `SELECT journal->>'phase' AS phase, state::text FROM public.jobs WHERE id = $1`,
        [handle.jobId],
      ),
    ]);
    const now = performance.now();
    if (sampled) activity.push({ at: now, what: sampled.rows.map((row) => row.what) });
    const row = journal.rows[0];
    if (row && row.state !== 'queued') {
      const phase = row.phase ?? '';
      if (!seen.has(phase)) seen.set(phase, now);
    }
    if (status.status !== 200) throw new Error(`job status: ${status.status} ${await status.text()}`);
    const job = (await status.json()) as any;
    if (TERMINAL.has(job.state)) {
      const seconds = (now - started) / 1000;
      if (job.state !== 'succeeded') throw new Error(`preview ${job.state}: ${JSON.stringify(job.error)}`);
      const phases = phasesOf(seen, started, started + acceptSeconds * 1000, now);
      return { seconds, acceptSeconds, job, phases, samples: tally(phases, activity) };
    }
    if (Date.now() > deadline)
      throw new Error(`preview did not finish in ${JOB_TIMEOUT_MS / 1000} s: ${JSON.stringify(job)}`);
    await sleep(POLL_MS);
  }
}

/**
 * Durations between the first sightings of consecutive stretches. A stretch shorter than a poll may go unseen:
 * it then counts 0 s and its time goes to the stretch before it (at most one poll interval).
 */
function phasesOf(seen: Map<string, number>, started: number, accepted: number, finished: number): TimedPhase[] {
  const marks = PHASES.map(([journal], index) => {
    if (index === 0) return started;
    if (index === 1) return accepted;
    const sightings = journal.map((phase) => seen.get(phase)).filter((at) => at !== undefined);
    return sightings.length > 0 ? Math.min(...sightings) : undefined;
  });
  return PHASES.map(([, name], index) => {
    const at = marks[index];
    if (at === undefined) return { name, seconds: 0, from: NaN, to: NaN };
    const end = marks.slice(index + 1).find((mark) => mark !== undefined) ?? finished;
    return { name, seconds: (end - at) / 1000, from: at, to: end };
  });
}

/** Each activity sample goes to the stretch it fell in (a poll's reading is taken just before its time mark). */
function tally(phases: TimedPhase[], activity: { at: number; what: string[] }[]): Map<string, Map<string, number>> {
  const counts = new Map<string, Map<string, number>>();
  for (const sample of activity) {
    const phase = phases.find((candidate) => sample.at > candidate.from && sample.at <= candidate.to);
    if (!phase) continue;
    const bucket = counts.get(phase.name) ?? new Map<string, number>();
    counts.set(phase.name, bucket);
    bucket.set('(polls)', (bucket.get('(polls)') ?? 0) + 1);
    for (const what of sample.what) bucket.set(what, (bucket.get(what) ?? 0) + 1);
  }
  return counts;
}

/** csv-parse alone over the file's bytes, options as src/jobs/kinds/imports/source.ts, records collected by the parser. */
function bareParse(bytes: Buffer): Promise<{ seconds: number; records: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    parse(bytes, CSV_OPTIONS, (error, records: string[][]) => {
      if (error) reject(error);
      else resolve({ seconds: (performance.now() - started) / 1000, records: records.length });
    });
  });
}

/** The service's parseCsv (csv-parse + physical line numbers per record), in this process. */
async function serviceParse(content: string): Promise<{ seconds: number; records: number }> {
  const started = performance.now();
  const parsed = await parseCsv(content, true);
  return { seconds: (performance.now() - started) / 1000, records: parsed.records.length };
}

/** `npm run worker` against the bench database: one process, its own event loop, as a scale-out worker runs. */
async function startWorker(
  databaseUrl: string,
  options: { profile?: boolean } = {},
): Promise<{ process: ChildProcess; stop(): Promise<void> }> {
  const profile = options.profile === false || !profileDir ? undefined : join(profileDir, 'worker');
  const started = Date.now();
  const args = [...(profile ? ['--cpu-prof', `--cpu-prof-dir=${profile}`] : []), ...workerArgs()];
  const env = {
    ...process.env,
    NODE_ENV: process.env.NODE_ENV ?? 'production',
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: 'info',
  };
  const child = spawnChild(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env });
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
      const file = profile && profileSince(profile, started);
      if (file) process.stdout.write(`\nworker: ${topSelfTime(file)}\n`);
    },
  };
}

const s = (value: number) => value.toFixed(2).padStart(6);
const timeline = (job: any) => {
  const at = (value: string | null) => (value ? Date.parse(value) : NaN);
  const created = at(job.createdAt);
  // createdAt is now() of the request's transaction, i.e. its start: createdAt → startedAt is the rest of the request
  // (mapping, upload artifact, commit) plus the pickup, not queueing alone (the 202 → claimed stretch below is that).
  return (
    `createdAt → startedAt ${((at(job.startedAt) - created) / 1000).toFixed(3)} s, startedAt → finishedAt ${((at(job.finishedAt) - at(job.startedAt)) / 1000).toFixed(2)} s` +
    ` (createdAt ${job.createdAt}, startedAt ${job.startedAt}, finishedAt ${job.finishedAt})`
  );
};

const servers = await startServers();
const pool = new pg.Pool({ connectionString: servers.databaseUrl, max: 3, application_name: BENCH_APPLICATION });
let worker: Awaited<ReturnType<typeof startWorker>> | undefined;
try {
  const table = await createBenchTable(servers);
  const loader = new pg.Client({ connectionString: servers.databaseUrl });
  await loader.connect();
  const loadStarted = performance.now();
  await loadRows(loader, table);
  await loader.end();
  process.stdout.write(
    `loaded ${TABLE_ROWS} rows (unique rule on Code) in ${((performance.now() - loadStarted) / 1000).toFixed(1)} s\n`,
  );

  const file = generateCsv(TABLE_ROWS);
  const bytes = Buffer.from(file.content, 'utf8');
  const invalid = file.badCells + file.collisions + file.repeats;
  process.stdout.write(
    `CSV: ${file.content.length} characters (${bytes.length} bytes), ${file.rows} rows × ${COLUMNS.length} columns; ` +
      `expected invalid ${invalid} = ${file.badCells} bad cells + ${file.collisions} existing codes + ${file.repeats} repeated codes\n`,
  );
  const body = JSON.stringify({
    expectedSchemaVersion: table.schemaVersion,
    format: 'csv',
    content: file.content,
    fileName: 'products.csv',
    mapping: COLUMNS.map((name) => ({ source: name, fieldId: table.fieldIds.get(name)! })),
  });

  worker = await startWorker(servers.databaseUrl);
  const check = (job: any) => {
    const result = job.result as {
      totalRows: number;
      validRows: number;
      invalidRows: number;
      report: { problems: number };
    };
    if (result.totalRows !== file.rows || result.invalidRows !== invalid || result.report.problems !== invalid) {
      throw new Error(
        `unexpected outcome: ${JSON.stringify({ ...result, preview: undefined })}; expected ${file.rows} rows, ${invalid} invalid`,
      );
    }
  };

  // One of each first, not counted: the worker's first job compiles its code paths and loads the schema.
  const warmUp = await previewOnce(servers, table, body, pool);
  check(warmUp.job);
  const bare = await bareParse(bytes);
  if (bare.records !== file.rows + 1)
    throw new Error(`bare parse read ${bare.records} records; expected ${file.rows + 1}`);
  await serviceParse(file.content);
  process.stdout.write(
    `warm-up (not counted): end to end ${warmUp.seconds.toFixed(2)} s, bare parse ${bare.seconds.toFixed(3)} s\n`,
  );

  process.stdout.write(`\n${ROUNDS} rounds, alternating; poll every ${POLL_MS} ms\n`);
  const rounds: { e2e: EndToEnd; bare: number; service: number }[] = [];
  for (let round = 1; round <= ROUNDS; round += 1) {
    const e2e = await previewOnce(servers, table, body, pool);
    check(e2e.job);
    const bareRound = await bareParse(bytes);
    const serviceRound = await serviceParse(file.content);
    rounds.push({ e2e, bare: bareRound.seconds, service: serviceRound.seconds });
    const { totalRows, validRows, invalidRows } = e2e.job.result;
    process.stdout.write(
      `  round ${round}\n` +
        `    end to end        ${s(e2e.seconds)} s   ${(totalRows / e2e.seconds).toFixed(0).padStart(7)} rows/s   (202 after ${(e2e.acceptSeconds * 1000).toFixed(0)} ms; ${totalRows} rows, ${validRows} valid, ${invalidRows} invalid)\n` +
        `    job               ${timeline(e2e.job)}\n` +
        e2e.phases.map((phase) => `      ${phase.name.padEnd(44)} ${s(phase.seconds)} s\n`).join('') +
        `    bare csv-parse    ${s(bareRound.seconds)} s   ${(file.rows / bareRound.seconds).toFixed(0).padStart(7)} rows/s\n` +
        `    service parseCsv  ${s(serviceRound.seconds)} s   ${(file.rows / serviceRound.seconds).toFixed(0).padStart(7)} rows/s\n` +
        `    bare / end to end ${(bareRound.seconds / e2e.seconds).toFixed(4)}\n`,
    );
  }

  const e2eSeconds = median(rounds.map((round) => round.e2e.seconds));
  const bareSeconds = median(rounds.map((round) => round.bare));
  const phaseNames = PHASES.map(([, label]) => label);
  const phaseOf = (round: (typeof rounds)[number], name: string) =>
    round.e2e.phases.find((phase) => phase.name === name)!.seconds;
  const phaseMedians = phaseNames.map((name) => ({
    name,
    seconds: median(rounds.map((round) => phaseOf(round, name))),
    share: median(rounds.map((round) => phaseOf(round, name) / round.e2e.seconds)),
  }));
  process.stdout.write(
    `\nmedian of ${ROUNDS}\n` +
      `  end to end        ${s(e2eSeconds)} s   ${(file.rows / e2eSeconds).toFixed(0).padStart(7)} rows/s\n` +
      `  bare csv-parse    ${s(bareSeconds)} s   ${(file.rows / bareSeconds).toFixed(0).padStart(7)} rows/s\n` +
      `  service parseCsv  ${s(median(rounds.map((round) => round.service)))} s\n` +
      `  bare / end to end ${median(rounds.map((round) => round.bare / round.e2e.seconds)).toFixed(4)} (median of per-round ratios)\n` +
      `  phases (median seconds each, median share of its round's end to end):\n` +
      phaseMedians
        .map(
          (phase) =>
            `    ${phase.name.padEnd(44)} ${s(phase.seconds)} s  ${(phase.share * 100).toFixed(0).padStart(3)}%\n`,
        )
        .join('') +
      `\n${ratioLine(
        'import preview of a 4 MiB CSV',
        'bare csv-parse / end to end',
        rounds.map((round) => round.bare / round.e2e.seconds),
        0.33,
      )}\n`,
  );
  if (SAMPLE_PG) {
    process.stdout.write(
      `\nPostgreSQL sessions of the service, sampled once per poll (all ${ROUNDS} rounds; share of the stretch's polls):\n`,
    );
    for (const name of phaseNames) {
      const merged = new Map<string, number>();
      for (const round of rounds)
        for (const [what, count] of round.e2e.samples.get(name) ?? [])
          merged.set(what, (merged.get(what) ?? 0) + count);
      const polls = merged.get('(polls)') ?? 0;
      if (polls === 0) continue;
      merged.delete('(polls)');
      process.stdout.write(`  ${name} (${polls} polls)\n`);
      for (const [what, count] of [...merged].sort((a, b) => b[1] - a[1]).slice(0, 6)) {
        process.stdout.write(`    ${((count / polls) * 100).toFixed(0).padStart(3)}%  ${what}\n`);
      }
    }
  }
} finally {
  await worker?.stop();
  await pool.end();
  await servers.stop();
}
