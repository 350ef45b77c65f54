import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import type { ServerContext } from '../../graph/server/context.ts';
import type { GraphServer } from '../../graph/server/yoga.ts';
import { isErrorCode, type ErrorCode } from '../../kernel/errors.ts';
import type { ErrorBody } from '../error-response.ts';

export type OperationResult<Data> = { ok: true; data: Data } | { ok: false; error: ErrorBody };

interface GraphQLErrorLike {
  message: string;
  extensions?: Readonly<Record<string, unknown>>;
}

function errorFrom(errors: readonly GraphQLErrorLike[] | undefined): ErrorBody {
  const first = errors?.[0];
  const code = first?.extensions?.code;
  // A GraphQL error without one of our codes means the REST document and the schema disagree: our bug.
  if (!first || !isErrorCode(code)) return { code: 'INTERNAL_ERROR', message: 'Internal error.' };
  const { details, retryAfter, http } = first.extensions ?? {};
  // DomainError puts a status that overrides its code's (and only such a status) in Yoga's `http` extension.
  const status = (http as { status?: unknown } | undefined)?.status;
  return {
    code: code as ErrorCode,
    message: first.message,
    ...(details === undefined ? {} : { details }),
    ...(typeof retryAfter === 'number' ? { retryAfter } : {}),
    ...(typeof status === 'number' && code !== 'UNAUTHENTICATED' ? { status } : {}),
  };
}

// Plugins may read `params.query` (e.g. for logs); our documents never change, so each is printed once.
const printed = new WeakMap<object, string>();

function textOf(document: object & Parameters<typeof print>[0]): string {
  let text = printed.get(document);
  if (text === undefined) {
    text = print(document);
    printed.set(document, text);
  }
  return text;
}

/**
 * Yoga's plugins for one in-process operation, and the context they build from this request's headers. Only the
 * context factory reads the request, and only its headers: a full fetch Request cost ~2% of a row write.
 */
async function envelopedFor<Data, Variables extends object>(
  yoga: GraphServer,
  serverContext: ServerContext,
  headers: Record<string, string>,
  document: TypedDocumentNode<Data, Variables>,
  variables: Variables,
) {
  const request = {
    method: 'POST',
    url: 'http://in-process/graphql',
    headers: new Headers(headers),
  } as unknown as Request;
  const enveloped = yoga.getEnveloped({
    request,
    params: { query: textOf(document), variables },
    ...serverContext,
  } as never);
  return { enveloped, contextValue: await enveloped.contextFactory() };
}

/**
 * Runs one typed GraphQL operation in-process through the same Yoga instance as /graphql, with this request's
 * id, logger and Authorization header. A rejected credential throws (the context factory refuses it).
 */
export async function runOperation<Data, Variables extends object>(
  yoga: GraphServer,
  serverContext: ServerContext,
  headers: Record<string, string>,
  document: TypedDocumentNode<Data, Variables>,
  variables: Variables,
): Promise<OperationResult<Data>> {
  // Yoga's envelop runs the same plugins (context factory, masking, error logging) as /graphql on the pre-parsed
  // typed document, without yoga.fetch's Request/Response objects and JSON round trip (that hop served 74-80 % of
  // direct /graphql req/s; this one 91-108 %, `npm run bench`). Parse and validate are skipped: the documents are
  // ours, checked against schema.graphql by codegen and by the schema staleness test.
  const { enveloped, contextValue } = await envelopedFor(yoga, serverContext, headers, document, variables);
  const result = (await enveloped.execute({
    schema: enveloped.schema,
    document,
    variableValues: variables as Record<string, unknown>,
    contextValue,
  })) as {
    data?: Data | null;
    errors?: readonly GraphQLErrorLike[];
  };
  if (result.errors?.length) return { ok: false, error: errorFrom(result.errors) };
  return { ok: true, data: result.data as Data };
}

export type SubscriptionResult<Data> =
  | { ok: true; events: AsyncGenerator<OperationResult<Data>, void, undefined>; close: () => Promise<void> }
  | { ok: false; error: ErrorBody };

/**
 * Starts one typed GraphQL subscription in-process, as runOperation runs a query: the same context, authority and
 * masking as a subscription over /graphql. A refusal before the first event (authority, 404) is an error answer;
 * each event afterwards is the operation's data or the error it met.
 */
export async function runSubscription<Data, Variables extends object>(
  yoga: GraphServer,
  serverContext: ServerContext,
  headers: Record<string, string>,
  document: TypedDocumentNode<Data, Variables>,
  variables: Variables,
): Promise<SubscriptionResult<Data>> {
  const { enveloped, contextValue } = await envelopedFor(yoga, serverContext, headers, document, variables);
  const result = await enveloped.subscribe({
    schema: enveloped.schema,
    document,
    variableValues: variables as Record<string, unknown>,
    contextValue,
  });
  if (!(Symbol.asyncIterator in result)) {
    const single = result as { errors?: readonly GraphQLErrorLike[] };
    return { ok: false, error: errorFrom(single.errors) };
  }
  const source = result as AsyncGenerator<{ data?: Data | null; errors?: readonly GraphQLErrorLike[] }>;
  async function* events(): AsyncGenerator<OperationResult<Data>, void, undefined> {
    for await (const event of source) {
      yield event.errors?.length
        ? { ok: false, error: errorFrom(event.errors) }
        : { ok: true, data: event.data as Data };
    }
  }
  return {
    ok: true,
    events: events(),
    close: async () => {
      await source.return?.(undefined);
    },
  };
}
