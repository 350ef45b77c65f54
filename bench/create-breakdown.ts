import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { ulid } from 'ulid';
import { createApp } from '../src/http/app.ts';
import { bootstrapOrg } from '../src/identity/provision.ts';
import { ensureDatabase, openDatabase } from '../src/db/database.ts';
import { migrate } from '../src/db/migrate.ts';
import { createPrisma } from '../src/db/prisma.ts';
import { loadConfig } from '../src/kernel/config.ts';
import { createLogger } from '../src/kernel/log.ts';
import { processMs } from './cpu.ts';
import { FIELDS, VALUES } from './items-table.ts';

/**
 * Where a REST row create's PostgreSQL time goes (docs/decisions/changes.md, "What a create costs"). The service runs
 * in this process on a fresh database; one REST create is captured at the `pg` driver (every statement it sends), and
 * its one-statement write is then replayed BREAKDOWN_CREATES times (default 2,000) with fresh ids, as the service sends
 * it (a prepared statement), under variants switched in that database only: the backends' CPU per create (from
 * /proc), the function times of `track_functions`, and the WAL written per relation (pg_walinspect). Variants are
 * interleaved over BREAKDOWN_ROUNDS rounds (default 3) and reported as medians, since the machine is shared.
 * BREAKDOWN_CLIENTS connections replay at once (default 1; bench/peers.bench.ts runs 16); BREAKDOWN_VARIANTS picks
 * variants by index (`0,1,7`); BREAKDOWN_COMPARE=<file>[,…] adds the triggers' functions of another version (their
 * `pg_get_functiondef` text) as variants, for a before / after in one run (BENCH_BEFORE cannot show a change of the
 * database's functions: both servers share the database this checkout migrated); BREAKDOWN_PERF=<file> records the
 * first batch with `perf record -g`; BREAKDOWN_WAL=0 skips the WAL figures.
 *   BENCH_DATABASE_URL=postgresql://… npx tsx bench/create-breakdown.ts
 */
const DATABASE = process.env.BENCH_DATABASE_NAME ?? 'wds_create_breakdown';
const CREATES = Number(process.env.BREAKDOWN_CREATES ?? 2000);
const ROUNDS = Number(process.env.BREAKDOWN_ROUNDS ?? 3);

const config = loadConfig(process.env, {
  LOG_LEVEL: 'silent',
  RATE_LIMIT_RPS: '0',
  CONCURRENCY_LIMIT: '0',
  ORG_CONCURRENCY_LIMIT: '0',
  DATABASE_URL: process.env.BENCH_DATABASE_URL ?? '',
});
const logger = createLogger('silent');
const server = await openDatabase(config, logger);
{
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(DATABASE)} WITH (FORCE)`);
  await admin.end();
}
const url = await ensureDatabase(server.url, DATABASE);
await migrate(url);
const prisma = createPrisma(url, config.DATABASE_POOL_SIZE, config.QUERY_TIMEOUT_MS);
const { orgId, userId, apiKey } = await bootstrapOrg(prisma, {
  orgName: 'Bench',
  email: `b-${Date.now()}@example.com`,
  name: 'B',
});
const http = createServer(createApp({ prisma, config, logger }));
await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
const port = (http.address() as AddressInfo).port;

async function api(method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
  return response.json();
}

const database = await api('POST', `/v1/orgs/${orgId}/databases`, { name: 'Breakdown' });
const table = await api('POST', `/v1/orgs/${orgId}/databases/${database.id}/tables`, { name: 'Items', fields: FIELDS });
const rowsPath = `/v1/orgs/${orgId}/databases/${database.id}/tables/${table.id}/rows`;
const createBody = { expectedSchemaVersion: table.schemaVersion, values: VALUES };
const schema = `d_${database.id.toLowerCase()}`;
const history = `${schema}.h_${table.id.toLowerCase()}`;

// Every statement of one REST create, as the driver sends it.
type Sent = { text: string; values: unknown[]; name?: string };
let captured: Sent[] | null = null;
const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  if (captured) {
    const [first, second] = args as [string | { text: string; values?: unknown[] }, unknown[] | undefined];
    if (typeof first === 'string') captured.push({ text: first, values: Array.isArray(second) ? second : [] });
    else if (first && typeof first === 'object' && 'text' in first)
      captured.push({
        text: first.text,
        values: first.values ?? (Array.isArray(second) ? second : []),
        name: (first as { name?: string }).name,
      });
  }
  return query.apply(this, args);
} as typeof pg.Client.prototype.query;

for (let i = 0; i < 50; i += 1) await api('POST', rowsPath, createBody);
captured = [];
await api('POST', rowsPath, createBody);
const previous = captured;
captured = [];
const created = await api('POST', rowsPath, createBody);
const sent = captured;
console.log(
  `same statements as the create before: ${previous.map((s) => s.text).join() === sent.map((s) => s.text).join()}`,
);
captured = null;
console.log(`statements of one REST create: ${sent.length}`);
for (const statement of sent)
  console.log(`  ${statement.name ?? 'unnamed'}: ${statement.text.replace(/\s+/g, ' ').slice(0, 150)}`);

const write = sent.find((statement) => statement.text.includes('WITH inserted AS'));
if (!write) throw new Error('the one-statement create was not captured');
// Ids that name the request (row, mutation, activity, idempotency key) get fresh values per replay; the org's,
// database's, table's, fields' and actor's stay.
const ULID = /[0-9A-HJKMNP-TV-Z]{26}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
const stable = new Set<string>([
  orgId,
  userId,
  database.id,
  table.id,
  ...table.fields.map((field: { id: string }) => field.id),
]);
const fresh = new Set<string>([created.row.id, created.mutationId]);
for (const value of write.values)
  if (typeof value === 'string')
    for (const id of value.match(ULID) ?? []) if (!stable.has(id) && id.length === 36) fresh.add(id);
for (const value of write.values)
  if (typeof value === 'string' && /^[0-9A-HJKMNP-TV-Z]{26}$/.test(value) && !stable.has(value)) fresh.add(value);
console.log(`replayed with fresh: ${[...fresh].join(' ')}`);

function freshValues(): unknown[] {
  const mapping = new Map([...fresh].map((id) => [id, id.length === 36 ? randomUUID() : ulid()]));
  return write!.values.map((value) => {
    // The key's advisory-lock slot (a 64-bit digest): concurrent replays must not share it.
    if (/^-?\d{12,}$/.test(String(value))) return String(Math.floor(Math.random() * 2 ** 52));
    if (typeof value !== 'string') return value;
    let out = value;
    for (const [from, to] of mapping) out = out.split(from).join(to);
    return out;
  });
}

const admin = new pg.Client({ connectionString: url });
await admin.connect();
await admin.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
// BREAKDOWN_CLIENTS (default 1): connections replaying at once, each its share of the creates (the REST benches
// run 16, where creates of one table also wait for each other: its row-count claim, index pages).
const CLIENTS = Number(process.env.BREAKDOWN_CLIENTS ?? 1);
const replays: pg.Client[] = [];
const pids: number[] = [];
for (let i = 0; i < CLIENTS; i += 1) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  replays.push(client);
  pids.push((await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
}
const replay = replays[0]!;
const backendsMs = () => pids.reduce((sum, pid) => sum + processMs(pid)!, 0);

interface Variant {
  name: string;
  /** Run on the admin connection before the variant's creates; `undo` after. */
  setup?: string;
  undo?: string;
  /** Run on the replaying connection first (session settings). */
  session?: string;
}

const original = (
  await admin.query<{ def: string }>(
    `SELECT pg_get_functiondef(p.oid) AS def FROM pg_proc p WHERE proname = 'wds_record_row_changes'`,
  )
).rows[0]!.def;
const committedOriginal = (
  await admin.query<{ def: string }>(
    `SELECT pg_get_functiondef(p.oid) AS def FROM pg_proc p WHERE proname = 'wds_changes_committed'`,
  )
).rows[0]!.def;

/** The row trigger's function with its steps from `marker` on dropped. */
function cutFrom(marker: string): string {
  const at = original.indexOf(marker);
  const end = original.lastIndexOf('RETURN NULL;');
  if (at < 0) throw new Error(`marker not in wds_record_row_changes: ${marker}`);
  return original.slice(0, at) + original.slice(end);
}

const variants: Variant[] = [
  { name: 'as is' },
  { name: 'feed off (wds.changes = off)', session: `SET wds.changes = 'off'` },
  {
    name: 'no row trigger',
    setup: `ALTER TABLE ${history} DISABLE TRIGGER record_changes`,
    undo: `ALTER TABLE ${history} ENABLE TRIGGER record_changes`,
  },
  {
    name: 'row trigger: build only, no inserts',
    setup: cutFrom(`IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN\n    EXECUTE`),
    undo: original,
  },
  {
    name: 'COMMIT trigger empty',
    setup: `CREATE OR REPLACE FUNCTION public.wds_changes_committed() RETURNS trigger LANGUAGE plpgsql
              AS $f$ BEGIN RETURN NULL; END; $f$`,
    undo: committedOriginal,
  },
  {
    name: 'change_commits: 2 indexes fewer',
    setup: `DROP INDEX ${schema}.change_commits_committed_at; DROP INDEX ${schema}.change_commits_unpositioned`,
    undo: `CREATE INDEX change_commits_unpositioned ON ${schema}.change_commits (txid) WHERE position IS NULL;
           CREATE INDEX change_commits_committed_at ON ${schema}.change_commits (committed_at)`,
  },
  {
    // Every activity entry's foreign key to its org: its check locks the org's row FOR KEY SHARE, on one row for
    // every create of the org.
    name: 'activity without its org foreign key',
    setup: 'ALTER TABLE activity_events DROP CONSTRAINT activity_events_org_id_fkey',
    undo: `ALTER TABLE activity_events ADD CONSTRAINT activity_events_org_id_fkey FOREIGN KEY (org_id) REFERENCES orgs(id)
             ON UPDATE CASCADE ON DELETE CASCADE`,
  },
  // BREAKDOWN_COMPARE=<file>[,<file>…]: SQL that replaces the triggers' functions (another version's), each measured
  // as one more variant.
  ...(process.env.BREAKDOWN_COMPARE?.split(',') ?? []).map((file) => ({
    name: `functions of ${file}`,
    setup: readFileSync(file, 'utf8'),
    undo: `${original};\n${committedOriginal}`,
  })),
];

const only = process.env.BREAKDOWN_VARIANTS?.split(',');
const chosen = only ? variants.filter((_variant, index) => only.includes(String(index))) : variants;

interface Measured {
  cpuMs: number;
  walBytes: number;
  byRelation: Map<string, number>;
}

async function walByRelation(from: string, to: string): Promise<{ total: number; byRelation: Map<string, number> }> {
  const { rows } = await admin.query<{ relation: string; bytes: string }>(
    `WITH r AS (
       SELECT record_length, (regexp_match(block_ref, 'rel \\d+/(\\d+)/(\\d+)')) AS m, resource_manager
         FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn))
     SELECT coalesce(c.relname, CASE WHEN r.m IS NULL THEN 'no block: ' || r.resource_manager ELSE 'other' END) AS relation,
            sum(record_length)::text AS bytes, sum(record_length) AS n
       FROM r LEFT JOIN pg_class c ON c.relfilenode = (r.m)[2]::oid
      WHERE r.m IS NULL OR (r.m)[1]::oid = (SELECT oid FROM pg_database WHERE datname = current_database())
      GROUP BY 1 ORDER BY n DESC`,
    [from, to],
  );
  const byRelation = new Map(rows.map((row) => [row.relation, Number(row.bytes)]));
  return { total: [...byRelation.values()].reduce((a, b) => a + b, 0), byRelation };
}

let perfDone = false;
async function measure(variant: Variant, creates: number, wal: boolean): Promise<Measured> {
  if (variant.setup) await admin.query(variant.setup);
  for (const client of replays) {
    await client.query('RESET ALL');
    if (variant.session) await client.query(variant.session);
    for (let i = 0; i < 10; i += 1) await client.query({ name: 'create', text: write!.text, values: freshValues() });
  }
  const [{ lsn: from }] = (await admin.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn'))
    .rows as [{ lsn: string }];
  // BREAKDOWN_PERF=<file>: `perf record` of the replaying backends during the first variant's first batch.
  const perf =
    process.env.BREAKDOWN_PERF && !perfDone
      ? spawn('perf', ['record', '-F', '4000', '-g', '-p', pids.join(','), '-o', process.env.BREAKDOWN_PERF], {
          stdio: 'ignore',
        })
      : undefined;
  perfDone = true;
  if (perf) await new Promise((resolve) => setTimeout(resolve, 500));
  const each = Math.ceil(creates / CLIENTS);
  const before = backendsMs();
  await Promise.all(
    replays.map(async (client) => {
      for (let i = 0; i < each; i += 1) {
        const { rows } = await client.query({ name: 'create', text: write!.text, values: freshValues() });
        if (rows.length !== 1) throw new Error(`replay wrote nothing (${variant.name})`);
      }
    }),
  );
  const cpuMs = backendsMs() - before;
  if (perf) {
    perf.kill('SIGINT');
    await new Promise((resolve) => perf.once('exit', resolve));
  }
  const [{ lsn: to }] = (await admin.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn'))
    .rows as [{ lsn: string }];
  const { total, byRelation } = wal ? await walByRelation(from, to) : { total: 0, byRelation: new Map() };
  if (variant.undo) await admin.query(variant.undo);
  return { cpuMs: cpuMs / (each * CLIENTS), walBytes: total / (each * CLIENTS), byRelation };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const cpu = new Map<string, number[]>(chosen.map((variant) => [variant.name, []]));
for (let round = 1; round <= ROUNDS; round += 1) {
  for (const variant of chosen) {
    const { cpuMs } = await measure(variant, CREATES, false);
    cpu.get(variant.name)!.push(cpuMs);
  }
  console.log(`round ${round}: ${chosen.map((v) => `${v.name} ${cpu.get(v.name)!.at(-1)!.toFixed(3)}`).join(' | ')}`);
}
console.log('\nPostgreSQL backend CPU per replayed create (ms), median of rounds:');
for (const variant of chosen)
  console.log(
    `  ${variant.name.padEnd(34)} ${median(cpu.get(variant.name)!).toFixed(3)}  (${cpu
      .get(variant.name)!
      .map((v) => v.toFixed(3))
      .join(' ')})`,
  );

if (process.env.BREAKDOWN_WAL !== '0') {
  console.log('\nWAL per create (bytes), by relation, 500 creates (records without a block are any database’s):');
  for (const variant of chosen.slice(0, 2)) {
    const { walBytes, byRelation } = await measure(variant, 500, true);
    console.log(`  ${variant.name}: ${walBytes.toFixed(0)}`);
    for (const [relation, bytes] of byRelation)
      console.log(`    ${relation.padEnd(48)} ${(bytes / (Math.ceil(500 / CLIENTS) * CLIENTS)).toFixed(0)}`);
  }
}

// Function times of one batch (track_functions, wall time in the backend).
await admin.query(`SELECT pg_stat_reset()`);
await replay.query('RESET ALL');
await replay.query(`SET track_functions = 'all'`);
for (let i = 0; i < CREATES; i += 1) await replay.query({ name: 'create', text: write.text, values: freshValues() });
await replay.query('SELECT pg_stat_force_next_flush()');
await replay.query('SELECT 1');
const { rows: functions } = await admin.query(
  `SELECT funcname, calls, round((total_time / calls * 1000)::numeric, 1) AS total_us,
          round((self_time / calls * 1000)::numeric, 1) AS self_us
     FROM pg_stat_user_functions ORDER BY total_time DESC`,
);
console.log('\ntrack_functions, per call (µs):');
for (const row of functions)
  console.log(`  ${String(row.funcname).padEnd(28)} calls ${row.calls} total ${row.total_us} self ${row.self_us}`);

for (const client of replays) await client.end();
await admin.end();
await prisma.$disconnect();
http.close();
await server.close();
process.exit(0);
