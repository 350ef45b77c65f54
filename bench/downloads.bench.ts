import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { createPrisma } from '../src/db/prisma.ts';
import { bootstrapOrg } from '../src/identity/provision.ts';
import { api, median, percentile, spawnChild, startServers, workerArgs, type Servers } from './harness.ts';

/**
 * Artifact downloads against everyone else (issue 48): while DOWNLOADS clients download a large export artifact
 * (BENCH_ARTIFACT_MB, default 96 MiB, in the exports' 4 MiB chunks) again and again, one prober asks `/healthz` and
 * another org's rows page, one request at a time each. Figures per side: `/healthz` p95 and the other org's page
 * p50, during the downloads and idle. The downloads run as `curl` processes, so the bench's event loop only probes.
 *
 * BENCH_BEFORE=<checkout with dist/ built> (e.g. /work/main) runs that checkout's `node dist/main.js` beside this
 * one's on the same database, with the same settings; the sides alternate, BENCH_ROUNDS rounds (default 3) of
 * BENCH_WINDOW_S seconds (default 10) each. The checkout is not built here: its dist/ is used as it is.
 */
const DOWNLOADS = Number(process.env.BENCH_DOWNLOADS ?? 3);
const ARTIFACT_MB = Number(process.env.BENCH_ARTIFACT_MB ?? 96);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const WINDOW_MS = Number(process.env.BENCH_WINDOW_S ?? 10) * 1000;
const CHUNK = 4 * 1024 * 1024;
const TERMINAL = new Set(['succeeded', 'failed', 'partially_completed', 'cancelled']);

interface Side {
  name: string;
  port: number;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** `node dist/main.js` of `directory` as it is built, with the bench servers' settings (limits off, no worker). */
async function startBuilt(name: string, directory: string, databaseUrl: string): Promise<Side> {
  const port = await freePort();
  const child = spawnChild(process.execPath, ['dist/main.js'], {
    cwd: directory,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      NODE_ENV: 'production',
      RATE_LIMIT_RPS: '0',
      CONCURRENCY_LIMIT: '0',
      ORG_CONCURRENCY_LIMIT: '0',
      DATABASE_URL: databaseUrl,
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'silent',
      RUN_WORKER: 'false',
    },
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  for (let tries = 0; ; tries += 1) {
    const ready = await fetch(`http://127.0.0.1:${port}/healthz`).then(
      (response) => response.ok,
      () => false,
    );
    if (ready) break;
    if (tries > 600) throw new Error(`${directory}/dist/main.js did not start`);
    await sleep(100);
  }
  return {
    name,
    port,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Runs a worker until `job` is terminal: the bench's small export, whose artifact is then made large. */
async function runExport(servers: Servers, path: string): Promise<{ jobId: string; url: string; name: string }> {
  const worker = spawnChild(process.execPath, workerArgs(), {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, NODE_ENV: 'production', DATABASE_URL: servers.databaseUrl, LOG_LEVEL: 'silent' },
  });
  try {
    const handle = await api(servers, 'POST', `${path}/exports`, { format: 'csv', fileName: 'large.csv' });
    let job: any;
    do {
      await sleep(100);
      job = await api(servers, 'GET', handle.statusUrl);
    } while (!TERMINAL.has(job.state));
    if (job.state !== 'succeeded') throw new Error(`the export ended ${job.state}`);
    return { jobId: handle.jobId, url: job.artifacts[0].url, name: job.artifacts[0].name };
  } finally {
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.kill('SIGTERM');
    await exited;
  }
}

/** Replaces the artifact's content with ARTIFACT_MB of random bytes in 4 MiB chunks, each with its digest. */
async function enlargeArtifact(client: pg.Client, artifact: { jobId: string; name: string }): Promise<void> {
  const chunks = Math.ceil(ARTIFACT_MB / 4);
  const whole = createHash('sha256');
  await client.query('BEGIN');
  await client.query('DELETE FROM public.job_artifact_chunks WHERE job_id = $1 AND name = $2', [
    artifact.jobId,
    artifact.name,
  ]);
  for (let seq = 0; seq < chunks; seq += 1) {
    const data = randomBytes(CHUNK);
    whole.update(data);
    await client.query(
      'INSERT INTO public.job_artifact_chunks (job_id, name, seq, data, sha256) VALUES ($1, $2, $3, $4, $5)',
      [artifact.jobId, artifact.name, seq, data, createHash('sha256').update(data).digest('hex')],
    );
  }
  await client.query(
    `UPDATE public.job_artifacts SET chunks = $3, size_bytes = $4, sha256 = $5, content = '\\x'::bytea
      WHERE job_id = $1 AND name = $2`,
    [artifact.jobId, artifact.name, chunks, chunks * CHUNK, whole.digest('hex')],
  );
  await client.query('COMMIT');
}

/** One `curl` downloading `url` again and again until `stop` is aborted. */
async function downloadLoop(port: number, url: string, apiKey: string, stop: AbortSignal): Promise<number> {
  let completed = 0;
  while (!stop.aborted) {
    const curl: ChildProcess = spawn(
      'curl',
      ['-sf', '-o', '/dev/null', '-H', `authorization: Bearer ${apiKey}`, `http://127.0.0.1:${port}${url}`],
      { stdio: 'ignore' },
    );
    const onAbort = () => curl.kill('SIGTERM');
    stop.addEventListener('abort', onAbort, { once: true });
    const code = await new Promise<number | null>((resolve) => curl.once('exit', resolve));
    stop.removeEventListener('abort', onAbort);
    if (code === 0) completed += 1;
    else if (!stop.aborted) throw new Error(`curl exited ${code}`);
  }
  return completed;
}

/** Latencies (ms) of one request after another to `url` until `stop`. */
async function probe(url: string, headers: Record<string, string>, stop: AbortSignal): Promise<number[]> {
  const latencies: number[] = [];
  while (!stop.aborted) {
    const started = performance.now();
    const response = await fetch(url, { headers });
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`${url}: ${response.status}`);
    latencies.push(performance.now() - started);
  }
  return latencies;
}

interface Window {
  healthP95: number;
  pageP50: number;
  probes: number;
  downloads: number;
}

async function measure(
  side: Side,
  downloads: number,
  artifactUrl: string,
  apiKey: string,
  other: { path: string; key: string },
): Promise<Window> {
  const stop = new AbortController();
  const loops = Array.from({ length: downloads }, () => downloadLoop(side.port, artifactUrl, apiKey, stop.signal));
  // Let the downloads get going before the probes count.
  if (downloads > 0) await sleep(500);
  const base = `http://127.0.0.1:${side.port}`;
  const health = probe(`${base}/healthz`, {}, stop.signal);
  const page = probe(`${base}${other.path}`, { authorization: `Bearer ${other.key}` }, stop.signal);
  await sleep(WINDOW_MS);
  stop.abort();
  const [healthLatencies, pageLatencies, completed] = await Promise.all([health, page, Promise.all(loops)]);
  const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
  return {
    healthP95: percentile(sorted(healthLatencies), 0.95),
    pageP50: percentile(sorted(pageLatencies), 0.5),
    probes: healthLatencies.length + pageLatencies.length,
    downloads: completed.reduce((sum, count) => sum + count, 0),
  };
}

async function main(): Promise<void> {
  const servers = await startServers();
  const client = new pg.Client({ connectionString: servers.databaseUrl });
  const sides: Side[] = [];
  try {
    await client.connect();
    const database = await api(servers, 'POST', `/v1/orgs/${servers.orgId}/databases`, { name: 'Downloads' });
    const table = await api(servers, 'POST', `/v1/orgs/${servers.orgId}/databases/${database.id}/tables`, {
      name: 'Small',
      fields: [{ name: 'Name', type: 'text' }],
    });
    const path = `/v1/orgs/${servers.orgId}/databases/${database.id}/tables/${table.id}`;
    const artifact = await runExport(servers, path);
    await enlargeArtifact(client, artifact);

    // Another org with a table of 50 rows: its first page is what "everyone else" asks for.
    const prisma = createPrisma(servers.databaseUrl, 2, 0);
    const other = await bootstrapOrg(prisma, { orgName: 'Other', email: `other-${Date.now()}@example.com`, name: 'O' });
    await prisma.$disconnect();
    const otherApi = { ...servers, apiKey: other.apiKey, orgId: other.orgId };
    const otherDb = await api(otherApi, 'POST', `/v1/orgs/${other.orgId}/databases`, { name: 'Other' });
    const otherTable = await api(otherApi, 'POST', `/v1/orgs/${other.orgId}/databases/${otherDb.id}/tables`, {
      name: 'Items',
      fields: [{ name: 'Name', type: 'text' }],
    });
    const otherPath = `/v1/orgs/${other.orgId}/databases/${otherDb.id}/tables/${otherTable.id}`;
    await api(otherApi, 'POST', `${otherPath}/rows/batch`, {
      expectedSchemaVersion: otherTable.schemaVersion,
      operations: Array.from({ length: 50 }, (_item, index) => ({
        op: 'create',
        values: { [otherTable.fields[0].id]: `item ${index}` },
      })),
    });

    sides.push({ name: 'this tree', port: servers.servicePort, stop: async () => undefined });
    if (process.env.BENCH_BEFORE)
      sides.unshift(await startBuilt('before', process.env.BENCH_BEFORE, servers.databaseUrl));
    const results = new Map<string, { idle: Window[]; busy: Window[] }>(
      sides.map((side) => [side.name, { idle: [], busy: [] }]),
    );
    const target = { path: `${otherPath}/rows?limit=50`, key: other.apiKey };
    for (let round = 1; round <= ROUNDS; round += 1) {
      for (const side of round % 2 === 1 ? sides : [...sides].reverse()) {
        const idle = await measure(side, 0, artifact.url, servers.apiKey, target);
        const busy = await measure(side, DOWNLOADS, artifact.url, servers.apiKey, target);
        results.get(side.name)!.idle.push(idle);
        results.get(side.name)!.busy.push(busy);
        process.stdout.write(
          `round ${round} ${side.name}: idle /healthz p95 ${idle.healthP95.toFixed(1)} ms, other org's page p50 ` +
            `${idle.pageP50.toFixed(1)} ms | ${DOWNLOADS} downloads: /healthz p95 ${busy.healthP95.toFixed(1)} ms, ` +
            `page p50 ${busy.pageP50.toFixed(1)} ms (${busy.probes} probes, ${busy.downloads} downloads of ` +
            `${ARTIFACT_MB} MiB done)\n`,
        );
      }
    }
    for (const [name, { idle, busy }] of results) {
      const of = (windows: Window[], key: 'healthP95' | 'pageP50') => median(windows.map((w) => w[key])).toFixed(1);
      process.stdout.write(
        `${name}: median of ${ROUNDS} — idle /healthz p95 ${of(idle, 'healthP95')} ms, page p50 ${of(idle, 'pageP50')} ms;` +
          ` during ${DOWNLOADS} downloads /healthz p95 ${of(busy, 'healthP95')} ms, page p50 ${of(busy, 'pageP50')} ms,` +
          ` downloads per window ${median(busy.map((w) => w.downloads))}\n`,
      );
    }
  } finally {
    for (const side of sides) await side.stop();
    await client.end();
    await servers.stop();
  }
}

await main();
