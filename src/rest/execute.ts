import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import { ClientError, GraphQLClient } from 'graphql-request';
import type { ServerContext } from '../graph/context.ts';
import type { GraphServer } from '../graph/yoga.ts';
import { isErrorCode, type ErrorCode } from '../errors.ts';
import type { ErrorBody } from './errors.ts';

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
  const { details, retryAfter } = first.extensions ?? {};
  return {
    code: code as ErrorCode,
    message: first.message,
    ...(details === undefined ? {} : { details }),
    ...(typeof retryAfter === 'number' ? { retryAfter } : {}),
  };
}

// graphql-request prints a DocumentNode on every call, and re-parses a string to find its operation name unless
// told not to; our documents never change, so each is printed once and sent as text.
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
 * Runs one typed GraphQL operation in-process: graphql-request builds the request and Yoga answers it through
 * `yoga.fetch`, with no network hop, passing this request's id and logger as the server context.
 */
export async function runOperation<Data, Variables extends object>(
  yoga: GraphServer,
  serverContext: ServerContext,
  headers: Record<string, string>,
  document: TypedDocumentNode<Data, Variables>,
  variables: Variables,
): Promise<OperationResult<Data>> {
  const client = new GraphQLClient('http://in-process/graphql', {
    headers,
    excludeOperationName: true,
    fetch: async (input, init) => yoga.fetch(String(input), init ?? {}, serverContext),
  });
  try {
    const data = await client.request<Data, object>({ document: textOf(document), variables });
    return { ok: true, data };
  } catch (error) {
    if (error instanceof ClientError) return { ok: false, error: errorFrom(error.response.errors) };
    throw error;
  }
}
