import type { Request, RequestHandler, Response } from 'express';
import type { Config } from '../../kernel/config.ts';
import type { PrismaClient } from '../../db/prisma.ts';
import { databaseUnavailableError, isDatabaseUnavailable } from '../../db/availability.ts';
import { isStatementTimeout, queryTimeoutError } from '../../db/statement-budget.ts';
import { DomainError } from '../../kernel/errors.ts';
import { resolveCredential } from '../../identity/credentials.ts';
import type { ResolvedCredential } from '../../graph/server/context.ts';
import { sendDomainError } from '../error-response.ts';

/** The headers a caller is resolved from: a bearer credential, or a session cookie and its CSRF token. */
export function credentialHeaders(req: Request): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of ['authorization', 'cookie', 'x-csrf-token'] as const) {
    const value = req.headers[name];
    if (typeof value === 'string') headers[name] = value;
  }
  return headers;
}

/** What limits count a request against: its resolved credential, else its client address (DESIGN §5). */
export interface LimitKeys {
  credential: string;
  /** The org the request acts in, when the caller holds authority there. */
  org: string | null;
}

const ORG_PATH = /^\/v1\/orgs\/([0-9A-Z]{26})(?:[/?]|$)/;

function limitKeysOf(req: Request, credential: ResolvedCredential): LimitKeys {
  const caller = 'caller' in credential ? credential.caller : null;
  if (!caller) return { credential: `ip:${req.socket.remoteAddress ?? 'unknown'}`, org: null };
  const named = ORG_PATH.exec(req.originalUrl)?.[1];
  // Only an org the caller belongs to: naming another org must not spend that org's slots.
  const orgId = named && caller.orgs.has(named) ? named : caller.orgs.size === 1 ? [...caller.orgs.keys()][0]! : null;
  return { credential: `${caller.credential.type}:${caller.credential.id}`, org: orgId ? `org:${orgId}` : null };
}

export async function resolveRequestCaller(
  prisma: PrismaClient,
  config: Config,
  req: Request,
): Promise<ResolvedCredential> {
  try {
    return { caller: await resolveCredential(prisma, new Headers(credentialHeaders(req)), config.OAUTH_AUDIENCE) };
  } catch (error) {
    if (error instanceof DomainError) return { rejected: error };
    if (isStatementTimeout(error)) throw queryTimeoutError();
    if (isDatabaseUnavailable(error)) throw databaseUnavailableError();
    throw error;
  }
}

export function resolvedCredentialOf(res: Response): ResolvedCredential | undefined {
  return res.locals.credential as ResolvedCredential | undefined;
}

export function limitKeysOfResponse(res: Response): LimitKeys {
  return res.locals.limitKeys as LimitKeys;
}

/**
 * Resolves the request's credential once, before the limits: they are keyed on the credential's id (or the client
 * address when it is missing or invalid), never on header text, and the GraphQL context reuses the caller instead
 * of a second lookup. A rejected credential is not answered here: the operation refuses it (401) as before.
 */
export function resolveCaller(prisma: PrismaClient, config: Config): RequestHandler {
  return async (req, res, next) => {
    try {
      const credential = await resolveRequestCaller(prisma, config, req);
      res.locals.credential = credential;
      res.locals.limitKeys = limitKeysOf(req, credential);
      next();
    } catch (error) {
      if (error instanceof DomainError) return sendDomainError(req, res, error);
      next(error);
    }
  };
}
