import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { z } from 'zod';
import { Id } from '../../kernel/formats.ts';

export type HttpMethod = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';

/**
 * One /v1 route as data (SOFA style): how to read the request and which GraphQL operation answers it.
 * Variables are taken from path params, then query, then `input: body`, plus `idempotencyKey` from the
 * header; the response body is the operation's single root field. No business rule lives here.
 */
export interface Route<Data = any, Variables = any> {
  method: HttpMethod;
  /** OpenAPI-style path, e.g. `/v1/orgs/{orgId}`. Every `{...Id}` / `{id}` parameter must be a ULID. */
  path: string;
  summary: string;
  tags: string[];
  operation: TypedDocumentNode<Data, Variables>;
  params?: z.ZodObject;
  query?: z.ZodObject;
  body?: z.ZodType;
  /**
   * The body's members are the operation's variables instead of its `input`: for reads whose arguments may not
   * fit in a URL (POST …/rows/query carries GET …/rows's query parameters as JSON).
   */
  bodyVariables?: boolean;
  /** Mutations require the Idempotency-Key header (spec 4.1). */
  idempotent: boolean;
  successStatus: number;
  /** The success body: documents the route in OpenAPI and lets tests check real responses against it. */
  response: z.ZodType;
  /** Largest accepted JSON body in bytes, when a route needs more than BODY_LIMIT_BYTES. */
  bodyLimit?: number;
  /**
   * The operation answers an artifact's metadata `{jobId, name, contentType, size, sha256, chunks}`; its bytes are
   * then streamed from storage as the body (src/http/rest/download.ts), with its content type, Content-Length and an
   * RFC 9530 Content-Digest, instead of JSON.
   */
  file?: boolean;
  /**
   * The operation is a subscription: the answer is `text/event-stream`, one `data:` frame (the root field's value,
   * as `response` describes it) per event, closed when the subscription ends.
   */
  stream?: boolean;
  /**
   * A JSON route that also streams: a request whose `Accept` names `text/event-stream` runs this subscription instead
   * (variables as for the route, `after` from `Last-Event-ID` when sent), one frame per event with `id:` set to the
   * event's `eventId` member, so a reconnecting EventSource resumes where it stopped.
   */
  eventStream?: { operation: TypedDocumentNode<any, any>; response: z.ZodType; eventId: string };
  /** The answer carries a secret shown once (a key, an invitation token, a TOTP secret): `Cache-Control: no-store`. */
  secret?: boolean;
  /**
   * Error statuses the operation's own rules can answer that the declaration's shape does not reveal (a body that
   * names an org, an expired upload): listed in the OpenAPI document with the ones derived from the shape.
   */
  errorStatuses?: number[];
  /** The operation sends a one-time token through the delivery hook (502 DEPENDENCY_UNAVAILABLE when it fails). */
  delivers?: boolean;
}

/** The members a declaration may leave out; `defineRoute` fills them in. */
type Defaulted = 'params' | 'query' | 'idempotent' | 'successStatus';

/** A route as declared: path, method, operation, response and docs; the rest follows from them unless stated. */
export type RouteDeclaration<Data = any, Variables = any> = Omit<Route<Data, Variables>, Defaulted> &
  Partial<Pick<Route<Data, Variables>, Defaulted>>;

const NO_QUERY = z.strictObject({});

/** `{orgId}`, `{id}`, …: every path parameter named as an id is a ULID. */
function pathParamsOf(path: string): z.ZodObject | undefined {
  const names = [...path.matchAll(/\{(\w+)\}/g)].map((match) => match[1]!);
  if (names.length === 0) return undefined;
  const notIds = names.filter((name) => name !== 'id' && !name.endsWith('Id'));
  if (notIds.length > 0) throw new Error(`${path}: declare params for ${notIds.join(', ')} (only ids are derived)`);
  return z.strictObject(Object.fromEntries(names.map((name) => [name, Id])));
}

/**
 * Fills in what a declaration leaves out: params from the path (each `{…Id}` a ULID), no query parameters, an
 * Idempotency-Key for every method but GET, and 201 for POST, 200 otherwise. Stated members win, so a declaration
 * that spells everything out (the older form) means exactly what it says.
 */
export function defineRoute<Data, Variables>(route: RouteDeclaration<Data, Variables>): Route<Data, Variables> {
  return {
    ...route,
    params: 'params' in route ? route.params : pathParamsOf(route.path),
    query: route.query ?? NO_QUERY,
    idempotent: route.idempotent ?? route.method !== 'GET',
    successStatus: route.successStatus ?? (route.method === 'POST' ? 201 : 200),
  };
}

/** Express 5 path syntax for an OpenAPI-style path. */
export function expressPath(path: string): string {
  return path.replace(/\{(\w+)\}/g, ':$1');
}
