import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { registerClient } from '../../src/identity/oauth/clients.ts';
import type { TestServer } from './server.ts';
import { browser, type TestSession } from './sessions.ts';
import { checkedFetch } from './contract.ts';

export const REDIRECT = 'https://app.example/callback';

const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();

/** Form POST to an /oauth endpoint without following redirects. */
export async function oauthPost(
  server: TestServer,
  path: string,
  fields: Record<string, string>,
  headers: Record<string, string> = {},
) {
  const response = await checkedFetch(`${server.url}${path}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: form(fields),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, body: text ? JSON.parse(text) : undefined };
}

export interface OAuthTokens {
  access_token: string;
  refresh_token: string;
  clientId: string;
}

/** The whole authorization code + PKCE flow for a signed-in user: consent, then the code exchange. */
export async function oauthTokens(server: TestServer, session: TestSession, scope: string): Promise<OAuthTokens> {
  const { clientId } = await registerClient(server.prisma, {
    name: 'Test app',
    redirectUris: [REDIRECT],
    confidential: false,
  });
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const consent = await checkedFetch(`${server.url}/oauth/authorize`, {
    method: 'POST',
    redirect: 'manual',
    headers: { ...browser(session), 'content-type': 'application/x-www-form-urlencoded' },
    body: form({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: REDIRECT,
      scope,
      state: 's',
      code_challenge: challenge,
      code_challenge_method: 'S256',
      decision: 'approve',
    }),
  });
  expect(consent.status).toBe(303);
  const code = new URL(consent.headers.get('location')!).searchParams.get('code')!;
  const tokens = await oauthPost(server, '/oauth/token', {
    grant_type: 'authorization_code',
    code,
    redirect_uri: REDIRECT,
    client_id: clientId,
    code_verifier: verifier,
  });
  expect(tokens.status, tokens.text).toBe(200);
  return { ...tokens.body, clientId };
}

export function refresh(server: TestServer, tokens: { refresh_token: string; clientId: string }) {
  return oauthPost(server, '/oauth/token', {
    grant_type: 'refresh_token',
    refresh_token: tokens.refresh_token,
    client_id: tokens.clientId,
  });
}
