import { FeedArming } from '../../catalog/change-arming.ts';
import { SharedSequencer } from '../../catalog/change-sequencing.ts';
import { ChangeReadAhead } from '../../catalog/change-read-ahead.ts';
import { SharedChangeReads } from '../../catalog/change-reads.ts';
import { createYoga, type Plugin, type YogaServerInstance } from 'graphql-yoga';
import type { Config } from '../../kernel/config.ts';
import { ChannelListener } from '../../db/listener.ts';
import { connectionStringOf, sqlPoolOf, type PrismaClient } from '../../db/prisma.ts';
import { pgExecutor } from '../../db/sql.ts';
import { isStatementTimeout, queryTimeoutError } from '../../db/statement-budget.ts';
import { DomainError } from '../../kernel/errors.ts';
import { stringifyAnswer } from '../../kernel/raw-json.ts';
import { JOB_UPDATED_CHANNEL } from '../../jobs/engine/sql/queue.ts';
import { CHANGES_CHANNEL } from '../../catalog/changes.ts';
import type { Logger } from '../../kernel/log.ts';
import { resolveCredential } from '../../identity/credentials.ts';
import type { Caller } from '../../kernel/caller.ts';
import { databaseUnavailableError, isDatabaseUnavailable } from '../../db/availability.ts';
import type { Context, ResolvedCredential, ServerContext } from './context.ts';
import { compiledExecution } from './compiled-execution.ts';
import { schema } from '../schema.ts';
import { refuseUnstorableText } from './refuse-unstorable-text.ts';
import { SchemaCache } from '../../catalog/table-schema.ts';
import { queryLimits } from './query-limits.ts';
import { responseSizeLimit } from './response-size.ts';
import { GRAPHIQL_OPTIONS, renderGraphiQLPage } from './graphiql.ts';
import { ViewLensCache } from '../views/lens-cache.ts';
import { StreamRegistry } from '../../kernel/stream-limits.ts';
import { limiterStore } from '../../kernel/rate-limit-store.ts';
import { RedisStreamCounts } from '../../db/stream-counts.ts';
import type { Redis } from 'ioredis';
import { HeavyReadQueue } from './heavy-reads.ts';

export type GraphServer = YogaServerInstance<ServerContext, Context>;

/** The error a resolver threw, under the GraphQLError that graphql-js wraps it in (if it did). */
function thrownBy(error: unknown): unknown {
  const original = (error as { originalError?: unknown } | null)?.originalError;
  return original ?? error;
}

/**
 * Errors from resolvers that are not DomainErrors are bugs: log them with the request id before they are masked.
 * (Checks use our own DomainError class, not `instanceof GraphQLError`: test runners may load graphql twice.)
 */
function logUnexpectedErrors(): Plugin<Context> {
  return {
    onExecute: () => ({
      onExecuteDone: ({ args, result }) => {
        if (!('errors' in result) || !result.errors) return;
        for (const error of result.errors) {
          const thrown = thrownBy(error);
          if (thrown !== error && isStatementTimeout(thrown)) {
            args.contextValue.log.warn({ path: error.path }, 'query ran out of its statement budget');
          } else if (thrown !== error && isDatabaseUnavailable(thrown)) {
            args.contextValue.log.warn({ err: thrown, path: error.path }, 'the database is unavailable');
          } else if (thrown !== error && !(thrown instanceof DomainError)) {
            args.contextValue.log.error({ err: thrown, path: error.path }, 'unexpected error in resolver');
          }
        }
      },
    }),
  };
}

/**
 * DomainErrors and GraphQL's own request errors (syntax, validation) pass; a statement cancelled by its time budget
 * becomes QUERY_TIMEOUT; anything else a resolver threw is masked.
 */
function maskUnexpected(error: unknown): Error {
  const thrown = thrownBy(error);
  // graphql-js wrapped it with the field's path and locations (its extensions are the DomainError's): keep them,
  // so that a client following several edges learns which one was refused.
  if (thrown instanceof DomainError) return thrown !== error && error instanceof Error ? error : thrown;
  if (isStatementTimeout(thrown)) return queryTimeoutError();
  if (isDatabaseUnavailable(thrown)) return databaseUnavailableError();
  if (thrown === error && error instanceof Error && error.name === 'GraphQLError') return error;
  return new DomainError('INTERNAL_ERROR', 'Internal error.');
}

/**
 * /graphql answers write PostgreSQL-built JSON (RawJson: a read row's `values`) as it is: Yoga serializes a result
 * with its `stringify` when it has one (graphql-jit's is plain JSON.stringify).
 */
function splicePostgresJson(): Plugin<Context> {
  return {
    onExecute: () => ({
      onExecuteDone: ({ result }) => {
        if (!(Symbol.asyncIterator in result))
          (result as { stringify?: (value: unknown) => string }).stringify = stringifyAnswer;
      },
    }),
  };
}

function callerOf(credential: ResolvedCredential): Caller | null {
  if ('rejected' in credential) throw credential.rejected;
  return credential.caller;
}

/**
 * A shared stream lease lasts this many re-checks (renewed at each): 30 s by default, so that the streams of a process
 * that died free their slots within half a minute, while a renewal may fail five times in a row before a lease ends.
 */
const STREAM_LEASE_RECHECKS = 6;

/**
 * The one GraphQL server: `/graphql` mounts it, and src/http/rest runs its typed operations through its envelop
 * in-process (src/http/rest/execute.ts), so both get the same context, authority, validation and error masking.
 */
export function createGraphServer(
  prisma: PrismaClient,
  config: Config,
  logger: Logger,
  shutdown?: AbortSignal,
  redis?: Redis,
): GraphServer {
  const schemas = new SchemaCache();
  const views = new ViewLensCache();
  const jobUpdates = new ChannelListener(connectionStringOf(prisma), JOB_UPDATED_CHANNEL, logger);
  const changeSignals = new ChannelListener(connectionStringOf(prisma), CHANGES_CHANNEL, logger);
  const changeArms = new FeedArming(pgExecutor(sqlPoolOf(prisma)), (databaseId) => changeSignals.version(databaseId));
  const changeSequencer = new SharedSequencer(pgExecutor(sqlPoolOf(prisma)));
  const changeReads = new SharedChangeReads();
  const sqlPool = sqlPoolOf(prisma);
  // A read ahead leaves a connection besides its own, and waits for none (the pool's own size; pg's default is 10).
  const changeReadAhead = new ChangeReadAhead(
    () => sqlPool.waitingCount === 0 && sqlPool.idleCount + (sqlPool.options.max ?? 10) - sqlPool.totalCount >= 2,
  );
  const streams = new StreamRegistry(
    {
      perCredential: config.EVENT_STREAMS_PER_CREDENTIAL,
      perOrg: config.EVENT_STREAMS_PER_ORG,
      recheckMs: config.EVENT_STREAM_RECHECK_MS,
    },
    redis && new RedisStreamCounts(redis, STREAM_LEASE_RECHECKS * config.EVENT_STREAM_RECHECK_MS),
    (error) => logger.warn({ err: error }, 'shared event-stream counts unavailable; counting in this process'),
  );
  // Per minute, shared by the service's processes through Redis as the request rate is.
  const webhookActions =
    config.WEBHOOK_ACTIONS_PER_MINUTE === 0
      ? null
      : limiterStore(redis, 'webhook-actions', config.WEBHOOK_ACTIONS_PER_MINUTE, 60);
  // On SIGTERM, open job and change streams (REST and /graphql) end at once with a last event that says to
  // reconnect, and a waiting long poll of the change feed answers its empty page.
  shutdown?.addEventListener(
    'abort',
    () => {
      jobUpdates.drain();
      changeSignals.drain();
    },
    { once: true },
  );
  return createYoga<ServerContext, Context>({
    schema,
    graphqlEndpoint: '/graphql',
    landingPage: false,
    // CORS is an allow-list in front of both /graphql and /v1 (src/http/middleware/cors.ts), never yoga's default.
    cors: false,
    // GET /graphql from a browser (Accept: text/html) answers GraphiQL, its assets served locally (src/graph/server/graphiql.ts).
    graphiql: GRAPHIQL_OPTIONS,
    renderGraphiQL: renderGraphiQLPage,
    batching: false,
    logging: false,
    maskedErrors: { maskError: maskUnexpected },
    context: async ({ request, requestId, log, credential }): Promise<Context> => ({
      prisma,
      config,
      requestId,
      log,
      caller: credential
        ? callerOf(credential)
        : await resolveCredential(prisma, request.headers, config.OAUTH_AUDIENCE),
      schemas,
      loaders: new Map(),
      heavyReads: new HeavyReadQueue(),
      views,
      jobUpdates,
      changeSignals,
      changeArms,
      changeSequencer,
      changeReads,
      changeReadAhead,
      streams,
      webhookActions,
      resolveCallerAgain: () => resolveCredential(prisma, request.headers, config.OAUTH_AUDIENCE),
    }),
    plugins: [
      ...queryLimits(),
      responseSizeLimit(config.RESPONSE_LIMIT_BYTES),
      refuseUnstorableText(),
      logUnexpectedErrors(),
      // Each document compiled once into plain functions (graphql-jit) instead of graphql-js walking ~1,500 fields of
      // a 100-entry page per request, where graphql-jit answers exactly as graphql-js; graphql-js everywhere else.
      compiledExecution(logger),
      splicePostgresJson(),
    ],
  });
}
