import { once } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp } from '../../src/http/app.ts';
import { loadConfig, type Config } from '../../src/kernel/config.ts';
import { createPrisma, type PrismaClient } from '../../src/db/prisma.ts';
import { answerClientErrors } from '../../src/http/client-errors.ts';
import { startWorker } from '../../src/jobs/start-worker.ts';
import { createLogger, type Logger } from '../../src/kernel/log.ts';
import { keepConnectionsAlive } from '../../src/http/keep-alive.ts';
import { checkedFetch } from './contract.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';

export interface ApiResponse<Body = any> {
  status: number;
  headers: Headers;
  body: Body;
  text: string;
}

export interface RequestOptions {
  token?: string;
  body?: unknown;
  /** Sent as-is instead of JSON-encoding `body`. */
  rawBody?: string;
  idempotencyKey?: string;
  headers?: Record<string, string>;
  /**
   * Skips the OpenAPI check of the answer (test/helpers/contract.ts). Only for requests the document cannot
   * describe on purpose: a method or path it does not list, or bytes that are not HTTP a client would send.
   */
  outsideContract?: true;
}

export interface TestServer {
  url: string;
  prisma: PrismaClient;
  database: TestDatabase;
  config: Config;
  request<Body = any>(method: string, path: string, options?: RequestOptions): Promise<ApiResponse<Body>>;
  graphql(query: string, variables?: Record<string, unknown>, options?: RequestOptions): Promise<ApiResponse>;
  close(): Promise<void>;
}

/** One HTTP request to `baseUrl`; the body parsed as JSON when it is JSON. */
export async function send(
  baseUrl: string,
  method: string,
  path: string,
  options: RequestOptions,
): Promise<ApiResponse> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.idempotencyKey) headers['idempotency-key'] = options.idempotencyKey;
  let body: string | undefined = options.rawBody;
  if (body === undefined && options.body !== undefined) body = JSON.stringify(options.body);
  if (body !== undefined && !Object.keys(headers).some((name) => name.toLowerCase() === 'content-type')) {
    headers['content-type'] = 'application/json';
  }
  const init = { method, headers, ...(body === undefined ? {} : { body }) };
  const response = await (options.outsideContract ? fetch : checkedFetch)(`${baseUrl}${path}`, init);
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: response.status, headers: response.headers, body: parsed, text };
}

/**
 * The real service on a real port, over its own freshly migrated database. Limits default to off so that tests
 * of other rules are not throttled; tests of the limits pass their own values.
 */
export async function startTestServer(
  overrides: Partial<Record<keyof Config, string>> = {},
  logger?: Logger,
): Promise<TestServer> {
  const database = await createTestDatabase();
  const config = loadConfig(
    {},
    {
      DATABASE_URL: database.url,
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
      RATE_LIMIT_RPS: '0',
      CONCURRENCY_LIMIT: '0',
      ORG_CONCURRENCY_LIMIT: '0',
      DATABASE_POOL_SIZE: '5',
      JOB_POLL_MS: '100',
      // Tests hold one job of their org (a lock, a hook) while another of it runs: every slot per org, unless a test
      // of the per-org cap sets it (test/job-fairness.test.ts).
      JOB_SLOTS_PER_ORG: '64',
      // Backups that any test takes land in a temporary directory, never in the working tree's DATA_DIR.
      BACKUP_DIR: mkdtempSync(join(tmpdir(), 'wds-test-backups-')),
      ...overrides,
    },
  );
  const effectiveLogger = logger ?? createLogger(config.LOG_LEVEL);
  const prisma = createPrisma(database.url, config.DATABASE_POOL_SIZE, config.QUERY_TIMEOUT_MS, effectiveLogger);
  const server: Server = createServer(createApp({ prisma, config, logger: effectiveLogger }));
  answerClientErrors(server);
  keepConnectionsAlive(server);
  // The job worker runs beside the server as it does under `npm start` (RUN_WORKER=false leaves it out).
  const worker = config.RUN_WORKER ? startWorker(prisma, config, effectiveLogger) : null;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    prisma,
    database,
    config,
    request: (method, path, options = {}) => send(url, method, path, options),
    graphql: (query, variables = {}, options = {}) =>
      send(url, 'POST', '/graphql', { ...options, body: { query, variables } }),
    close: async () => {
      await worker?.stop();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await prisma.$disconnect();
      await database.drop();
    },
  };
}
