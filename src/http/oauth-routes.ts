import express, { Router, type ErrorRequestHandler, type Request, type Response } from 'express';
import type { Config } from '../kernel/config.ts';
import type { PrismaClient } from '../db/prisma.ts';
import { DomainError } from '../kernel/errors.ts';
import { OAUTH_SCOPES } from '../kernel/authority.ts';
import type { Caller } from '../kernel/caller.ts';
import { resolveCredential } from '../identity/credentials.ts';
import { requireCsrfProof } from '../identity/csrf.ts';
import {
  approve,
  checkAuthorization,
  deny,
  RedirectedError,
  revokeEndpoint,
  tokenEndpoint,
  type AuthorizeParams,
  type TokenParams,
} from '../identity/oauth/grants.ts';
import { OAuthError } from '../identity/oauth/protocol.ts';
import { CSRF_HEADER } from '../identity/session-tokens.ts';
import { sendDomainError } from './error-response.ts';
import { credentialHeaders } from './middleware/caller.ts';

/**
 * `/oauth/authorize`, `/oauth/token`, `/oauth/revoke`: thin HTTP handlers around src/identity/oauth, which holds
 * every decision. They speak the RFCs' formats (form bodies, `{error, error_description}`, redirects), not /v1's.
 */
function stringsOf(source: unknown): Record<string, string> {
  const result: Record<string, string> = {};
  if (source && typeof source === 'object') {
    for (const [name, value] of Object.entries(source)) if (typeof value === 'string') result[name] = value;
  }
  return result;
}

/** RFC 6749 §2.3.1: `Authorization: Basic base64(urlencode(id):urlencode(secret))`. */
function basicCredentials(req: Request): { clientId: string; clientSecret: string } | null {
  const match = /^Basic ([A-Za-z0-9+/=]+)$/.exec(req.get('authorization') ?? '');
  if (!match) return null;
  const [id, secret] = Buffer.from(match[1]!, 'base64').toString('utf8').split(':');
  if (id === undefined || secret === undefined) throw new OAuthError('invalid_client', 'Malformed Basic credentials.');
  try {
    return { clientId: decodeURIComponent(id), clientSecret: decodeURIComponent(secret) };
  } catch {
    throw new OAuthError('invalid_client', 'Malformed Basic credentials.');
  }
}

function sendOAuthError(res: Response, error: OAuthError): void {
  if (error.status === 401) res.setHeader('WWW-Authenticate', 'Basic realm="workspace-data-service"');
  res.status(error.status).set('Cache-Control', 'no-store').json(error.body);
}

/** The signed-in browser user who consents; API keys and OAuth tokens cannot grant further tokens. */
async function consentingUser(
  prisma: PrismaClient,
  config: Config,
  req: Request,
): Promise<Caller & { userId: string }> {
  const caller = await resolveCredential(prisma, new Headers(credentialHeaders(req)), config.OAUTH_AUDIENCE);
  if (!caller?.userId || caller.credential.type !== 'session')
    throw new DomainError('UNAUTHENTICATED', 'Sign in (POST /v1/auth/login) to authorize an application.');
  return caller as Caller & { userId: string };
}

async function handle(req: Request, res: Response, run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (error) {
    if (error instanceof RedirectedError) res.redirect(303, error.location);
    else if (error instanceof OAuthError) sendOAuthError(res, error);
    else if (error instanceof DomainError) sendDomainError(req, res, error);
    else throw error;
  }
}

/**
 * RFC 8414 Authorization Server Metadata: what a client library needs to run the flow without reading our docs.
 * Only what the endpoints below really do: the code flow with PKCE S256 (required), refresh with rotation,
 * confidential clients authenticating with their secret (Basic or in the form), revocation.
 */
export function authorizationServerMetadata(issuer: string): Record<string, unknown> {
  // Public clients (no secret) authenticate by PKCE alone and send only their client_id (RFC 7636, RFC 8252).
  const clientAuth = ['client_secret_basic', 'client_secret_post', 'none'];
  return {
    issuer,
    authorization_endpoint: `${issuer}/oauth/authorize`,
    token_endpoint: `${issuer}/oauth/token`,
    revocation_endpoint: `${issuer}/oauth/revoke`,
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
    scopes_supported: [...OAUTH_SCOPES],
    token_endpoint_auth_methods_supported: clientAuth,
    revocation_endpoint_auth_methods_supported: clientAuth,
    service_documentation: `${issuer}/docs`,
  };
}

export function oauthRoutes(prisma: PrismaClient, config: Config): Router {
  const router = Router({ strict: true });

  router.get('/.well-known/oauth-authorization-server', (req, res) => {
    const issuer = config.PUBLIC_URL ?? `${req.protocol}://${req.get('host')}`;
    // Read from Host only when PUBLIC_URL is unset: then no shared cache may keep one Host's answer for another.
    res
      .set('Cache-Control', config.PUBLIC_URL ? 'public, max-age=3600' : 'no-store')
      .json(authorizationServerMetadata(issuer));
  });
  const form = express.urlencoded({ extended: false, limit: 16_384 });
  const json = express.json({ limit: 16_384 });

  // Describes the request for the consent screen (the frontend's); errors the client must see are redirected.
  router.get('/oauth/authorize', (req, res) =>
    handle(req, res, async () => {
      const request = await checkAuthorization(prisma, config, stringsOf(req.query) as AuthorizeParams);
      await consentingUser(prisma, config, req);
      res.set('Cache-Control', 'no-store').json({
        client: { id: request.client.id, name: request.client.name },
        redirectUri: request.redirectUri,
        scopes: request.scopes,
        state: request.state ?? null,
      });
    }),
  );

  // The user's decision: the same parameters plus `decision=approve|deny`; CSRF token in the header or the form.
  router.post('/oauth/authorize', form, json, (req, res) =>
    handle(req, res, async () => {
      const body = stringsOf(req.body);
      const request = await checkAuthorization(prisma, config, body as AuthorizeParams);
      const csrf = req.get(CSRF_HEADER) ?? body.csrf_token;
      if (csrf !== undefined) req.headers[CSRF_HEADER] = csrf;
      const user = await consentingUser(prisma, config, req);
      requireCsrfProof(user, 'Consent needs the session’s CSRF token (X-CSRF-Token or csrf_token).');
      const location =
        body.decision === 'approve' ? await approve(prisma, config, request, user.userId) : deny(request);
      res.redirect(303, location);
    }),
  );

  router.post('/oauth/token', form, (req, res) =>
    handle(req, res, async () => {
      if (!req.is('application/x-www-form-urlencoded'))
        throw new OAuthError('invalid_request', 'The token request must be application/x-www-form-urlencoded.');
      const tokens = await tokenEndpoint(prisma, config, stringsOf(req.body) as TokenParams, basicCredentials(req));
      res.set({ 'Cache-Control': 'no-store', Pragma: 'no-cache' }).json(tokens);
    }),
  );

  router.post('/oauth/revoke', form, (req, res) =>
    handle(req, res, async () => {
      await revokeEndpoint(prisma, stringsOf(req.body), basicCredentials(req));
      res.set('Cache-Control', 'no-store').status(200).end();
    }),
  );

  // A body the parsers cannot read (bad JSON or encoding, unknown charset) is RFC 6749 §5.2 `invalid_request`, in
  // the protocol's own error shape: OAuth clients read `error` as a string. Too large stays the app's 413.
  router.use(((error, _req, res, next) => {
    const status = (error as { status?: unknown }).status;
    if (typeof status !== 'number' || status === 413 || status < 400 || status >= 500) return next(error);
    sendOAuthError(res, new OAuthError('invalid_request', 'The request body could not be read.'));
  }) as ErrorRequestHandler);

  return router;
}
