import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { registerClient } from '../src/identity/oauth/clients.ts';
import { expectError } from './helpers/expectations.ts';
import { addMember, createOrg, idempotencyKey } from './helpers/factories.ts';
import { browser, signIn, withPassword, type TestSession } from './helpers/sessions.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { checkedFetch } from './helpers/contract.ts';

const suite = useServerWithOrg();
const REDIRECT = 'https://app.example/callback';

function pkce() {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

async function raw(method: string, path: string, init: { headers?: Record<string, string>; body?: string } = {}) {
  const response = await checkedFetch(`${suite.server.url}${path}`, { method, redirect: 'manual', ...init });
  const text = await response.text();
  let body: any;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: response.status, headers: response.headers, body, text };
}

const form = (fields: Record<string, string | undefined>) =>
  new URLSearchParams(
    Object.entries(fields).filter((entry): entry is [string, string] => entry[1] !== undefined),
  ).toString();

async function signedInUser(role: 'admin' | 'member' | 'viewer' = 'member') {
  const user = await addMember(suite.server.prisma, suite.org.orgId, role);
  const session = await signIn(suite.server, await withPassword(suite.server, user.userId));
  return { ...user, session };
}

interface Flow {
  clientId: string;
  verifier: string;
  challenge: string;
  session: TestSession;
}

async function authorize(flow: Flow, scope: string, extra: Record<string, string> = {}) {
  const params = {
    response_type: 'code',
    client_id: flow.clientId,
    redirect_uri: REDIRECT,
    scope,
    state: 'xyz',
    code_challenge: flow.challenge,
    code_challenge_method: 'S256',
    ...extra,
  };
  return raw('POST', '/oauth/authorize', {
    headers: { ...browser(flow.session), 'content-type': 'application/x-www-form-urlencoded' },
    body: form({ ...params, decision: 'approve' }),
  });
}

function token(fields: Record<string, string | undefined>, headers: Record<string, string> = {}) {
  return raw('POST', '/oauth/token', {
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: form(fields),
  });
}

async function codeFor(flow: Flow, scope: string): Promise<string> {
  const response = await authorize(flow, scope);
  expect(response.status, response.text).toBe(303);
  const location = new URL(response.headers.get('location')!);
  expect(`${location.origin}${location.pathname}`).toBe(REDIRECT);
  expect(location.searchParams.get('state')).toBe('xyz');
  return location.searchParams.get('code')!;
}

async function newFlow(role: 'admin' | 'member' | 'viewer' = 'member'): Promise<Flow & { userId: string }> {
  const { clientId } = await registerClient(suite.server.prisma, {
    name: 'Test app',
    redirectUris: [REDIRECT],
    confidential: false,
  });
  const user = await signedInUser(role);
  return { clientId, ...pkce(), session: user.session, userId: user.userId };
}

async function tokensFor(flow: Flow, scope: string) {
  const code = await codeFor(flow, scope);
  const response = await token({
    grant_type: 'authorization_code',
    code,
    redirect_uri: REDIRECT,
    client_id: flow.clientId,
    code_verifier: flow.verifier,
  });
  expect(response.status, response.text).toBe(200);
  return response.body as {
    access_token: string;
    refresh_token: string;
    expires_in: number;
    scope: string;
    token_type: string;
  };
}

const INVALID_TOKEN = /^Bearer realm="workspace-data-service", error="invalid_token"/;

describe('OAuth 2.0 authorization code + PKCE, over real HTTP', () => {
  it('authorize → code → token → call → refresh → revoke', async () => {
    const flow = await newFlow();
    const described = await raw(
      'GET',
      `/oauth/authorize?${form({ response_type: 'code', client_id: flow.clientId, redirect_uri: REDIRECT, scope: 'org:read members:read', state: 'xyz', code_challenge: flow.challenge, code_challenge_method: 'S256' })}`,
      { headers: browser(flow.session, false) },
    );
    expect(described.status, described.text).toBe(200);
    expect(described.body).toEqual({
      client: { id: flow.clientId, name: 'Test app' },
      redirectUri: REDIRECT,
      scopes: ['org:read', 'members:read'],
      state: 'xyz',
    });

    const code = await codeFor(flow, 'org:read members:read');
    const issued = await token({
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT,
      client_id: flow.clientId,
      code_verifier: flow.verifier,
    });
    expect(issued.status, issued.text).toBe(200);
    expect(issued.headers.get('cache-control')).toBe('no-store');
    expect(issued.body).toEqual({
      access_token: expect.stringMatching(/^wdsa_/),
      token_type: 'Bearer',
      expires_in: 600,
      refresh_token: expect.stringMatching(/^wdsr_/),
      scope: 'org:read members:read',
    });

    const access = issued.body.access_token;
    expect((await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: access })).status).toBe(200);
    expect((await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/members`, { token: access })).status).toBe(
      200,
    );
    const missing = await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/databases`, { token: access });
    expectError(missing, 403, 'INSUFFICIENT_SCOPE');
    expect(missing.headers.get('www-authenticate')).toBe(
      'Bearer realm="workspace-data-service", error="insufficient_scope", scope="databases:read"',
    );

    const refreshed = await token({
      grant_type: 'refresh_token',
      refresh_token: issued.body.refresh_token,
      client_id: flow.clientId,
    });
    expect(refreshed.status, refreshed.text).toBe(200);
    expect(refreshed.body.refresh_token).not.toBe(issued.body.refresh_token);
    expect(
      (await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: refreshed.body.access_token })).status,
    ).toBe(200);

    const revoked = await raw('POST', '/oauth/revoke', {
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form({ token: refreshed.body.refresh_token, client_id: flow.clientId }),
    });
    expect(revoked.status).toBe(200);
    for (const revokedAccess of [access, refreshed.body.access_token]) {
      const response = await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: revokedAccess });
      expectError(response, 401, 'UNAUTHENTICATED');
      expect(response.headers.get('www-authenticate')).toMatch(INVALID_TOKEN);
    }
    expect(
      (
        await token({
          grant_type: 'refresh_token',
          refresh_token: refreshed.body.refresh_token,
          client_id: flow.clientId,
        })
      ).body.error,
    ).toBe('invalid_grant');
  });

  it('reusing a rotated refresh token revokes the whole grant', async () => {
    const flow = await newFlow();
    const first = await tokensFor(flow, 'org:read');
    const second = (
      await token({ grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: flow.clientId })
    ).body;
    const reuse = await token({
      grant_type: 'refresh_token',
      refresh_token: first.refresh_token,
      client_id: flow.clientId,
    });
    expect(reuse.status).toBe(400);
    expect(reuse.body).toEqual({ error: 'invalid_grant', error_description: expect.any(String) });
    expectError(
      await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: second.access_token }),
      401,
      'UNAUTHENTICATED',
    );
    expect(
      (await token({ grant_type: 'refresh_token', refresh_token: second.refresh_token, client_id: flow.clientId })).body
        .error,
    ).toBe('invalid_grant');
  });

  it('rejects a PKCE mismatch, a reused code (revoking its tokens) and a redirect_uri mismatch', async () => {
    const flow = await newFlow();
    for (const failed of [{ code_verifier: pkce().verifier }, { redirect_uri: 'https://app.example/other' }]) {
      // A failed exchange uses the code up: the right verifier and redirect_uri cannot follow it (issue 18).
      const spent = await codeFor(flow, 'org:read');
      const first = await token({
        grant_type: 'authorization_code',
        code: spent,
        redirect_uri: REDIRECT,
        client_id: flow.clientId,
        code_verifier: flow.verifier,
        ...failed,
      });
      expect({ status: first.status, error: first.body.error }).toEqual({ status: 400, error: 'invalid_grant' });
      const retry = await token({
        grant_type: 'authorization_code',
        code: spent,
        redirect_uri: REDIRECT,
        client_id: flow.clientId,
        code_verifier: flow.verifier,
      });
      expect({ status: retry.status, error: retry.body.error }).toEqual({ status: 400, error: 'invalid_grant' });
    }

    const code = await codeFor(flow, 'org:read');
    const good = await token({
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT,
      client_id: flow.clientId,
      code_verifier: flow.verifier,
    });
    expect(good.status, good.text).toBe(200);
    const reused = await token({
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT,
      client_id: flow.clientId,
      code_verifier: flow.verifier,
    });
    expect(reused.status).toBe(400);
    expect(reused.body.error).toBe('invalid_grant');
    expectError(
      await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: good.body.access_token }),
      401,
      'UNAUTHENTICATED',
    );

    const unregistered = await authorize(flow, 'org:read', { redirect_uri: 'https://evil.example/cb' });
    expect(unregistered.status).toBe(400);
    expect(unregistered.headers.get('location')).toBeNull();
    expect(unregistered.body.error).toBe('invalid_request');
  });

  it('errors after the redirect URI is trusted go back to the client; consent needs a session and its CSRF token', async () => {
    const flow = await newFlow();
    const noPkce = await authorize(flow, 'org:read', { code_challenge_method: 'plain' });
    expect(noPkce.status).toBe(303);
    expect(Object.fromEntries(new URL(noPkce.headers.get('location')!).searchParams)).toMatchObject({
      error: 'invalid_request',
      state: 'xyz',
    });
    const badScope = await authorize(flow, 'org:read admin:everything');
    expect(new URL(badScope.headers.get('location')!).searchParams.get('error')).toBe('invalid_scope');
    const denied = await raw('POST', '/oauth/authorize', {
      headers: { ...browser(flow.session), 'content-type': 'application/x-www-form-urlencoded' },
      body: form({
        response_type: 'code',
        client_id: flow.clientId,
        redirect_uri: REDIRECT,
        scope: 'org:read',
        state: 's',
        code_challenge: flow.challenge,
        code_challenge_method: 'S256',
        decision: 'deny',
      }),
    });
    expect(new URL(denied.headers.get('location')!).searchParams.get('error')).toBe('access_denied');

    const noCsrf = await raw('POST', '/oauth/authorize', {
      headers: { ...browser(flow.session, false), 'content-type': 'application/x-www-form-urlencoded' },
      body: form({
        response_type: 'code',
        client_id: flow.clientId,
        redirect_uri: REDIRECT,
        scope: 'org:read',
        code_challenge: flow.challenge,
        code_challenge_method: 'S256',
        decision: 'approve',
      }),
    });
    expectError(noCsrf, 403, 'ACCESS_DENIED');
    const query = form({
      response_type: 'code',
      client_id: flow.clientId,
      redirect_uri: REDIRECT,
      scope: 'org:read',
      code_challenge: flow.challenge,
      code_challenge_method: 'S256',
    });
    expectError(await raw('GET', `/oauth/authorize?${query}`), 401, 'UNAUTHENTICATED');
    expectError(
      await raw('GET', `/oauth/authorize?${query}`, { headers: { authorization: `Bearer ${suite.org.adminKey}` } }),
      401,
      'UNAUTHENTICATED',
    );
  });

  it('each scope is capped by the live role, and an OAuth token cannot mint API keys', async () => {
    const flow = await newFlow('viewer');
    const { access_token: access } = await tokensFor(flow, 'databases:manage databases:read keys:manage');
    expectError(
      await suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/databases`, {
        token: access,
        idempotencyKey: idempotencyKey(),
        body: { name: 'Nope' },
      }),
      403,
      'FORBIDDEN',
    );
    expect((await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/databases`, { token: access })).status).toBe(
      200,
    );
    expectError(
      await suite.server.request('POST', '/v1/me/keys', {
        token: access,
        idempotencyKey: idempotencyKey(),
        body: { name: 'K', orgId: suite.org.orgId, access: 'read' },
      }),
      403,
      'DELEGATION_EXCEEDS_AUTHORITY',
    );
    expectError(await suite.server.request('GET', '/v1/me/sessions', { token: access }), 403, 'INSUFFICIENT_SCOPE');
    const other = await createOrg(suite.server.prisma);
    expectError(
      await suite.server.request('GET', `/v1/orgs/${other.orgId}/databases`, { token: access }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    await suite.server.prisma.member.updateMany({ where: { userId: flow.userId }, data: { role: 'member' } });
    expect(
      (
        await suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/databases`, {
          token: access,
          idempotencyKey: idempotencyKey(),
          body: { name: `By OAuth ${idempotencyKey()}` },
        })
      ).status,
    ).toBe(201);
    // The audit feed records the person and the application that acted for them.
    const event = await suite.server.prisma.activityEvent.findFirstOrThrow({
      where: { event: 'database.create', actorId: flow.userId },
    });
    expect(event).toMatchObject({ actorKind: 'user', actorKey: `oauth:${flow.clientId}` });
  });

  it('expired and wrong-audience access tokens are 401 with WWW-Authenticate', async () => {
    const flow = await newFlow();
    for (const change of [{ expiresAt: new Date(Date.now() - 1) }, { audience: 'another-service' }]) {
      const { access_token: access } = await tokensFor(flow, 'org:read');
      expect((await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: access })).status).toBe(200);
      await suite.server.prisma.oAuthToken.updateMany({
        where: { kind: 'access', userId: flow.userId, revokedAt: null },
        data: change,
      });
      const response = await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: access });
      expectError(response, 401, 'UNAUTHENTICATED');
      expect(response.headers.get('www-authenticate')).toMatch(INVALID_TOKEN);
    }
  });

  it('confidential clients authenticate (Basic or body); the token endpoint speaks RFC 6749 §5.2', async () => {
    const { clientId, clientSecret } = await registerClient(suite.server.prisma, {
      name: 'Server app',
      redirectUris: [REDIRECT],
      confidential: true,
    });
    const user = await signedInUser();
    const flow = { clientId, ...pkce(), session: user.session };
    const code = await codeFor(flow, 'org:read');
    const fields = { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: flow.verifier };
    const wrong = await token({ ...fields, client_id: clientId, client_secret: 'wdsc_wrong' });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error).toBe('invalid_client');
    const basic = `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`;
    expect((await token(fields, { authorization: basic })).status).toBe(200);
    expect((await token({ grant_type: 'password', client_id: clientId, client_secret: clientSecret })).body.error).toBe(
      'unsupported_grant_type',
    );
    for (const malformed of [
      'Basic %%%',
      `Basic ${Buffer.from('no-colon').toString('base64')}`,
      `Basic ${Buffer.from(`${clientId}:%E0%A4%A`).toString('base64')}`,
    ]) {
      const refused = await token(fields, { authorization: malformed });
      expect([refused.status, refused.body?.error], malformed).toEqual([401, 'invalid_client']);
    }
    const json = await raw('POST', '/oauth/token', {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(fields),
    });
    expect(json.status).toBe(400);
    expect(json.body.error).toBe('invalid_request');
    await expect(
      registerClient(suite.server.prisma, {
        name: 'Bad',
        redirectUris: ['http://evil.example/cb'],
        confidential: false,
      }),
    ).rejects.toThrow(/https/);
  });
});

describe('odd requests to the plain handlers are 4xx, never 500', () => {
  it.each([
    ['POST', '/v1/auth/login', { 'content-type': 'application/json' }, '"just a string"'],
    ['POST', '/v1/auth/login', { 'content-type': 'application/json' }, '[1,2]'],
    ['POST', '/v1/auth/login', { 'content-type': 'application/json' }, '{"email":'],
    ['POST', '/v1/auth/login', { 'content-type': 'text/plain' }, 'email=a'],
    [
      'POST',
      '/v1/auth/login',
      { 'content-type': 'application/json' },
      JSON.stringify({ email: 'a@example.com', password: 'x'.repeat(300) }),
    ],
    [
      'POST',
      '/v1/auth/step-up',
      { 'content-type': 'application/json', cookie: '__Host-wds_session=' },
      '{"password":"x"}',
    ],
    [
      'POST',
      '/v1/auth/step-up',
      { 'content-type': 'application/json', cookie: `__Host-wds_session=wdss_${'A'.repeat(43)}` },
      '{"password":"x"}',
    ],
    ['GET', '/oauth/authorize?client_id=nope&client_id=twice', {}, undefined],
    ['POST', '/oauth/authorize', { 'content-type': 'application/x-www-form-urlencoded' }, 'a[b]=c&client_id=%FF'],
    [
      'POST',
      '/oauth/token',
      { 'content-type': 'application/x-www-form-urlencoded' },
      'grant_type=refresh_token&refresh_token=wdsr_x&client_id=01J00000000000000000000000',
    ],
    ['POST', '/oauth/token', {}, undefined],
    ['POST', '/oauth/revoke', { 'content-type': 'application/x-www-form-urlencoded' }, 'token=abc'],
  ])('%s %s %j %s', async (method, path, headers, body) => {
    const response = await raw(method, path, { headers, ...(body === undefined ? {} : { body }) });
    expect(response.status, response.text).toBeGreaterThanOrEqual(400);
    expect(response.status, response.text).toBeLessThan(500);
  });
});
