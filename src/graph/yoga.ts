import { EnvelopArmorPlugin } from '@escape.tech/graphql-armor';
import { createYoga, type Plugin, type YogaServerInstance } from 'graphql-yoga';
import type { Config } from '../config.ts';
import type { PrismaClient } from '../db/prisma.ts';
import { isStatementTimeout, queryTimeoutError } from '../db/statement-budget.ts';
import { DomainError } from '../errors.ts';
import { resolveCredential } from './auth/credentials.ts';
import type { Caller } from './auth/caller.ts';
import type { Context, ResolvedCredential, ServerContext } from './context.ts';
import { schema } from './index.ts';
import { refuseUnstorableText } from './input-hygiene.ts';
import { SchemaCache } from './tables/loader.ts';

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
  if (thrown instanceof DomainError) return thrown;
  if (isStatementTimeout(thrown)) return queryTimeoutError();
  if (thrown === error && error instanceof Error && error.name === 'GraphQLError') return error;
  return new DomainError('INTERNAL_ERROR', 'Internal error.');
}

function callerOf(credential: ResolvedCredential): Caller | null {
  if ('rejected' in credential) throw credential.rejected;
  return credential.caller;
}

/**
 * The one GraphQL server: `/graphql` mounts it, and src/rest runs its typed operations through its envelop
 * in-process (src/rest/execute.ts), so both get the same context, authority, validation and error masking.
 */
export function createGraphServer(prisma: PrismaClient, config: Config): GraphServer {
  const schemas = new SchemaCache();
  return createYoga<ServerContext, Context>({
    schema,
    graphqlEndpoint: '/graphql',
    landingPage: false,
    // CORS is an allow-list in front of both /graphql and /v1 (src/rest/middleware/cors.ts), never yoga's default.
    cors: false,
    graphiql: false,
    batching: false,
    logging: false,
    maskedErrors: { maskError: maskUnexpected },
    context: async ({ request, requestId, log, credential }): Promise<Context> => ({
      prisma,
      config,
      requestId,
      log,
      caller: credential ? callerOf(credential) : await resolveCredential(prisma, request.headers, config.OAUTH_AUDIENCE),
      schemas,
    }),
    plugins: [
      // Abuse limits for documents written by clients. Introspection stays open: frontends discover the schema.
      EnvelopArmorPlugin({
        maxDepth: { n: 12, ignoreIntrospection: true },
        maxAliases: { n: 15 },
        maxTokens: { n: 2_000 },
        maxDirectives: { n: 20 },
        costLimit: { maxCost: 5_000, ignoreIntrospection: true },
        blockFieldSuggestion: { enabled: true },
      }),
      refuseUnstorableText(),
      logUnexpectedErrors(),
    ],
  });
}
