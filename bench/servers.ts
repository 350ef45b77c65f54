import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import pg from 'pg';
import { createApp } from '../src/http/app.ts';
import { bootstrapOrg } from '../src/identity/provision.ts';
import { ensureDatabase, openDatabase } from '../src/db/database.ts';
import { migrate } from '../src/db/migrate.ts';
import { createPrisma } from '../src/db/prisma.ts';
import { loadConfig } from '../src/kernel/config.ts';
import { createLogger } from '../src/kernel/log.ts';

/**
 * The benchmark's servers, in their own process so that the load generator does not share their event loop:
 * the service (REST and /graphql) and a bare Express handler doing the same Prisma read with no GraphQL at all.
 */
// BENCH_DATABASE_NAME: several checkouts benchmarking against one shared server must not drop each other's database.
const benchDatabase = process.env.BENCH_DATABASE_NAME ?? 'wds_bench';

async function dropBenchDatabase(serverUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  await client.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(benchDatabase)} WITH (FORCE)`);
  await client.end();
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

// Limits off for throughput benchmarks; bench/flood.bench.ts sets BENCH_KEEP_LIMITS=1 to measure them as configured.
// The org's in-flight limit too: at its default (6) a bench's 16 connections queued, and a request that waited reads
// its credential again, so two credential statements per page for most requests (strace of the REST page, issue 30).
const limitsOff =
  process.env.BENCH_KEEP_LIMITS === '1'
    ? {}
    : { RATE_LIMIT_RPS: '0', CONCURRENCY_LIMIT: '0', ORG_CONCURRENCY_LIMIT: '0' };
const config = loadConfig(process.env, {
  LOG_LEVEL: 'silent',
  ...limitsOff,
  DATABASE_URL: process.env.BENCH_DATABASE_URL ?? '',
});
const logger = createLogger('silent');
const server = await openDatabase(
  loadConfig(process.env, { LOG_LEVEL: 'silent', DATABASE_URL: process.env.BENCH_DATABASE_URL ?? '' }),
  logger,
);
// A fresh database per run: rows, history and activity left by earlier runs would make later runs slower.
await dropBenchDatabase(server.url);
const url = await ensureDatabase(server.url, benchDatabase);
await migrate(url);
const prisma = createPrisma(url, config.DATABASE_POOL_SIZE, config.QUERY_TIMEOUT_MS);
const { orgId, userId, apiKey } = await bootstrapOrg(prisma, {
  orgName: 'Bench',
  email: `bench-${Date.now()}@example.com`,
  name: 'Bench',
});
await prisma.preference.create({
  data: {
    userId,
    timezone: 'Europe/Berlin',
    locale: 'de-DE',
    dateFormat: 'day-month-year',
    timeFormat: '24-hour',
    theme: 'dark',
  },
});

const servicePort = await listen(createServer(createApp({ prisma, config, logger })));
const bare = express();
bare.get('/preferences', async (_req, res) => {
  res.json(
    await prisma.preference.findUnique({
      where: { userId },
      select: { timezone: true, locale: true, dateFormat: true, timeFormat: true, theme: true },
    }),
  );
});
const barePort = await listen(createServer(bare));

/**
 * The floor under any Node service on this machine: a bare node:http server that answers each GET of a registered
 * statement with the one text value PostgreSQL built (no routing framework, credential, limits, GraphQL or JSON work
 * in Node beyond joining texts). A bench registers a statement with POST /statements/<name> and a body of
 * `{ sql, params }` (see `registerFloor`); a GET may
 * replace the parameters with `?params=<JSON array>`, so that a page can vary per request as the service's does.
 */
type FloorRow = { body: string } | { id: string; h: string; v: string };

/** The statement's one `body`, or its row page's rows joined as the service answers them (texts, never parsed). */
function floorBody(rows: FloorRow[]): string {
  if (rows.length === 1 && 'body' in rows[0]!) return rows[0].body;
  const page = rows as { id: string; h: string; v: string }[];
  return `{"data":[${page.map((row) => `{"id":"${row.id}",${row.h.slice(1, -1)},"values":${row.v}}`).join(',')}]}`;
}

const floorStatements = new Map<string, { sql: string; params: unknown[] }>();
const floorPool = new pg.Pool({ connectionString: url, max: 4 });
const floorPort = await listen(
  createServer((req, res) => {
    const url = new URL(req.url!, 'http://floor');
    const name = url.pathname.slice('/statements/'.length);
    if (req.method === 'POST') {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        floorStatements.set(name, JSON.parse(Buffer.concat(chunks).toString('utf8')));
        res.writeHead(204).end();
      });
      return;
    }
    const statement = floorStatements.get(name);
    if (!statement) return void res.writeHead(404).end();
    const params = url.searchParams.get('params');
    const values = params === null ? statement.params : (JSON.parse(params) as unknown[]);
    floorPool.query<FloorRow>({ name: `floor_${name}`, text: statement.sql, values }).then(
      ({ rows }) => res.writeHead(200, { 'content-type': 'application/json' }).end(floorBody(rows)),
      (error: Error) => res.writeHead(500).end(error.message),
    );
  }),
);

process.stdout.write(
  `${JSON.stringify({ servicePort, barePort, floorPort, floorPid: process.pid, apiKey, orgId, userId, databaseUrl: url })}\n`,
);
process.on('SIGTERM', async () => {
  await floorPool.end();
  await prisma.$disconnect();
  await server.close();
  process.exit(0);
});
