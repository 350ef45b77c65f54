import { describe, expect, it } from 'vitest';
import { addUser, setPassword } from '../src/identity/provision.ts';
import { issueApiKeySecret } from '../src/identity/secrets.ts';
import { currentTotp } from '../src/identity/totp.ts';
import { newId } from '../src/kernel/ids.ts';
import { expectError } from './helpers/expectations.ts';
import { addMember, createOrg, idempotencyKey, type TestOrg } from './helpers/factories.ts';
import { oauthTokens, refresh } from './helpers/oauth.ts';
import { browser, signIn, withPassword, type TestSession } from './helpers/sessions.ts';
import { useServerWithOrg } from './helpers/suite.ts';

const suite = useServerWithOrg({ LOGIN_LOCKOUT_THRESHOLD: '5' });
const PASSWORD = 'a long test password';
let counter = 0;
const address = () => `someone-${Date.now()}-${(counter += 1)}@corp.test`;

/** A personal key of `userId` in `orgId` with the given ceiling (what POST /v1/me/keys would mint). */
async function personalKey(
  org: { orgId: string },
  userId: string,
  access: 'read' | 'write',
  includeAdmin: boolean,
): Promise<string> {
  const secret = issueApiKeySecret();
  await suite.server.prisma.apiKey.create({
    data: {
      id: newId(),
      scope: 'personal',
      orgId: org.orgId,
      userId,
      createdByUserId: userId,
      name: 'K',
      prefix: secret.prefix,
      secretHash: secret.hash,
      access,
      includeAdmin,
    },
  });
  return secret.token;
}

async function staleAdminSession(org: TestOrg): Promise<TestSession> {
  const session = await signIn(suite.server, await withPassword(suite.server, org.adminUserId));
  await suite.server.prisma.session.update({
    where: { id: session.id },
    data: { strongAuthAt: new Date(Date.now() - 3_600_000) },
  });
  return session;
}

function invite(
  org: TestOrg,
  body: Record<string, unknown>,
  auth: { token?: string; headers?: Record<string, string> },
) {
  return suite.server.request('POST', `/v1/orgs/${org.orgId}/invitations`, {
    ...auth,
    idempotencyKey: idempotencyKey(),
    body,
  });
}

describe('invitations are role grants (issue 19 §1)', () => {
  it('from a browser session they need step-up, like role changes and key creation', async () => {
    const org = await createOrg(suite.server.prisma);
    const session = await staleAdminSession(org);
    const refused = await invite(org, { email: address(), role: 'admin' }, { headers: browser(session) });
    expectError(refused, 403, 'STEP_UP_REQUIRED');
    expect(refused.body.error.details).toEqual({ maxAgeSeconds: suite.server.config.STEP_UP_WINDOW_SECONDS });
    expect(await suite.server.prisma.invitation.count({ where: { orgId: org.orgId } })).toBe(0);
    expect(
      (
        await suite.server.request('POST', '/v1/auth/step-up', {
          headers: browser(session),
          body: { password: PASSWORD },
        })
      ).status,
    ).toBe(200);
    expect((await invite(org, { email: address(), role: 'admin' }, { headers: browser(session) })).status).toBe(201);
  });

  it('the invited role is capped by the credential: a read + admin key invites viewers only; an OAuth token cannot invite', async () => {
    const org = await createOrg(suite.server.prisma);
    const readAdmin = await personalKey(org, org.adminUserId, 'read', true);
    for (const role of ['member', 'admin']) {
      const refused = await invite(org, { email: address(), role }, { token: readAdmin });
      expectError(refused, 403, 'DELEGATION_EXCEEDS_AUTHORITY');
      expect(refused.body.error.details).toMatchObject({ held: ['read', 'admin'] });
    }
    expect(await suite.server.prisma.invitation.count({ where: { orgId: org.orgId } })).toBe(0);
    expect((await invite(org, { email: address(), role: 'viewer' }, { token: readAdmin })).status).toBe(201);

    const session = await signIn(suite.server, await withPassword(suite.server, org.adminUserId));
    const oauth = await oauthTokens(suite.server, session, 'members:manage');
    const byApp = await invite(org, { email: address(), role: 'admin' }, { token: oauth.access_token });
    expectError(byApp, 403, 'DELEGATION_EXCEEDS_AUTHORITY');
    expect(byApp.body.error.details).toMatchObject({ scopesLimited: true });
  });

  it('PATCH …/members/{id} from a key cannot grant a role beyond the key', async () => {
    const org = await createOrg(suite.server.prisma);
    const readAdmin = await personalKey(org, org.adminUserId, 'read', true);
    const viewer = await addMember(suite.server.prisma, org.orgId, 'viewer');
    const patch = (role: string) =>
      suite.server.request('PATCH', `/v1/orgs/${org.orgId}/members/${viewer.memberId}`, {
        token: readAdmin,
        idempotencyKey: idempotencyKey(),
        body: { expectedVersion: '1', role },
      });
    const refused = await patch('admin');
    expectError(refused, 403, 'DELEGATION_EXCEEDS_AUTHORITY');
    expect(refused.body.error.details).toEqual({
      requested: ['read', 'write', 'manage', 'admin'],
      held: ['read', 'admin'],
    });
    expectError(await patch('member'), 403, 'DELEGATION_EXCEEDS_AUTHORITY');
    expect((await suite.server.prisma.member.findUniqueOrThrow({ where: { id: viewer.memberId } })).role).toBe(
      'viewer',
    );
    expect((await patch('viewer')).status).toBe(200);
  });

  it('answers carrying a secret are Cache-Control: no-store', async () => {
    const org = await createOrg(suite.server.prisma);
    const invited = await invite(org, { email: address(), role: 'viewer' }, { token: org.adminKey });
    expect(invited.status).toBe(201);
    expect(invited.headers.get('cache-control')).toBe('no-store');
    const key = await suite.server.request('POST', '/v1/me/keys', {
      token: org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { name: 'K', orgId: org.orgId, access: 'read' },
    });
    expect([key.status, key.headers.get('cache-control')]).toEqual([201, 'no-store']);
    const team = await suite.server.request('POST', `/v1/orgs/${org.orgId}/keys`, {
      token: org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { name: 'T', access: 'read' },
    });
    expect([team.status, team.headers.get('cache-control')]).toEqual([201, 'no-store']);
    const session = await signIn(suite.server, await withPassword(suite.server, org.adminUserId));
    const enrol = await suite.server.request('POST', '/v1/me/two-factor', {
      headers: browser(session),
      idempotencyKey: idempotencyKey(),
    });
    expect([enrol.status, enrol.headers.get('cache-control')]).toEqual([201, 'no-store']);
    const graphql = await suite.server.graphql(
      'mutation($k: String!, $o: ID!) { createTeamKey(idempotencyKey: $k, orgId: $o, input: {name: "G", access: "read"}) { secret } }',
      { k: idempotencyKey(), o: org.orgId },
      { token: org.adminKey },
    );
    expect(graphql.body.data.createTeamKey.secret).toMatch(/^wds_/);
    expect(graphql.headers.get('cache-control')).toBe('no-store');
  });
});

describe('invitation sign-ups and recovery (issue 19 §2)', () => {
  it('an account created by accepting is unverified, and add-user refuses to reuse it unless told the owner was checked', async () => {
    const eve = await createOrg(suite.server.prisma);
    const victim = address();
    const { token } = (await invite(eve, { email: victim, role: 'viewer' }, { token: eve.adminKey })).body;
    const joined = await suite.server.request('POST', '/v1/invitations/accept', {
      idempotencyKey: idempotencyKey(),
      body: { token, name: 'Victim', password: 'chosen by eve, long' },
    });
    expect(joined.status, joined.text).toBe(200);
    expect(joined.body).toMatchObject({ email: victim, verified: false });

    const acme = await createOrg(suite.server.prisma);
    await expect(
      addUser(suite.server.prisma, { orgId: acme.orgId, email: victim, name: 'Victim', role: 'member' }),
    ).rejects.toThrow(/unverified account/);
    expect(await suite.server.prisma.member.count({ where: { orgId: acme.orgId } })).toBe(1);
    const added = await addUser(suite.server.prisma, {
      orgId: acme.orgId,
      email: victim,
      name: 'Victim',
      role: 'member',
      acceptUnverified: true,
    });
    expect(added.userId).toBe(joined.body.userId);
  });

  it('set-password ends every session, OAuth grant and refresh token of the user', async () => {
    const user = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    const email = await withPassword(suite.server, user.userId);
    const session = await signIn(suite.server, email);
    const tokens = await oauthTokens(suite.server, session, 'org:read');
    const readOrg = (token: string) => suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token });
    expect((await readOrg(tokens.access_token)).status).toBe(200);

    await setPassword(suite.server.prisma, { email, password: 'a new long password' });
    expectError(await readOrg(tokens.access_token), 401, 'UNAUTHENTICATED');
    const refreshed = await refresh(suite.server, tokens);
    expect([refreshed.status, refreshed.body]).toEqual([
      400,
      { error: 'invalid_grant', error_description: expect.any(String) },
    ]);
    expectError(
      await suite.server.request('GET', '/v1/me/sessions', { headers: browser(session) }),
      401,
      'UNAUTHENTICATED',
    );
  });
});

describe('login and TOTP attempts (issue 19 §5, issue 18 §2)', () => {
  it('25 concurrent wrong passwords: the threshold (5) are checked, the rest are locked out (429)', async () => {
    const user = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    const email = await withPassword(suite.server, user.userId);
    const answers = await Promise.all(
      Array.from({ length: 25 }, () =>
        suite.server.request('POST', '/v1/auth/login', { body: { email, password: 'not the password' } }),
      ),
    );
    const statuses = answers.map((answer) => answer.status).sort();
    expect(statuses).toEqual([...Array(5).fill(401), ...Array(20).fill(429)]);
    for (const answer of answers.filter((a) => a.status === 429)) {
      expectError(answer, 429, 'RATE_LIMITED');
      expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
    }
  });

  it('a right password without its TOTP code answers exactly like a wrong password', async () => {
    const user = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    const email = await withPassword(suite.server, user.userId);
    await suite.server.prisma.user.update({
      where: { id: user.userId },
      data: { twoFactorEnabled: true, totpSecret: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP' },
    });
    const rightPassword = await suite.server.request('POST', '/v1/auth/login', { body: { email, password: PASSWORD } });
    const wrongPassword = await suite.server.request('POST', '/v1/auth/login', {
      body: { email, password: 'not the password' },
    });
    expectError(rightPassword, 401, 'UNAUTHENTICATED');
    expectError(wrongPassword, 401, 'UNAUTHENTICATED');
    const shape = (body: { error: Record<string, unknown> }) => ({ ...body.error, requestId: undefined });
    expect(shape(rightPassword.body)).toEqual(shape(wrongPassword.body));
    expect(rightPassword.body.error.details).toBeUndefined();
  });

  it('wrong codes at two-factor confirm count toward the login lockout', async () => {
    const user = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    const email = await withPassword(suite.server, user.userId);
    const session = await signIn(suite.server, email);
    const enrol = await suite.server.request('POST', '/v1/me/two-factor', {
      headers: browser(session),
      idempotencyKey: idempotencyKey(),
    });
    const secret = enrol.body.secret as string;
    const valid = new Set([-1, 0, 1].map((steps) => currentTotp(secret, steps)));
    const wrong = ['000000', '111111', '222222', '333333'].find((code) => !valid.has(code))!;
    const confirm = (code: string) =>
      suite.server.request('POST', '/v1/me/two-factor/confirm', {
        headers: browser(session),
        idempotencyKey: idempotencyKey(),
        body: { code },
      });
    for (let attempt = 0; attempt < 5; attempt += 1) expectError(await confirm(wrong), 422, 'VALIDATION_FAILED');
    const locked = await confirm(currentTotp(secret));
    expectError(locked, 429, 'RATE_LIMITED');
    expect(locked.headers.get('retry-after')).toMatch(/^\d+$/);
    expectError(
      await suite.server.request('POST', '/v1/auth/login', { body: { email, password: PASSWORD } }),
      429,
      'RATE_LIMITED',
    );
    expect((await suite.server.prisma.user.findUniqueOrThrow({ where: { id: user.userId } })).twoFactorEnabled).toBe(
      false,
    );
  });
});

describe('security settings need an interactive, recently proven credential (issue 19 §4)', () => {
  it('no API key, even a read-only one, enrols two-factor or ends another session; a stale session must step up', async () => {
    const user = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    const email = await withPassword(suite.server, user.userId);
    const session = await signIn(suite.server, email);
    for (const path of ['/v1/me/two-factor', '/v1/me/two-factor/disable']) {
      const refused = await suite.server.request('POST', path, {
        token: user.apiKey,
        idempotencyKey: idempotencyKey(),
        ...(path.endsWith('disable') ? { body: { code: '123456' } } : {}),
      });
      expectError(refused, 403, 'ACCESS_DENIED');
      expect(refused.body.error.details).toEqual({ reason: 'interactive_credential_required' });
    }
    expectError(
      await suite.server.request('DELETE', `/v1/me/sessions/${session.id}`, {
        token: user.apiKey,
        idempotencyKey: idempotencyKey(),
      }),
      403,
      'ACCESS_DENIED',
    );
    expect((await suite.server.prisma.session.findUniqueOrThrow({ where: { id: session.id } })).revokedAt).toBeNull();
    expect((await suite.server.prisma.user.findUniqueOrThrow({ where: { id: user.userId } })).totpSecret).toBeNull();

    const other = await signIn(suite.server, email);
    await suite.server.prisma.session.update({
      where: { id: session.id },
      data: { strongAuthAt: new Date(Date.now() - 3_600_000) },
    });
    expectError(
      await suite.server.request('DELETE', `/v1/me/sessions/${other.id}`, {
        headers: browser(session),
        idempotencyKey: idempotencyKey(),
      }),
      403,
      'STEP_UP_REQUIRED',
    );
    expectError(
      await suite.server.request('POST', '/v1/me/two-factor', {
        headers: browser(session),
        idempotencyKey: idempotencyKey(),
      }),
      403,
      'STEP_UP_REQUIRED',
    );
    // Signing out of the session in use needs nothing more.
    expect(
      (
        await suite.server.request('DELETE', `/v1/me/sessions/${session.id}`, {
          headers: browser(session),
          idempotencyKey: idempotencyKey(),
        })
      ).status,
    ).toBe(200);
  });

  it('an OAuth token with account:security changes them only while its consent is recent', async () => {
    const user = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    const session = await signIn(suite.server, await withPassword(suite.server, user.userId));
    const tokens = await oauthTokens(suite.server, session, 'account:security');
    await suite.server.prisma.oAuthCode.updateMany({
      where: { userId: user.userId },
      data: { createdAt: new Date(Date.now() - 3_600_000) },
    });
    expectError(
      await suite.server.request('POST', '/v1/me/two-factor', {
        token: tokens.access_token,
        idempotencyKey: idempotencyKey(),
      }),
      403,
      'STEP_UP_REQUIRED',
    );
    await suite.server.prisma.oAuthCode.updateMany({ where: { userId: user.userId }, data: { createdAt: new Date() } });
    expect(
      (
        await suite.server.request('POST', '/v1/me/two-factor', {
          token: tokens.access_token,
          idempotencyKey: idempotencyKey(),
        })
      ).status,
    ).toBe(201);
  });
});

describe('GET/DELETE /v1/me/oauth-grants (issue 19 §2)', () => {
  it('lists the applications a user authorized and revokes one with all its tokens; others’ grants are 404', async () => {
    const user = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    const session = await signIn(suite.server, await withPassword(suite.server, user.userId));
    const tokens = await oauthTokens(suite.server, session, 'org:read rows:read');
    const list = await suite.server.request('GET', '/v1/me/oauth-grants', { headers: browser(session) });
    expect(list.status, list.text).toBe(200);
    expect(list.body).toEqual({
      data: [
        {
          id: expect.any(String),
          clientId: tokens.clientId,
          clientName: 'Test app',
          scopes: ['org:read', 'rows:read'],
          createdAt: expect.any(String),
          lastIssuedAt: expect.any(String),
        },
      ],
      nextCursor: null,
      hasMore: false,
    });
    expect(list.text).not.toContain(tokens.access_token);
    const grantId = list.body.data[0].id as string;

    const stranger = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    const strangerSession = await signIn(suite.server, await withPassword(suite.server, stranger.userId));
    expectError(
      await suite.server.request('DELETE', `/v1/me/oauth-grants/${grantId}`, {
        headers: browser(strangerSession),
        idempotencyKey: idempotencyKey(),
      }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(
      await suite.server.request('DELETE', `/v1/me/oauth-grants/${grantId}`, {
        token: user.apiKey,
        idempotencyKey: idempotencyKey(),
      }),
      403,
      'ACCESS_DENIED',
    );

    const revoked = await suite.server.request('DELETE', `/v1/me/oauth-grants/${grantId}`, {
      headers: browser(session),
      idempotencyKey: idempotencyKey(),
    });
    expect([revoked.status, revoked.body]).toEqual([200, { deleted: true, mutationId: expect.any(String) }]);
    expectError(
      await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: tokens.access_token }),
      401,
      'UNAUTHENTICATED',
    );
    expect((await refresh(suite.server, tokens)).status).toBe(400);
    expect((await suite.server.request('GET', '/v1/me/oauth-grants', { headers: browser(session) })).body.data).toEqual(
      [],
    );
  });
});

describe('smaller findings (issue 19 §5)', () => {
  it('two parallel refreshes of one refresh token: one wins, and the family is revoked', async () => {
    const user = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    const session = await signIn(suite.server, await withPassword(suite.server, user.userId));
    const tokens = await oauthTokens(suite.server, session, 'org:read');
    const answers = await Promise.all([refresh(suite.server, tokens), refresh(suite.server, tokens)]);
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 400]);
    const winner = answers.find((answer) => answer.status === 200)!.body;
    expectError(
      await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: winner.access_token }),
      401,
      'UNAUTHENTICATED',
    );
    expect((await refresh(suite.server, { ...tokens, refresh_token: winner.refresh_token })).status).toBe(400);
  });

  it('idempotency records belong to the credential: another credential of the same user neither replays nor learns the operation', async () => {
    const org = await createOrg(suite.server.prisma);
    const secondKey = await personalKey(org, org.adminUserId, 'write', true);
    const key = idempotencyKey();
    const first = await invite(org, { email: address(), role: 'viewer' }, { token: org.adminKey });
    expect(first.status).toBe(201);
    const byKey = (token: string, body: unknown) =>
      suite.server.request('POST', `/v1/orgs/${org.orgId}/invitations`, { token, idempotencyKey: key, body });
    expect((await byKey(org.adminKey, { email: `a-${address()}`, role: 'viewer' })).status).toBe(201);
    const other = await suite.server.request('POST', `/v1/orgs/${org.orgId}/keys`, {
      token: secondKey,
      idempotencyKey: key,
      body: { name: 'T', access: 'read' },
    });
    expect(other.status, other.text).toBe(201);
    expect(other.text).not.toContain('createInvitation');
  });

  it('team keys record and list the admin who created them', async () => {
    const org = await createOrg(suite.server.prisma);
    const created = await suite.server.request('POST', `/v1/orgs/${org.orgId}/keys`, {
      token: org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { name: 'CI', access: 'read' },
    });
    expect(created.body.key).toMatchObject({ scope: 'team', userId: null, createdByUserId: org.adminUserId });
    const list = await suite.server.request('GET', `/v1/orgs/${org.orgId}/keys`, { token: org.adminKey });
    expect(list.body.data[0]).toMatchObject({ id: created.body.key.id, createdByUserId: org.adminUserId });
  });
});
