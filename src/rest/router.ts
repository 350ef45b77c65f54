import { Router, type Request, type RequestHandler, type Response } from 'express';
import type { z } from 'zod';
import type { GraphQLSchema } from 'graphql';
import type { Config } from '../config.ts';
import { DomainError } from '../errors.ts';
import { credentialRequired } from '../graph/auth/guards.ts';
import { schema as graphSchema } from '../graph/index.ts';
import { validKey } from '../graph/idempotency.ts';
import { problemsFromIssues } from '../graph/validation.ts';
import type { GraphServer } from '../graph/yoga.ts';
import { sendDomainError, sendError } from './errors.ts';
import { credentialHeaders, resolvedCredentialOf } from './middleware/caller.ts';
import { jsonBody } from './middleware/json-body.ts';
import { runOperation } from './execute.ts';
import { authorityOf } from './openapi/security.ts';
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

function parsePart(req: Request, res: Response, schema: z.ZodType | undefined, value: unknown, part: 'path' | 'query' | 'body'): Parsed {
  if (!schema) return { ok: true, value: {} };
  const result = schema.safeParse(value);
  if (result.success) return { ok: true, value: result.data as Record<string, unknown> };
  const problems = problemsFromIssues(result.error.issues).map((problem) => ({ ...problem, path: [part, ...problem.path] }));
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

function handlerFor(route: Route, yoga: GraphServer): RequestHandler {
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
    const result = await runOperation(yoga, { requestId, log, ...(credential ? { credential } : {}) }, headers, route.operation, variables);
    if (!result.ok) {
      sendError(req, res, result.error);
      return;
    }
    // Every REST operation selects exactly one root field, and its value is the response body.
    const [payload] = Object.values(result.data as Record<string, unknown>);
    if (route.secret) res.set('Cache-Control', 'no-store');
    if (route.file) sendFile(res, route.successStatus, payload as FilePayload);
    else res.status(route.successStatus).json(payload);
  };
}

interface FilePayload { name: string; contentType: string; sha256: string; content: string }

function sendFile(res: Response, status: number, file: FilePayload): void {
  res.status(status)
    .type(file.contentType)
    .set('Content-Disposition', `attachment; filename="${file.name.replace(/[^\w.-]/g, '_')}"`)
    .set('Content-Digest', `sha-256=:${Buffer.from(file.sha256, 'hex').toString('base64')}:`)
    .send(file.content);
}

function methodNotAllowed(allowed: string[]): RequestHandler {
  return (req, res) => {
    res.setHeader('Allow', allowed.join(', '));
    sendError(req, res, { code: 'METHOD_NOT_ALLOWED', message: `Use ${allowed.join(', ')} on this path.` });
  };
}

/** Mounts every declared route, plus 405 with `Allow` for the other methods on a known path. */
export function restRouter(routes: readonly Route[], yoga: GraphServer, config: Config, schema: GraphQLSchema = graphSchema): Router {
  const router = Router({ strict: true });
  const methodsByPath = new Map<string, string[]>();
  for (const route of routes) {
    const path = expressPath(route.path);
    const limit = route.bodyLimit ?? config.BODY_LIMIT_BYTES;
    const parseBody = jsonBody(limit);
    const headerRules: RequestHandler[] = [requireCredential(authorityOf(route, schema).anonymous), ...(route.idempotent ? [requireIdempotencyKey] : [])];
    const chain: RequestHandler[] = route.body ? [...headerRules, requireJson, ...parseBody] : headerRules;
    router[route.method.toLowerCase() as 'get'](path, ...chain, handlerFor(route, yoga));
    methodsByPath.set(path, [...(methodsByPath.get(path) ?? []), route.method]);
  }
  for (const [path, methods] of methodsByPath) router.all(path, methodNotAllowed(methods));
  return router;
}

