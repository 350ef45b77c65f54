import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addUser } from '../src/identity/provision.ts';
import { OAUTH_SCOPES } from '../src/kernel/authority.ts';
import { expectError } from './helpers/expectations.ts';
import { createOrg, createTeamKey, type TestOrg } from './helpers/factories.ts';
import { oauthTokens } from './helpers/oauth.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { browser, signIn, withPassword, type TestSession } from './helpers/sessions.ts';

/** Who am I (GET /v1/me), which orgs (GET /v1/orgs), and how to run OAuth (RFC 8414): what integrators ask first. */
let server: TestServer;
let org: TestOrg;
let second: TestOrg;
let email: string;
let session: TestSession;

beforeAll(async () => {
  server = await startTestServer({ RUN_WORKER: 'false' });
  [org, second] = await Promise.all([createOrg(server.prisma, 'Alpha'), createOrg(server.prisma, 'Beta')]);
  email = await withPassword(server, org.adminUserId);
  // The same person is also a viewer of a second org: sessions and OAuth tokens reach both.
  await addUser(server.prisma, {
    orgId: second.orgId,
    email,
    name: 'Ada Admin',
    role: 'viewer',
    acceptUnverified: true,
  });
  session = await signIn(server, email);
});
afterAll(() => server.close());

const sorted = <T extends { id: string }>(items: T[]) => [...items].sort((a, b) => a.id.localeCompare(b.id));

describe('GET /v1/me', () => {
  it('answers a personal key with its user and the key: type, ceiling, org, all scopes', async () => {
    const answer = await server.request('GET', '/v1/me', { token: org.adminKey });
    expect(answer.status).toBe(200);
    const key = await server.prisma.apiKey.findFirstOrThrow({ where: { orgId: org.orgId, userId: org.adminUserId } });
    expect(answer.body).toEqual({
      user: { id: org.adminUserId, name: 'Ada Admin', email, verified: expect.any(Boolean), twoFactorEnabled: false },
      credential: {
        type: 'personal-key',
        id: key.id,
        prefix: key.prefix,
        scopes: [...OAUTH_SCOPES],
        access: 'write',
        includeAdmin: true,
        orgId: org.orgId,
        clientId: null,
        expiresAt: key.expiresAt?.toISOString() ?? null,
      },
    });
  });

  it('answers a team key with no user: it acts for its org and has no personal identity', async () => {
    const token = await createTeamKey(server.prisma, org, 'read');
    const answer = await server.request('GET', '/v1/me', { token });
    expect(answer.status).toBe(200);
    expect(answer.body.user).toBeNull();
    expect(answer.body.credential).toMatchObject({
      type: 'team-key',
      access: 'read',
      includeAdmin: false,
      orgId: org.orgId,
      clientId: null,
    });
  });

  it('answers a browser session with its user and expiry', async () => {
    const answer = await server.request('GET', '/v1/me', { headers: browser(session, false) });
    expect(answer.status).toBe(200);
    expect(answer.body.user.id).toBe(org.adminUserId);
    expect(answer.body.credential).toMatchObject({
      type: 'session',
      id: session.id,
      access: null,
      orgId: null,
      scopes: [...OAUTH_SCOPES],
    });
    expect(Date.parse(answer.body.credential.expiresAt)).toBeGreaterThan(Date.now());
  });

  it('answers an OAuth token with its scopes and client, whatever scopes it holds', async () => {
    const tokens = await oauthTokens(server, session, 'rows:read');
    const answer = await server.request('GET', '/v1/me', { token: tokens.access_token });
    expect(answer.status).toBe(200);
    expect(answer.body.user.id).toBe(org.adminUserId);
    expect(answer.body.credential).toMatchObject({
      type: 'oauth',
      scopes: ['rows:read'],
      clientId: tokens.clientId,
      orgId: null,
      access: null,
    });
  });

  it('is 401 without a credential', async () => {
    expectError(await server.request('GET', '/v1/me'), 401, 'UNAUTHENTICATED');
  });
});

describe('GET /v1/orgs', () => {
  it('lists a key’s one org with the role and what the key may do there', async () => {
    const answer = await server.request('GET', '/v1/orgs', { token: org.adminKey });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({
      data: [{ id: org.orgId, name: 'Alpha', role: 'admin', capabilities: ['read', 'write', 'manage', 'admin'] }],
      nextCursor: null,
      hasMore: false,
    });
  });

  it('lists a team key’s org without a role, under the key’s ceiling', async () => {
    const token = await createTeamKey(server.prisma, org, 'read');
    const answer = await server.request('GET', '/v1/orgs', { token });
    expect(answer.body.data).toEqual([{ id: org.orgId, name: 'Alpha', role: null, capabilities: ['read'] }]);
  });

  it('lets an OAuth app with a single row scope find every orgId of its user, with the role there', async () => {
    const tokens = await oauthTokens(server, session, 'rows:read');
    const answer = await server.request('GET', '/v1/orgs', { token: tokens.access_token });
    expect(answer.status).toBe(200);
    expect(answer.body.data).toEqual(
      sorted([
        { id: org.orgId, name: 'Alpha', role: 'admin', capabilities: ['read', 'write', 'manage', 'admin'] },
        { id: second.orgId, name: 'Beta', role: 'viewer', capabilities: ['read'] },
      ]),
    );
  });

  it('pages like every list: limit, an opaque cursor, hasMore', async () => {
    const first = await server.request('GET', '/v1/orgs?limit=1', { headers: browser(session, false) });
    expect([first.status, first.body.data.length, first.body.hasMore]).toEqual([200, 1, true]);
    const next = await server.request('GET', `/v1/orgs?limit=1&cursor=${encodeURIComponent(first.body.nextCursor)}`, {
      headers: browser(session, false),
    });
    expect([next.body.data.length, next.body.hasMore, next.body.nextCursor]).toEqual([1, false, null]);
    expect([first.body.data[0].id, next.body.data[0].id]).toEqual(
      sorted([{ id: org.orgId }, { id: second.orgId }]).map((item) => item.id),
    );
    expectError(
      await server.request('GET', '/v1/orgs?cursor=forged.cursor', { token: org.adminKey }),
      400,
      'CURSOR_INVALID',
    );
    expectError(await server.request('GET', '/v1/orgs?limit=0', { token: org.adminKey }), 422, 'VALIDATION_FAILED');
  });

  it('no longer lists an org the user was removed from', async () => {
    const third = await createOrg(server.prisma, 'Gamma');
    const member = await addUser(server.prisma, {
      orgId: third.orgId,
      email,
      name: 'Ada Admin',
      role: 'member',
      acceptUnverified: true,
    });
    const listed = async () =>
      (await server.request('GET', '/v1/orgs', { headers: browser(session, false) })).body.data.map(
        (item: { id: string }) => item.id,
      );
    expect(await listed()).toContain(third.orgId);
    await server.prisma.member.delete({ where: { orgId_userId: { orgId: third.orgId, userId: member.userId } } });
    expect(await listed()).not.toContain(third.orgId);
  });
});

describe('the same in GraphQL', () => {
  it('`me` and `orgs` answer what the REST routes translate', async () => {
    const answer = await server.graphql(
      '{ me { user { id } credential { type orgId } } orgs(limit: 5) { data { id role } hasMore } }',
      {},
      { token: org.adminKey },
    );
    expect(answer.body).toEqual({
      data: {
        me: { user: { id: org.adminUserId }, credential: { type: 'personal-key', orgId: org.orgId } },
        orgs: { data: [{ id: org.orgId, role: 'admin' }], hasMore: false },
      },
    });
  });
});

describe('GET /.well-known/oauth-authorization-server (RFC 8414)', () => {
  it('describes the endpoints, PKCE S256, the grants, the client authentication and the real scope list', async () => {
    const answer = await fetch(`${server.url}/.well-known/oauth-authorization-server`);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await answer.json()).toEqual({
      issuer: server.url,
      authorization_endpoint: `${server.url}/oauth/authorize`,
      token_endpoint: `${server.url}/oauth/token`,
      revocation_endpoint: `${server.url}/oauth/revoke`,
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      scopes_supported: [...OAUTH_SCOPES],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
      revocation_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
      service_documentation: `${server.url}/docs`,
    });
  });

  it('names PUBLIC_URL as the issuer when it is set, whatever Host the request carried', async () => {
    const behindProxy = await startTestServer({ RUN_WORKER: 'false', PUBLIC_URL: 'https://api.example.com/' });
    try {
      const answer = await fetch(`${behindProxy.url}/.well-known/oauth-authorization-server`);
      const metadata = await answer.json();
      expect([metadata.issuer, metadata.token_endpoint]).toEqual([
        'https://api.example.com',
        'https://api.example.com/oauth/token',
      ]);
      expect(answer.headers.get('cache-control')).toBe('public, max-age=3600');
    } finally {
      await behindProxy.close();
    }
  });
});
