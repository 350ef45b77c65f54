import { Router, type Request, type RequestHandler, type Response } from 'express';
import type { z } from 'zod';
import type { GraphQLSchema } from 'graphql';
import type { Config } from '../../kernel/config.ts';
import type pg from 'pg';
import { DomainError } from '../../kernel/errors.ts';
import { answerPieces } from '../../kernel/raw-json.ts';
import { credentialRequired } from '../../kernel/errors.ts';
import { schema as graphSchema } from '../../graph/schema.ts';
import { validKey } from '../../idempotency/key.ts';
import { problemsFromIssues } from '../../kernel/validation.ts';
import type { ServerContext } from '../../graph/server/context.ts';
import type { GraphServer } from '../../graph/server/yoga.ts';
import { streamArtifact, type ArtifactPayload } from './download.ts';
import { sendDomainError, sendError } from '../error-response.ts';
import { credentialHeaders, resolvedCredentialOf } from '../middleware/caller.ts';
import { jsonBody } from '../middleware/json-body.ts';
import { sendEventStream } from './event-stream.ts';
import { runOperation, runSubscription } from './execute.ts';
import { authorityOf } from '../openapi/security.ts';
import { expressPath, type Route } from './route.ts';

type Parsed = { ok: true; value: Record<string, unknown> } | { ok: false };

function hasBody(req: Request): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

/** 415 for a body that is not JSON; body-parser would otherwise silently skip it and report a missing body. */
export const requireJson: RequestHandler = (req, res, next) => {
  if (hasBody(req) && !req.is('application/json')) {
    sendError(req, res, { code: 'UNSUPPORTED_MEDIA_TYPE', message: 'Request bodies must be application/json.' });
    return;
  }
  next();
};

/**
 * 401 before any input is read or validated (issue 18 §5): an unauthenticated caller must not learn a route's
 * validation rules, nor make us parse its body, and a body that also breaks a rule used to answer 422 instead.
 * Only what the credential middleware already resolved is read here: a refused credential (the GraphQL context
 * refuses it on every field), or none on a field whose authScopes need one (`anonymous` comes from those scopes,
 * the same reading the OpenAPI document's `security` uses). Authority and scopes stay in src/graph.
 */
function requireCredential(anonymous: boolean): RequestHandler {
  return (req, res, next) => {
    const credential = resolvedCredentialOf(res);
    if (credential && 'rejected' in credential) return sendDomainError(req, res, credential.rejected);
    if (credential && credential.caller === null && !anonymous) return sendDomainError(req, res, credentialRequired());
    next();
  };
}

function parsePart(
  req: Request,
  res: Response,
  schema: z.ZodType | undefined,
  value: unknown,
  part: 'path' | 'query' | 'body',
): Parsed {
  if (!schema) return { ok: true, value: {} };
  const result = schema.safeParse(value);
  if (result.success) return { ok: true, value: result.data as Record<string, unknown> };
  const problems = problemsFromIssues(result.error.issues).map((problem) => ({
    ...problem,
    path: [part, ...problem.path],
  }));
  // A malformed path ID is a malformed request (400); a query or body that breaks a rule is a 422.
  const code = part === 'path' ? 'BAD_REQUEST' : 'VALIDATION_FAILED';
  sendError(req, res, { code, message: `The request ${part} did not pass validation.`, details: { problems } });
  return { ok: false };
}

/**
 * Spec 4.1 / §8: a mutation without a valid Idempotency-Key (8..255 visible ASCII) is a malformed request, 400,
 * whatever its body: so it is checked before the body is read or validated, or a bad body would answer 422 first
 * and hide the header rule. The rule itself is src/graph's (`validKey`), which GraphQL clients meet as well.
 */
function requireIdempotencyKey(req: Request, res: Response, next: () => void): void {
  const key = req.get('Idempotency-Key');
  if (key === undefined || key === '') {
    sendError(req, res, {
      code: 'BAD_REQUEST',
      message: 'This operation requires an Idempotency-Key header.',
      details: { problems: [{ path: ['Idempotency-Key'], message: 'required' }] },
    });
    return;
  }
  try {
    validKey(key);
  } catch (error) {
    if (error instanceof DomainError) return sendDomainError(req, res, error);
    throw error;
  }
  next();
}

/** A subscription route: refusals before the first event are ordinary error answers; then server-sent events. */
async function streamRoute(
  req: Request,
  res: Response,
  yoga: GraphServer,
  serverContext: ServerContext,
  headers: Record<string, string>,
  route: Route,
  variables: Record<string, unknown>,
  config: Config,
): Promise<void> {
  const started = await runSubscription(yoga, serverContext, headers, route.operation, variables);
  if (!started.ok) return sendError(req, res, started.error);
  await sendEventStream(res, started.events, started.close, config.EVENT_STREAM_HEARTBEAT_MS);
}

/** A JSON route's stream (Route.eventStream), chosen by `Accept`; `Last-Event-ID` overrides the `after` query. */
function wantsEventStream(req: Request, route: Route): boolean {
  return route.eventStream !== undefined && (req.get('Accept') ?? '').toLowerCase().includes('text/event-stream');
}

async function negotiatedStream(
  req: Request,
  res: Response,
  yoga: GraphServer,
  serverContext: ServerContext,
  headers: Record<string, string>,
  route: Route,
  variables: Record<string, unknown>,
  config: Config,
): Promise<void> {
  const stream = route.eventStream!;
  const lastEventId = req.get('Last-Event-ID');
  const resumed = lastEventId ? { ...variables, after: lastEventId } : variables;
  const started = await runSubscription(yoga, serverContext, headers, stream.operation, resumed);
  if (!started.ok) return sendError(req, res, started.error);
  await sendEventStream(res, started.events, started.close, config.EVENT_STREAM_HEARTBEAT_MS, stream.eventId);
}

function handlerFor(route: Route, yoga: GraphServer, config: Config, files: pg.Pool): RequestHandler {
  return async (req, res) => {
    const params = parsePart(req, res, route.params, req.params, 'path');
    if (!params.ok) return;
    const query = parsePart(req, res, route.query, req.query, 'query');
    if (!query.ok) return;
    const body = route.body ? parsePart(req, res, route.body, req.body, 'body') : undefined;
    if (body && !body.ok) return;
    const idempotencyKey = route.idempotent ? req.get('Idempotency-Key') : undefined; // checked by requireIdempotencyKey

    const variables = {
      ...params.value,
      ...query.value,
      ...(body ? (route.bodyVariables ? body.value : { input: body.value }) : {}),
      ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
    };
    const headers = credentialHeaders(req);
    const { requestId, log } = res.locals;
    const credential = resolvedCredentialOf(res);
    const serverContext = { requestId, log, ...(credential ? { credential } : {}) };
    if (route.stream) return streamRoute(req, res, yoga, serverContext, headers, route, variables, config);
    if (wantsEventStream(req, route))
      return negotiatedStream(req, res, yoga, serverContext, headers, route, variables, config);
    const result = await runOperation(yoga, serverContext, headers, route.operation, variables);
    if (!result.ok) {
      sendError(req, res, result.error);
      return;
    }
    // Every REST operation selects exactly one root field, and its value is the response body.
    const [payload] = Object.values(result.data as Record<string, unknown>);
    if (route.secret) res.set('Cache-Control', 'no-store');
    const statusUrl = route.successStatus === 202 ? (payload as { statusUrl?: unknown } | null)?.statusUrl : undefined;
    // RFC 9110 §15.3.3: an accepted job's monitor; generic HTTP clients follow Location, not a body field.
    if (typeof statusUrl === 'string') res.location(statusUrl);
    if (route.file) await streamArtifact(req, res, files, payload as ArtifactPayload);
    else sendAnswer(req, res, route.successStatus, payload);
  };
}

/**
 * As res.json would, but PostgreSQL-built JSON in the payload (RawJson) is written as it is, not re-encoded, and a
 * large answer goes out in pieces (`answerPieces`: one 360 KB string and its Buffer cost more in page faults than
 * the whole serialisation), with its Content-Length as res.send would set it.
 */
function sendAnswer(req: Request, res: Response, status: number, payload: unknown): void {
  const pieces = answerPieces(payload);
  res.status(status).type('application/json');
  if (pieces.length <= 1) {
    res.send(pieces[0] ?? '');
    return;
  }
  res.setHeader(
    'Content-Length',
    pieces.reduce((bytes, piece) => bytes + Buffer.byteLength(piece), 0),
  );
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  for (const piece of pieces) res.write(piece);
  res.end();
}

function methodNotAllowed(allowed: string[]): RequestHandler {
  return (req, res, next) => {
    if (allowed.includes(req.method) || (req.method === 'HEAD' && allowed.includes('GET'))) {
      next();
      return;
    }
    res.setHeader('Allow', allowed.join(', '));
    sendError(req, res, { code: 'METHOD_NOT_ALLOWED', message: `Use ${allowed.join(', ')} on this path.` });
  };
}

/**
 * Mounts every declared route, plus 405 with `Allow` for the other methods on a known path. A path that ends in a
 * literal segment (`…/rows/query`, `…/rows/batch`) reserves it: its 405 is mounted before the routes, so
 * `GET …/rows/query` answers 405 instead of reaching `GET …/rows/{rowId}` with `query` as a row id. `files` reads
 * artifact pieces for the download route (src/http/rest/download.ts).
 */
export function restRouter(
  routes: readonly Route[],
  yoga: GraphServer,
  config: Config,
  files: pg.Pool,
  schema: GraphQLSchema = graphSchema,
): Router {
  const router = Router({ strict: true });
  const methodsByPath = new Map<string, string[]>();
  for (const route of routes) {
    const path = expressPath(route.path);
    methodsByPath.set(path, [...(methodsByPath.get(path) ?? []), route.method]);
  }
  const endsLiteral = (path: string) => !path.split('/').at(-1)!.startsWith(':');
  for (const [path, methods] of methodsByPath) if (endsLiteral(path)) router.all(path, methodNotAllowed(methods));
  for (const route of routes) {
    const path = expressPath(route.path);
    const limit = route.bodyLimit ?? config.BODY_LIMIT_BYTES;
    const parseBody = jsonBody(limit);
    const headerRules: RequestHandler[] = [
      requireCredential(authorityOf(route, schema).anonymous),
      ...(route.idempotent ? [requireIdempotencyKey] : []),
    ];
    const chain: RequestHandler[] = route.body ? [...headerRules, requireJson, ...parseBody] : headerRules;
    router[route.method.toLowerCase() as 'get'](path, ...chain, handlerFor(route, yoga, config, files));
  }
  for (const [path, methods] of methodsByPath) if (!endsLiteral(path)) router.all(path, methodNotAllowed(methods));
  return router;
}
