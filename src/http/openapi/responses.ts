import { HTTP_STATUS_BY_CODE } from '../../kernel/errors.ts';
import type { Route } from '../rest/route.ts';
import type { FieldAuthority } from './security.ts';
import type { JsonSchema } from './json-schema.ts';

const header = (name: string) => ({ $ref: `#/components/headers/${name}` });

/** Response headers shared by the error responses (spec §7, RFC 6750, RFC 9110 §10.2.3). */
export const HEADERS: Record<string, JsonSchema> = {
  'X-Request-Id': {
    description: 'The request’s id, also in `error.requestId`.',
    required: true,
    schema: { type: 'string' },
  },
  'WWW-Authenticate': {
    description:
      'RFC 6750 bearer challenge: `error="invalid_token"` when a credential was presented, `error="insufficient_scope"` with the `scope` needed on 403 INSUFFICIENT_SCOPE.',
    schema: { type: 'string' },
  },
  'Retry-After': {
    description: 'Whole seconds to wait before retrying.',
    schema: { type: 'string', pattern: '^[0-9]+$' },
  },
};

interface ErrorResponse {
  name: string;
  meaning: string;
  headers?: { name: string; required: boolean }[];
}

/** The error statuses of spec §7 (plus 405/415/410/431 of the code table), each a reusable response with the envelope. */
const ERROR_RESPONSES: Record<number, ErrorResponse> = {
  400: { name: 'BadRequest', meaning: 'Malformed request: JSON, path ID, Idempotency-Key or cursor.' },
  401: {
    name: 'Unauthenticated',
    meaning: 'Missing, expired, revoked or wrong-audience credential.',
    headers: [{ name: 'WWW-Authenticate', required: true }],
  },
  403: {
    name: 'Forbidden',
    meaning: 'Insufficient current authority, identity or OAuth scope.',
    headers: [{ name: 'WWW-Authenticate', required: false }],
  },
  404: { name: 'NotFound', meaning: 'Unknown or undisclosed target.' },
  408: { name: 'RequestTimeout', meaning: 'The JSON request body did not finish within its read deadline.' },
  409: {
    name: 'Conflict',
    meaning: 'Revision, schema, uniqueness, state or idempotency conflict; an in-flight duplicate carries Retry-After.',
    headers: [{ name: 'Retry-After', required: false }],
  },
  410: { name: 'Gone', meaning: 'The artifact has expired.' },
  413: { name: 'PayloadTooLarge', meaning: 'Payload or output budget exceeded.' },
  415: { name: 'UnsupportedMediaType', meaning: 'The request body is not UTF-8 JSON.' },
  422: { name: 'ValidationFailed', meaning: 'Typed validation failure; `details.problems` points at each one.' },
  431: {
    name: 'HeadersTooLarge',
    meaning: 'The request line and headers exceed 16 KiB (send large filters to POST …/rows/query).',
  },
  429: {
    name: 'RateLimited',
    meaning: 'Rate, concurrency or admission limit.',
    headers: [{ name: 'Retry-After', required: true }],
  },
  500: { name: 'InternalError', meaning: 'Internal failure; details redacted.' },
  502: { name: 'BadGateway', meaning: 'The delivery hook did not accept a one-time token; nothing was created.' },
  503: {
    name: 'ServiceUnavailable',
    meaning: 'A required service is unavailable or the query ran out of time.',
    headers: [{ name: 'Retry-After', required: false }],
  },
};

function codesOf(status: number): string[] {
  return Object.entries(HTTP_STATUS_BY_CODE)
    .filter(([, value]) => value === status)
    .map(([code]) => code);
}

export function errorResponseComponents(): Record<string, JsonSchema> {
  return Object.fromEntries(
    Object.entries(ERROR_RESPONSES).map(([status, response]) => [
      response.name,
      {
        description: `${response.meaning} Codes: ${codesOf(Number(status)).join(', ')}.`,
        headers: Object.fromEntries([
          ['X-Request-Id', header('X-Request-Id')],
          ...(response.headers ?? []).map(({ name, required }) => [
            name,
            required ? { ...HEADERS[name], required } : header(name),
          ]),
        ]),
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      },
    ]),
  );
}

/**
 * The error statuses one route can answer with, from what it reads: every route can meet a bad credential (401),
 * the output budget (413, RESPONSE_LIMIT_BYTES), a limit (429), an oversized request line (431), a failure (500) or
 * a query time budget (503); the rest follow
 * from its parameters, body, Idempotency-Key, delivery hook and the authority its GraphQL field demands.
 */
export function errorStatusesOf(route: Route, authority: FieldAuthority): number[] {
  const hasPathIds = route.params !== undefined && Object.keys(route.params.shape).length > 0;
  const statuses = new Set([401, 413, 429, 431, 500, 503]);
  // A query that breaks its schema is a 422 (src/http/rest/router.ts); only a malformed cursor makes it a 400.
  const hasCursor = route.query !== undefined && Object.hasOwn(route.query.shape, 'cursor');
  if (hasPathIds || hasCursor || route.body || route.idempotent) statuses.add(400);
  if (authority.mayForbid) statuses.add(403);
  if (hasPathIds || authority.anonymous) statuses.add(404);
  if (route.body) [408, 415].forEach((status) => statuses.add(status));
  if (route.idempotent || route.file) statuses.add(409);
  if (route.file) statuses.add(410);
  if (route.query || route.body) statuses.add(422);
  if (route.delivers) statuses.add(502);
  for (const status of route.errorStatuses ?? []) statuses.add(status);
  return [...statuses].sort((a, b) => a - b);
}

export function errorResponsesOf(route: Route, authority: FieldAuthority): Record<string, JsonSchema> {
  return errorResponses(errorStatusesOf(route, authority));
}

/** References to the shared envelope responses of these statuses. */
export function errorResponses(statuses: readonly number[]): Record<string, JsonSchema> {
  return Object.fromEntries(
    statuses.map((status) => [String(status), { $ref: `#/components/responses/${ERROR_RESPONSES[status]!.name}` }]),
  );
}
