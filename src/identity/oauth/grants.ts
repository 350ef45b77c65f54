import type { Config } from '../../kernel/config.ts';
import { ID, type Statement } from '../../data/statement.ts';
import type { PrismaClient, TransactionClient } from '../../db/prisma.ts';
import { newId } from '../../kernel/ids.ts';
import type { OAuthScope } from '../../kernel/authority.ts';
import { sha256Hex } from '../secrets.ts';
import { authenticateClient, findClient, type OAuthClientRecord } from './clients.ts';
import { CHALLENGE, issueOpaque, looksLike, OAuthError, parseScope, pkceMatches, redirectWith } from './protocol.ts';

/** The parameters of an authorization request (RFC 6749 §4.1.1, RFC 7636 §4.3), as strings from query or form. */
export type AuthorizeParams = Partial<
  Record<
    | 'response_type'
    | 'client_id'
    | 'redirect_uri'
    | 'scope'
    | 'state'
    | 'code_challenge'
    | 'code_challenge_method'
    | 'resource',
    string
  >
>;

export interface AuthorizationRequest {
  client: OAuthClientRecord;
  redirectUri: string;
  scopes: OAuthScope[];
  state: string | undefined;
  codeChallenge: string;
}

/** Problems found before the redirect URI is trusted: answered to the user agent, never redirected (§4.1.2.1). */
export class UntrustedRedirect extends OAuthError {}

/** Problems found after it is trusted: sent back to the client at its redirect URI (§4.1.2.1). */
export class RedirectedError extends Error {
  constructor(readonly location: string) {
    super('redirected authorization error');
  }
}

export async function checkAuthorization(
  prisma: PrismaClient,
  config: Config,
  params: AuthorizeParams,
): Promise<AuthorizationRequest> {
  const client = await findClient(prisma, params.client_id);
  if (!client) throw new UntrustedRedirect('invalid_request', 'Unknown client_id.');
  // Exact string comparison (OAuth 2.0 Security BCP §4.1.3); with one registered URI it may be omitted.
  const redirectUri = params.redirect_uri ?? (client.redirectUris.length === 1 ? client.redirectUris[0]! : undefined);
  if (!redirectUri || !client.redirectUris.includes(redirectUri))
    throw new UntrustedRedirect('invalid_request', 'redirect_uri is not registered for this client.');
  const fail = (error: string, description: string) =>
    new RedirectedError(redirectWith(redirectUri, { error, error_description: description, state: params.state }));
  if (params.response_type !== 'code') throw fail('unsupported_response_type', 'Only response_type=code is supported.');
  if (params.code_challenge_method !== 'S256' || !params.code_challenge || !CHALLENGE.test(params.code_challenge)) {
    throw fail(
      'invalid_request',
      'PKCE is required: code_challenge (43 base64url characters) with code_challenge_method=S256.',
    );
  }
  if (params.resource !== undefined && params.resource !== config.OAUTH_AUDIENCE)
    throw fail('invalid_target', 'Tokens are issued for this service only.');
  const scopes = parseScope(params.scope);
  if (!scopes) throw fail('invalid_scope', 'scope must list one or more of the scopes this service defines.');
  return { client, redirectUri, scopes, state: params.state, codeChallenge: params.code_challenge };
}

/** The user approved: a one-time code valid for OAUTH_CODE_TTL_SECONDS, and where to send it. */
export async function approve(
  prisma: PrismaClient,
  config: Config,
  request: AuthorizationRequest,
  userId: string,
): Promise<string> {
  const code = issueOpaque('code');
  await prisma.oAuthCode.create({
    data: {
      id: newId(),
      codeHash: code.hash,
      clientId: request.client.id,
      userId,
      redirectUri: request.redirectUri,
      scopes: request.scopes,
      codeChallenge: request.codeChallenge,
      familyId: newId(),
      expiresAt: new Date(Date.now() + config.OAUTH_CODE_TTL_SECONDS * 1000),
    },
  });
  return redirectWith(request.redirectUri, { code: code.token, state: request.state });
}

export function deny(request: AuthorizationRequest): string {
  return redirectWith(request.redirectUri, {
    error: 'access_denied',
    error_description: 'The user declined.',
    state: request.state,
  });
}

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
  scope: string;
}

async function issueTokens(
  tx: TransactionClient,
  config: Config,
  grant: { familyId: string; clientId: string; userId: string; scopes: string[] },
): Promise<TokenResponse> {
  const access = issueOpaque('access');
  const refresh = issueOpaque('refresh');
  const now = Date.now();
  const common = {
    familyId: grant.familyId,
    clientId: grant.clientId,
    userId: grant.userId,
    scopes: grant.scopes,
    audience: config.OAUTH_AUDIENCE,
  };
  await tx.oAuthToken.createMany({
    data: [
      {
        id: newId(),
        kind: 'access',
        tokenHash: access.hash,
        ...common,
        expiresAt: new Date(now + config.OAUTH_ACCESS_TOKEN_TTL_SECONDS * 1000),
      },
      {
        id: newId(),
        kind: 'refresh',
        tokenHash: refresh.hash,
        ...common,
        expiresAt: new Date(now + config.OAUTH_REFRESH_TOKEN_TTL_DAYS * 86_400_000),
      },
    ],
  });
  return {
    access_token: access.token,
    token_type: 'Bearer',
    expires_in: config.OAUTH_ACCESS_TOKEN_TTL_SECONDS,
    refresh_token: refresh.token,
    scope: grant.scopes.join(' '),
  };
}

async function revokeFamily(db: PrismaClient | TransactionClient, familyId: string): Promise<void> {
  await db.oAuthToken.updateMany({ where: { familyId, revokedAt: null }, data: { revokedAt: new Date() } });
}

export type TokenParams = Partial<
  Record<
    | 'grant_type'
    | 'code'
    | 'redirect_uri'
    | 'client_id'
    | 'client_secret'
    | 'code_verifier'
    | 'refresh_token'
    | 'scope',
    string
  >
>;

/**
 * §4.1.3: code + redirect_uri + PKCE verifier → tokens. A code is spent by its first exchange, failed or not
 * (§4.1.2: it may be used once), in its own statement before any check: a wrong verifier cannot be followed by a
 * guess that succeeds. A code redeemed twice revokes what it issued.
 */
async function redeemCode(
  prisma: PrismaClient,
  config: Config,
  client: OAuthClientRecord,
  params: TokenParams,
): Promise<TokenResponse> {
  if (!params.code || !looksLike('code', params.code) || !params.code_verifier)
    throw new OAuthError('invalid_request', 'code and code_verifier are required.');
  const invalid = new OAuthError(
    'invalid_grant',
    'The authorization code is invalid, expired, already used, or was issued to another client or redirect_uri.',
  );
  const code = await prisma.oAuthCode.findUnique({ where: { codeHash: sha256Hex(params.code) } });
  if (!code || code.clientId !== client.id) throw invalid;
  const spent = await prisma.oAuthCode.updateMany({
    where: { id: code.id, usedAt: null },
    data: { usedAt: new Date() },
  });
  if (spent.count === 0) {
    await revokeFamily(prisma, code.familyId);
    throw invalid;
  }
  if (code.expiresAt.getTime() <= Date.now() || params.redirect_uri !== code.redirectUri) throw invalid;
  if (!pkceMatches(params.code_verifier, code.codeChallenge))
    throw new OAuthError('invalid_grant', 'code_verifier does not match the code_challenge.');
  return prisma.$transaction((tx) =>
    issueTokens(tx, config, { familyId: code.familyId, clientId: client.id, userId: code.userId, scopes: code.scopes }),
  );
}

/** §6 with rotation: the old refresh token is spent; presenting a spent one again revokes the whole grant. */
async function refreshTokens(
  prisma: PrismaClient,
  config: Config,
  client: OAuthClientRecord,
  params: TokenParams,
): Promise<TokenResponse> {
  if (!params.refresh_token || !looksLike('refresh', params.refresh_token))
    throw new OAuthError('invalid_request', 'refresh_token is required.');
  const invalid = new OAuthError('invalid_grant', 'The refresh token is invalid, expired, revoked or already used.');
  const tokenHash = sha256Hex(params.refresh_token);
  // Read and spend the token under its row lock: of two parallel refreshes the second waits, then sees it rotated
  // and revokes the family (before, `rotatedAt` was read outside the transaction and the loser only failed).
  const outcome = await prisma.$transaction(async (tx): Promise<TokenResponse | 'reused' | 'invalid' | 'narrowing'> => {
    const [locked] = await tx.$queryRaw<
      { id: string }[]
    >`SELECT id FROM oauth_tokens WHERE token_hash = ${tokenHash}::bpchar FOR UPDATE`;
    const token = locked ? await tx.oAuthToken.findUnique({ where: { id: locked.id } }) : null;
    if (token?.kind !== 'refresh' || token.clientId !== client.id) return 'invalid';
    if (token.rotatedAt) {
      await revokeFamily(tx, token.familyId);
      return 'reused';
    }
    if (token.revokedAt || token.expiresAt.getTime() <= Date.now()) return 'invalid';
    const narrowed = params.scope === undefined ? token.scopes : parseScope(params.scope);
    if (!narrowed || narrowed.some((scope) => !token.scopes.includes(scope))) return 'narrowing';
    await tx.oAuthToken.update({ where: { id: token.id }, data: { rotatedAt: new Date() } });
    return issueTokens(tx, config, {
      familyId: token.familyId,
      clientId: client.id,
      userId: token.userId,
      scopes: narrowed,
    });
  });
  if (outcome === 'narrowing') throw new OAuthError('invalid_scope', 'A refresh may only narrow the granted scopes.');
  if (typeof outcome === 'string') throw invalid;
  return outcome;
}

export async function tokenEndpoint(
  prisma: PrismaClient,
  config: Config,
  params: TokenParams,
  basic: { clientId: string; clientSecret: string } | null,
): Promise<TokenResponse> {
  if (
    basic &&
    (params.client_secret !== undefined || (params.client_id !== undefined && params.client_id !== basic.clientId))
  ) {
    throw new OAuthError('invalid_request', 'Use one client authentication method.');
  }
  const client = await authenticateClient(
    prisma,
    basic ?? { clientId: params.client_id, clientSecret: params.client_secret },
  );
  if (params.grant_type === 'authorization_code') return redeemCode(prisma, config, client, params);
  if (params.grant_type === 'refresh_token') return refreshTokens(prisma, config, client, params);
  throw new OAuthError('unsupported_grant_type', 'grant_type must be authorization_code or refresh_token.');
}

/** RFC 7009: revokes the grant the token belongs to; unknown tokens and other clients' tokens are ignored (200). */
export async function revokeEndpoint(
  prisma: PrismaClient,
  params: { token?: string | undefined; client_id?: string | undefined; client_secret?: string | undefined },
  basic: { clientId: string; clientSecret: string } | null,
): Promise<void> {
  const client = await authenticateClient(
    prisma,
    basic ?? { clientId: params.client_id, clientSecret: params.client_secret },
  );
  if (!params.token) throw new OAuthError('invalid_request', 'token is required.');
  const token = await prisma.oAuthToken.findUnique({
    where: { tokenHash: sha256Hex(params.token) },
    select: { familyId: true, clientId: true },
  });
  if (token && token.clientId === client.id) await revokeFamily(prisma, token.familyId);
}

/** When the user consented to an OAuth token's grant: the grant's authorization code was issued then. */
export function grantAuthenticatedAt(tokenId: string): Statement {
  return {
    sql: `SELECT c.created_at AS authenticated_at FROM oauth_tokens t JOIN oauth_codes c ON c.family_id = t.family_id WHERE t.id = $1::${ID}`,
    params: [tokenId],
  };
}

/**
 * The user's live grants, newest family first, from `before` on: a range scan of the (user_id, family_id) index,
 * not a pass over every user's tokens.
 */
export function selectGrantPage(userId: string, before: string, rows: number): Statement {
  return {
    sql: `SELECT t.family_id AS id, t.client_id, c.name AS client_name,
                 (SELECT n.scopes FROM oauth_tokens n WHERE n.family_id = t.family_id ORDER BY n.created_at DESC, n.id DESC LIMIT 1) AS scopes,
                 MIN(t.created_at) AS created_at, MAX(t.created_at) AS last_issued_at
            FROM oauth_tokens t JOIN oauth_clients c ON c.id = t.client_id
           WHERE t.user_id = $1::${ID} AND t.revoked_at IS NULL AND t.rotated_at IS NULL AND t.expires_at > now()
             AND c.revoked_at IS NULL AND t.family_id < $2::${ID}
           GROUP BY t.family_id, t.client_id, c.name
           ORDER BY t.family_id DESC
           LIMIT $3::int`,
    params: [userId, before, rows],
  };
}
