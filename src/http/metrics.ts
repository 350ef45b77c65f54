import { createHash, timingSafeEqual } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { sqlPoolOf, type PrismaClient } from '../db/prisma.ts';
import { heavyReadsNow } from '../graph/server/heavy-reads.ts';
import { pgExecutor } from '../db/sql.ts';
import { FAILED_WINDOW_SECONDS, jobCountsByKind, type JobCountRow } from '../jobs/engine/sql/metrics.ts';
import { sendError } from './error-response.ts';
import { expressPath } from './rest/route.ts';

/**
 * Prometheus metrics (prom-client), one registry per app so that several apps in one process (tests) keep theirs
 * apart. Requests are counted by route template, never by raw path: `/v1/orgs/:orgId` is one series, not one per
 * org. The pool and the job queue are read when Prometheus scrapes, not kept up to date on every change.
 */
export interface HttpMetrics {
  /** Records every request's status and duration under its route template. */
  record: RequestHandler;
  /** GET /metrics, for `Authorization: Bearer <METRICS_TOKEN>` only. */
  serve: RequestHandler;
}

/** Seconds: from a cached read (~1 ms) to the statement timeout (5 s) and past it. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** A route template (`/v1/orgs/{orgId}`) as a matcher of request paths, labelled as Express writes it. */
interface Template {
  label: string;
  pattern: RegExp;
  params: number;
}

function templateOf(path: string): Template {
  const segments = path.split('/').map((segment) => (/^\{\w+\}$/.test(segment) ? null : segment));
  const source = segments.map((segment) => (segment === null ? '[^/]+' : segment.replace(/[.*+?^$()|[\]\\]/g, '\\$&')));
  return {
    label: expressPath(path),
    pattern: new RegExp(`^${source.join('/')}/?$`),
    params: segments.filter((segment) => segment === null).length,
  };
}

/**
 * The template a request matched (`/v1/orgs/:orgId`). A request refused before routing (401 from the credential
 * check, 429 from a limit, 408 from the body deadline) has no matched route yet: it is labelled with the documented
 * template its path fits, the most specific one (`…/changes/head` before `…/changes/{x}`), so that refusals are
 * counted beside the answers of the same route. Paths no template fits are `unmatched`: labels must not grow with
 * the URLs sent.
 */
function routeLabeller(paths: readonly string[]): (req: Request) => string {
  const templates = paths.map(templateOf).sort((a, b) => a.params - b.params);
  return (req) => {
    const path = (req.route as { path?: unknown } | undefined)?.path;
    if (typeof path === 'string') return `${req.baseUrl}${path}`;
    const requested = req.originalUrl.split('?', 1)[0]!;
    return templates.find((template) => template.pattern.test(requested))?.label ?? 'unmatched';
  };
}

const digest = (text: string) => createHash('sha256').update(text).digest();

/** Constant time whatever the presented token's length: both sides are compared as SHA-256 digests. */
function bearerMatches(header: string | undefined, token: string): boolean {
  const presented = /^Bearer (\S+)$/i.exec(header ?? '')?.[1] ?? '';
  return timingSafeEqual(digest(presented), digest(token));
}

/** `paths`: the templates requests may be refused on before routing (the OpenAPI document's paths, /graphql). */
export function httpMetrics(prisma: PrismaClient, token: string, paths: readonly string[]): HttpMetrics {
  const routeOf = routeLabeller(paths);
  const register = new Registry();
  collectDefaultMetrics({ register });
  const labelNames = ['method', 'route', 'status'] as const;
  const requests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests answered, by route template and status.',
    labelNames,
    registers: [register],
  });
  const durations = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time to answer an HTTP request, by route template and status.',
    labelNames,
    buckets: DURATION_BUCKETS,
    registers: [register],
  });
  const pool = sqlPoolOf(prisma);
  new Gauge({
    name: 'db_pool_connections',
    help: 'Catalog pool connections: in use, idle, and requests waiting for one.',
    labelNames: ['state'],
    registers: [register],
    collect() {
      this.set({ state: 'in_use' }, pool.totalCount - pool.idleCount);
      this.set({ state: 'idle' }, pool.idleCount);
      this.set({ state: 'waiting' }, pool.waitingCount);
    },
  });
  new Gauge({
    name: 'graphql_heavy_reads',
    help: 'Heavy fields (aggregates, search, similarity, lookups, exports) of this process: running, and waiting for their request’s turn.',
    labelNames: ['state'],
    registers: [register],
    collect() {
      this.set({ state: 'running' }, heavyReadsNow.running);
      this.set({ state: 'waiting' }, heavyReadsNow.waiting);
    },
  });
  new Gauge({
    name: 'jobs',
    help: `Jobs queued and running now, and failed in the last ${FAILED_WINDOW_SECONDS} seconds, by kind.`,
    labelNames: ['kind', 'state'],
    registers: [register],
    async collect() {
      this.reset();
      const { sql, params } = jobCountsByKind();
      for (const row of await pgExecutor(pool).query<JobCountRow>(sql, params))
        this.set({ kind: row.kind, state: row.state }, row.count);
    },
  });

  const record: RequestHandler = (req, res, next) => {
    const stop = durations.startTimer();
    res.on('finish', () => {
      const labels = { method: req.method, route: routeOf(req), status: String(res.statusCode) };
      requests.inc(labels);
      stop(labels);
    });
    next();
  };

  const serve = async (req: Request, res: Response) => {
    if (!bearerMatches(req.get('authorization'), token)) {
      return sendError(req, res, {
        code: 'UNAUTHENTICATED',
        message: 'GET /metrics needs Authorization: Bearer <METRICS_TOKEN>.',
      });
    }
    res.set({ 'Content-Type': register.contentType, 'Cache-Control': 'no-store' }).send(await register.metrics());
  };
  return { record, serve };
}
