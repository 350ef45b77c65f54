import pg from 'pg';
import { FEED_START, selectChangePage } from '../src/catalog/changes.ts';
import { historyTableOf, schemaOf } from '../src/data/identifiers.ts';
import { createBenchTable, VALUES, type BenchTable } from './changes-table.ts';
import { startConsumers, type Consumers } from './consumers.ts';
import { cpuCeiling, cpuCeilingLine, cpuLine, withCpu, type CpuTimes } from './cpu.ts';
import {
  api,
  createRows,
  median,
  quiesce,
  ratioLine,
  startBeforeServer,
  startServers,
  type BuiltServer,
  type Servers,
} from './harness.ts';
import { benchWebhookRows, webhookBenchEnv } from './webhook-rows.ts';

/**
 * The change feed (issue 27), two rows of bench/changes.bench.ts (the webhook rows are added beside them):
 * (1a) row create over REST with 8 connections into one database, the feed recording (its trigger and its COMMIT
 *      trigger) vs the same creates with the table's feed trigger disabled, alternating in one run: the feed's write cost;
 * (3)  reading the feed over REST (GET …/changes, pages of 1,000, following nextCursor) vs a raw keyset SELECT of the
 *      same change rows through `pg`, in changes/s. Target ≥ 0.5. The REST reader asks for no compression
 *      (`Accept-Encoding: identity`), as the raw side reads uncompressed over the same loopback; a second row reads
 *      with `fetch`'s default `gzip, deflate` (the service compresses at level 1, the client inflates), in the same
 *      rounds (docs/decisions/changes.md, "Reading a page: where a page's time goes").
 * (4)  row create as in (1a), with BENCH_READERS (default 16) SSE streams of the database open vs none: what many live
 *      readers of one feed cost its writers (the issue names no target; the line holds it to row (1)'s 0.9).
 * Then the webhook rows (1) and (2) of bench/webhook-rows.ts, on a table of their own.
 * BENCH_CREATES (default 3000 per round and side), BENCH_FEED_ROWS (default 20000 changes to read) and BENCH_ROUNDS
 * (default 3) size it. BENCH_TARGETS (a comma-separated list of `1a`, `3`, `readers`, `webhooks`) runs only those
 * rows, e.g. to profile one path. BENCH_BEFORE=<checkout> also reads the feed in (3), and streams it in (4), through
 * that checkout's built server, in the same rounds, and prints its ratio beside this one's.
 */
const CREATES = Number(process.env.BENCH_CREATES ?? 3_000);
const FEED_ROWS = Number(process.env.BENCH_FEED_ROWS ?? 20_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = 8;
/** Row (4)'s SSE streams: at most EVENT_STREAMS_PER_CREDENTIAL (16) for the bench's one key. */
const READERS = Number(process.env.BENCH_READERS ?? 16);
const ONLY = process.env.BENCH_TARGETS?.split(',').map((row) => row.trim());
const chosen = (row: string) => !ONLY || ONLY.includes(row);

const creates = (servers: Servers, table: BenchTable, amount: number) =>
  createRows({ port: servers.servicePort, apiKey: servers.apiKey }, table, VALUES, amount, CONNECTIONS);

async function setFeed(client: pg.Client, table: BenchTable, on: boolean): Promise<void> {
  await client.query(
    `ALTER TABLE ${historyTableOf(table.databaseId, table.tableId)} ${on ? 'ENABLE' : 'DISABLE'} TRIGGER record_changes`,
  );
}

/** A read of the feed: changes/s, and the pages read (each 1,000 changes, the last maybe fewer). */
interface Read {
  perSecond: number;
  requests: number;
}

/** How the REST reader asks for its pages: `identity` (uncompressed, like the raw side) or `fetch`'s default. */
type Encoding = 'identity' | 'gzip, deflate';

/** Every change from the start, over REST. */
async function restRead(
  servers: Servers,
  table: BenchTable,
  total: number,
  encoding: Encoding,
  port = servers.servicePort,
): Promise<Read> {
  const path = `/v1/orgs/${servers.orgId}/databases/${table.databaseId}/changes?limit=1000`;
  const started = performance.now();
  let read = 0;
  let requests = 0;
  let cursor: string | null = null;
  while (read < total) {
    requests += 1;
    const response = await fetch(`http://127.0.0.1:${port}${path}${cursor ? `&after=${cursor}` : ''}`, {
      headers: { authorization: `Bearer ${servers.apiKey}`, 'accept-encoding': encoding },
    });
    if (response.status !== 200) throw new Error(`feed page: ${response.status} ${await response.text()}`);
    const page = (await response.json()) as { data: unknown[]; nextCursor: string; hasMore: boolean };
    read += page.data.length;
    cursor = page.nextCursor;
    if (!page.hasMore) break;
  }
  return { perSecond: read / ((performance.now() - started) / 1000), requests };
}

/** The same change rows by a raw keyset SELECT through `pg` (rows parsed by pg, jsonb included). */
async function rawRead(client: pg.Client, table: BenchTable, total: number): Promise<Read> {
  const started = performance.now();
  let read = 0;
  let requests = 0;
  let after = FEED_START;
  while (read < total) {
    requests += 1;
    // The feed's own keyset statement (commits by position, each one's changes by key), its columns as `pg` parses
    // them: a SELECT of `changes` by `seq` alone would sort every change (no index on it) and is not feed order.
    const page = selectChangePage(table.databaseId, after, 1000, { only: null, active: [table.tableId] });
    const { rows } = await client.query<{ position: string; seq: string }>(page.sql, page.params);
    const data = rows.slice(0, 1000);
    if (data.length === 0) break;
    read += data.length;
    after = { position: BigInt(data.at(-1)!.position), seq: BigInt(data.at(-1)!.seq) };
  }
  return { perSecond: read / ((performance.now() - started) / 1000), requests };
}

/**
 * `READERS` SSE streams of the database, each reading what it is sent (to its end) until `stop`, in the consumers'
 * process (bench/consumers.ts): what many live readers of one feed in one API process cost its writers.
 */
async function openStreams(
  servers: Servers,
  consumers: Consumers,
  table: BenchTable,
  port: number,
): Promise<() => Promise<void>> {
  const url = `http://127.0.0.1:${port}/v1/orgs/${servers.orgId}/databases/${table.databaseId}/changes`;
  const headers = { authorization: `Bearer ${servers.apiKey}`, accept: 'text/event-stream' };
  const readers = await consumers.openReaders(url, headers, READERS);
  return () => consumers.closeReaders(readers);
}

/**
 * (4) row create over REST, 8 connections, with `READERS` SSE streams of the database open on the API vs none, the
 * sides alternating; with BENCH_BEFORE the streams also read through that checkout's server in the same rounds.
 * It shows what readers sharing the sequencer (src/catalog/change-sequencing.ts) buy.
 */
async function benchManyReaders(
  servers: Servers,
  client: pg.Client,
  table: BenchTable,
  before: BuiltServer | undefined,
): Promise<void> {
  process.stdout.write(`(4) ${CREATES} row creates per side over ${CONNECTIONS} connections, ${READERS} SSE readers\n`);
  const ratios: number[] = [];
  const beforeRatios: number[] = [];
  const consumers = await startConsumers();
  const alone = async () => {
    await quiesce(client);
    return creates(servers, table, CREATES);
  };
  const streamedThrough = async (port: number) => {
    await quiesce(client);
    const stop = await openStreams(servers, consumers, table, port);
    return creates(servers, table, CREATES).finally(stop);
  };
  for (let round = 1; round <= ROUNDS; round += 1) {
    // "none" goes first in odd rounds and last in even ones, so that neither side is always the one after a pause.
    let none = round % 2 === 1 ? await alone() : 0;
    const withReaders = await streamedThrough(servers.servicePort);
    const withBefore = before ? await streamedThrough(before.port) : undefined;
    if (round % 2 === 0) none = await alone();
    ratios.push(withReaders / none);
    let line = `round ${round}: creates/s none ${none.toFixed(0)}, ${READERS} readers ${withReaders.toFixed(0)}`;
    if (withBefore !== undefined) {
      beforeRatios.push(withBefore / none);
      line += `, ${READERS} readers through BENCH_BEFORE ${withBefore.toFixed(0)}`;
    }
    process.stdout.write(`${line}\n`);
  }
  await consumers.stop();
  process.stdout.write(`${ratioLine(`(4) row create, ${READERS} SSE readers vs none`, 'with / none', ratios, 0.9)}\n`);
  if (before)
    process.stdout.write(
      `${ratioLine(`(4) row create, ${READERS} SSE readers through BENCH_BEFORE vs none`, 'with / none', beforeRatios, 0.9)}\n`,
    );
}

Object.assign(process.env, webhookBenchEnv);
const servers = await startServers();
const client = new pg.Client({ connectionString: servers.databaseUrl });
let before: BuiltServer | undefined;
try {
  await client.connect();
  const table = await createBenchTable(servers);
  await creates(servers, table, Math.max(200, CREATES / 10));
  if (chosen('1a')) {
    process.stdout.write(
      `change feed: ${ROUNDS} rounds; (1a) ${CREATES} row creates per side over ${CONNECTIONS} connections\n`,
    );
    const createRatios: number[] = [];
    for (let round = 1; round <= ROUNDS; round += 1) {
      // Feed off first in odd rounds and last in even ones.
      const sides = round % 2 === 1 ? [false, true] : [true, false];
      const rates = new Map<boolean, number>();
      for (const recording of sides) {
        await setFeed(client, table, recording);
        await quiesce(client);
        rates.set(recording, await creates(servers, table, CREATES));
      }
      const [on, off] = [rates.get(true)!, rates.get(false)!];
      createRatios.push(on / off);
      process.stdout.write(
        `round ${round}: creates/s feed on ${on.toFixed(0)}, feed off ${off.toFixed(0)}, on / off ${(on / off).toFixed(2)}\n`,
      );
    }
    process.stdout.write(`${ratioLine('(1a) row create, feed recording vs off', 'feed / off', createRatios, 0.9)}\n`);
  }

  if (chosen('3')) {
    before = await startBeforeServer(servers);
    const feedSchema = schemaOf(table.databaseId);
    const countChanges = async () =>
      (await client.query<{ count: number }>(`SELECT count(*)::int AS count FROM ${feedSchema}.changes`)).rows[0]!
        .count;
    for (let batch = await countChanges(); batch < FEED_ROWS; batch += 1000) {
      await api(servers, 'POST', `${table.path}/rows/batch`, {
        expectedSchemaVersion: table.schemaVersion,
        operations: Array.from({ length: 1000 }, () => ({ op: 'create', values: VALUES })),
      });
    }
    // The whole feed, to its end (20,301 changes, not 20,000): what a follower catching up reads.
    const total = await countChanges();
    // Autovacuum would otherwise visit the freshly written feed during the rounds, and its worker's CPU counts as
    // PostgreSQL's for whichever side is being read then (the raw side's rose from 4.5 to 16-21 ms per page).
    await client.query(`VACUUM (ANALYZE) ${feedSchema}.changes, ${feedSchema}.change_commits`);
    process.stdout.write(`(3) reading ${total} changes, pages of 1000\n`);
    // The two ways of reading, each a row of its own; BENCH_BEFORE's server is read both ways in the same rounds.
    const encodings: { encoding: Encoding; row: string }[] = [
      { encoding: 'identity', row: '(3) feed read throughput' },
      { encoding: 'gzip, deflate', row: '(3) feed read throughput, gzip' },
    ];
    for (const { encoding } of encodings) {
      await restRead(servers, table, total, encoding);
      if (before) await restRead(servers, table, total, encoding, before.port);
    }
    await rawRead(client, table, total);
    const rows = encodings.map((side) => ({
      ...side,
      ratios: [] as number[],
      ceilings: [] as (number | undefined)[],
      beforeRatios: [] as number[],
      cpuQuotients: [] as number[],
    }));
    const measured = (pid: number, read: () => Promise<Read>) =>
      withCpu({ pid, databaseUrl: servers.databaseUrl }, read);
    const perPage = (cpu: CpuTimes | undefined) => cpuLine(cpu).replace('per request', 'per page');
    for (let round = 1; round <= ROUNDS; round += 1) {
      const reads = [];
      for (const { encoding } of rows)
        reads.push(await measured(servers.pid, () => restRead(servers, table, total, encoding)));
      const raw = await measured(process.pid, () => rawRead(client, table, total));
      process.stdout.write(
        `round ${round}: changes/s raw SELECT ${raw.perSecond.toFixed(0)}, raw ${perPage(raw.cpu)}\n`,
      );
      for (const [index, row] of rows.entries()) {
        const rest = reads[index]!;
        row.ratios.push(rest.perSecond / raw.perSecond);
        row.ceilings.push(cpuCeiling(rest.cpu, raw.cpu));
        process.stdout.write(
          `         REST ${row.encoding}: ${rest.perSecond.toFixed(0)} changes/s, REST / raw ` +
            `${(rest.perSecond / raw.perSecond).toFixed(2)}, ${perPage(rest.cpu)}\n`,
        );
        if (!before) continue;
        const earlier = await measured(before.pid, () => restRead(servers, table, total, row.encoding, before!.port));
        row.beforeRatios.push(earlier.perSecond / raw.perSecond);
        row.cpuQuotients.push((rest.cpu?.service ?? NaN) / (earlier.cpu?.service ?? NaN));
        process.stdout.write(
          `         REST before ${row.encoding}: ${earlier.perSecond.toFixed(0)} changes/s, before / raw ` +
            `${(earlier.perSecond / raw.perSecond).toFixed(2)}, ${perPage(earlier.cpu)}\n`,
        );
      }
    }
    for (const row of rows) {
      process.stdout.write(
        `${ratioLine(row.row, 'REST GET …/changes / raw SELECT', row.ratios, 0.5)}\n` +
          `${cpuCeilingLine(row.row, row.ceilings)}\n`,
      );
      if (before)
        process.stdout.write(
          `${ratioLine(`${row.row}, BENCH_BEFORE`, 'REST GET …/changes / raw SELECT', row.beforeRatios, 0.5)}\n` +
            `cpu | ${row.row} | service CPU per page, this checkout / BENCH_BEFORE | median of ` +
            `${row.cpuQuotients.length}: ${median(row.cpuQuotients).toFixed(2)} | ` +
            `rounds ${row.cpuQuotients.map((value) => value.toFixed(2)).join(' ')}\n`,
        );
    }
  }

  if (chosen('readers')) {
    before ??= await startBeforeServer(servers);
    await benchManyReaders(servers, client, table, before);
  }

  if (chosen('webhooks'))
    await benchWebhookRows(
      servers,
      { ...(await createBenchTable(servers)), values: VALUES },
      { creates: CREATES, rounds: ROUNDS },
    );
} finally {
  await before?.stop();
  await client.end();
  await servers.stop();
}
