import type { Request, Response } from 'express';
import { bearerChallenge, type DomainError, httpStatusOf, type ErrorCode } from '../kernel/errors.ts';

export interface ErrorBody {
  code: ErrorCode;
  message: string;
  details?: unknown;
  retryAfter?: number;
  /** Overrides the code's status (DomainError.status). */
  status?: number;
}

/**
 * Writes the spec §7 envelope `{error:{code,message,requestId,details?}}` — or, on /graphql, the same code in
 * a GraphQL-shaped body — with the status from the one code→status table and the headers the status needs.
 */
/** RFC 6750 §3.1: a token without the scope an operation needs names that scope. */
function insufficientScopeChallenge(details: unknown): string {
  const scope = (details as { requiredScope?: unknown } | undefined)?.requiredScope;
  const named = typeof scope === 'string' && /^[a-z:-]+$/.test(scope) ? `, scope="${scope}"` : '';
  return `Bearer realm="workspace-data-service", error="insufficient_scope"${named}`;
}

export function sendError(req: Request, res: Response, error: ErrorBody): void {
  if (res.headersSent) return;
  const status = error.status ?? httpStatusOf(error.code);
  const requestId = String(res.locals.requestId ?? '');
  if (status === 401) res.setHeader('WWW-Authenticate', bearerChallenge(Boolean(req.headers.authorization)));
  if (error.code === 'INSUFFICIENT_SCOPE') res.setHeader('WWW-Authenticate', insufficientScopeChallenge(error.details));
  if (error.retryAfter !== undefined) res.setHeader('Retry-After', String(Math.max(1, Math.ceil(error.retryAfter))));
  const details = error.details === undefined ? {} : { details: error.details };
  const body = req.path.startsWith('/graphql')
    ? { errors: [{ message: error.message, extensions: { code: error.code, requestId, ...details } }] }
    : { error: { code: error.code, message: error.message, requestId, ...details } };
  res.status(status).json(body);
}

export function sendDomainError(req: Request, res: Response, error: DomainError): void {
  sendError(req, res, {
    code: error.code,
    message: error.message,
    details: error.details,
    ...(error.retryAfter === undefined ? {} : { retryAfter: error.retryAfter }),
    ...(error.status === httpStatusOf(error.code) ? {} : { status: error.status }),
  });
}
