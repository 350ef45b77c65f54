import type { Redis } from 'ioredis';
import { constants as zlibConstants } from 'node:zlib';
import compression from 'compression';
import express, { Router, type ErrorRequestHandler, type Express, type RequestHandler } from 'express';
import type { Config } from '../kernel/config.ts';
import { sqlPoolOf, type PrismaClient } from '../db/prisma.ts';
import { DomainError } from '../kernel/errors.ts';
import { createGraphServer, type GraphServer } from '../graph/server/yoga.ts';
import { GRAPHIQL_ASSET_PATH } from '../graph/server/graphiql.ts';
import { graphiqlAssets } from './graphiql-assets.ts';
import type { Logger } from '../kernel/log.ts';
import { sendDomainError, sendError } from './error-response.ts';
import { bodyReadDeadline } from './middleware/body-deadline.ts';
import { jsonBody } from './middleware/json-body.ts';
import { corsAllowList } from './middleware/cors.ts';
import { inFlightLimit } from './middleware/in-flight.ts';
import { rateLimit } from './middleware/rate-limit.ts';
import { MemorySlotStore, RedisSlotStore } from './middleware/slot-stores.ts';
import { resolveCaller, resolvedCredentialOf } from './middleware/caller.ts';
import { oauthRoutes } from './oauth-routes.ts';
import { requestContext } from './middleware/request-context.ts';
import { openApiDocument } from './openapi/document.ts';
import { DATABASE_RETRY_AFTER_SECONDS, databaseUnavailableError, isDatabaseUnavailable } from '../db/availability.ts';
import { httpMetrics } from './metrics.ts';
import { restRouter } from './rest/router.ts';
import { docsRoutes } from './docs.ts';
import { routes } from './rest/routes.ts';
import { sessionRoutes } from './session-routes.ts';

export interface AppDependencies {
  prisma: PrismaClient;
  config: Config;
  logger: Logger;
  /** With REDIS_URL: rate and in-flight limits are shared by every process through it (DESIGN §5). */
  redis?: Redis;
  /** Aborted when the process starts shutting down (src/main.ts): open event streams end. */
  shutdown?: AbortSignal;
}

// A Router, not a sub-app: a mounted express() app sets X-Powered-By again on everything that passes through it.
function health(prisma: PrismaClient): Router {
  const app = Router();
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    try {
      await prisma.$queryRaw`SELECT 1`;
      res.json({ status: 'ready', checks: { database: 'ok' } });
    } catch {
      res
        .status(503)
        .set('Retry-After', String(DATABASE_RETRY_AFTER_SECONDS))
        .json({ status: 'unavailable', checks: { database: 'unreachable' } });
    }
  });
  return app;
}

/** /graphql for clients that write their own documents; the same Yoga instance serves src/http/rest. */
function graphqlEndpoint(yoga: GraphServer, config: Config): RequestHandler[] {
  return [
    ...jsonBody(config.BODY_LIMIT_BYTES),
    // Any document may select a one-time secret (a key, an invitation token, a TOTP secret): never cache.
    (_req, res, next) => {
      res.set('Cache-Control', 'no-store');
      next();
    },
    // `handle` converts the Node request, runs the operation and writes the response.
    (req, res) => {
      const credential = resolvedCredentialOf(res);
      return yoga.handle(req, res, {
        requestId: res.locals.requestId,
        log: res.locals.log,
        ...(credential ? { credential } : {}),
      });
    },
  ];
}

const unknownRoute: RequestHandler = (req, res) => {
  sendError(req, res, { code: 'RESOURCE_NOT_FOUND', message: `No route for ${req.method} ${req.path}.` });
};

/** body-parser's failures become the envelope; anything else is a bug, logged and answered with a redacted 500. */
const errorHandler: ErrorRequestHandler = (error, req, res, _next) => {
  if (error instanceof DomainError) return sendDomainError(req, res, error);
  const type = (error as { type?: string }).type;
  if (type === 'entity.too.large')
    return sendError(req, res, { code: 'PAYLOAD_TOO_LARGE', message: 'The request body is too large.' });
  if (type === 'entity.parse.failed')
    return sendError(req, res, { code: 'BAD_REQUEST', message: 'The request body is not valid JSON.' });
  if (type === 'encoding.unsupported' || type === 'charset.unsupported') {
    return sendError(req, res, { code: 'UNSUPPORTED_MEDIA_TYPE', message: 'Request bodies must be UTF-8 JSON.' });
  }
  if (type === 'request.aborted') return; // the client went away; nobody to answer
  // A body that does not decode as its Content-Encoding says (`gzip` over plain text): body-parser's bare 400.
  if ((error as { status?: unknown }).status === 400) {
    return sendError(req, res, {
      code: 'BAD_REQUEST',
      message: 'The request body could not be read as its Content-Encoding says.',
    });
  }
  // Express cannot decode a path parameter such as `%E0%A4%A`: a malformed request, not our failure.
  if (error instanceof URIError)
    return sendError(req, res, { code: 'BAD_REQUEST', message: 'The request path is not valid percent-encoding.' });
  if (isDatabaseUnavailable(error)) {
    res.locals.log?.warn({ err: error }, 'the database is unavailable');
    return sendDomainError(req, res, databaseUnavailableError());
  }
  res.locals.log?.error({ err: error }, 'unhandled error');
  sendError(req, res, { code: 'INTERNAL_ERROR', message: 'Internal error.' });
};

/**
 * gzip/br for JSON, GraphiQL's and the API reference's pages and scripts (GraphiQL's bundle is 8.8 MB raw, ~2 MB
 * gzipped). Never a server-sent event stream (each frame must reach the client when written), nor an artifact
 * download: its Content-Digest and Content-Length describe the stored bytes, and clients check them.
 */
function compressible(
  req: Parameters<typeof compression.filter>[0],
  res: Parameters<typeof compression.filter>[1],
): boolean {
  if (res.getHeader('Content-Digest') !== undefined) return false;
  if (String(res.getHeader('Content-Type') ?? '').startsWith('text/event-stream')) return false;
  return compression.filter(req, res);
}

/** A request's slot outlives a process that died holding it for this long: longer than any request should run. */
function slotLeaseMs(config: Config): number {
  return Math.max(60_000, 2 * config.QUERY_TIMEOUT_MS + config.BODY_READ_TIMEOUT_MS);
}

export function createApp({ prisma, config, logger, redis, shutdown }: AppDependencies): Express {
  const yoga = createGraphServer(prisma, config, logger, shutdown, redis);
  const openApi = openApiDocument(routes);
  const app = express();
  app.disable('x-powered-by');
  // Express would hash every response body for an ETag, POSTs included; resources carry versions instead.
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.use(requestContext(logger));
  const metrics =
    config.METRICS_TOKEN === undefined
      ? undefined
      : httpMetrics(prisma, config.METRICS_TOKEN, [
          ...Object.keys(openApi.paths as Record<string, unknown>),
          '/graphql',
        ]);
  if (metrics) app.use(metrics.record);
  // gzip at level 1: a 1,000-row answer (355 KB) costs ~0.9 ms of CPU against ~2.0 ms at zlib's default 6, for
  // 28 KB instead of 26 KB (docs/decisions/integrators.md). Brotli keeps the library's quality 4, already as fast.
  app.use(compression({ filter: compressible, level: zlibConstants.Z_BEST_SPEED }));
  app.use(health(prisma));
  if (metrics) app.get('/metrics', metrics.serve);
  app.use(['/v1', '/graphql'], corsAllowList(config.CORS_ORIGINS));
  app.use(bodyReadDeadline(config.BODY_READ_TIMEOUT_MS));
  app.use(
    ['/v1', '/graphql', '/oauth'],
    resolveCaller(prisma, config),
    rateLimit(config, redis),
    inFlightLimit(
      prisma,
      config,
      logger,
      redis ? new RedisSlotStore(redis, slotLeaseMs(config)) : new MemorySlotStore(),
    ),
  );
  app.get('/v1/openapi.json', (_req, res) => {
    res.json(openApi);
  });
  app.use(sessionRoutes(prisma, config));
  app.use(oauthRoutes(prisma, config));
  app.use(restRouter(routes, yoga, config, sqlPoolOf(prisma)));
  app.get(`${GRAPHIQL_ASSET_PATH}/:name`, graphiqlAssets);
  app.use(docsRoutes());
  // app.all, not app.use: Yoga must see the full path to recognise its endpoint.
  app.all('/graphql', ...graphqlEndpoint(yoga, config));
  app.use(unknownRoute);
  app.use(errorHandler);
  return app;
}
