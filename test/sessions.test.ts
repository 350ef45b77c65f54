import { describe, expect, it } from 'vitest';
import { lockDurationSeconds } from '../src/identity/login.ts';
import { currentTotp } from '../src/identity/totp.ts';
import { DeletionResponse } from '../src/contracts/responses.ts';
import { EnrolmentResponse, SessionResponse } from '../src/contracts/sessions.ts';
import { expectError } from './helpers/expectations.ts';
import { addMember, createOrg, createTeamKey, idempotencyKey } from './helpers/factories.ts';
import { browser, signIn, withPassword } from './helpers/sessions.ts';
import { useServerWithOrg } from './helpers/suite.ts';

const suite = useServerWithOrg({ LOGIN_LOCKOUT_THRESHOLD: '3', LOGIN_LOCKOUT_BASE_SECONDS: '30' });

async function newUser(role: 'admin' | 'member' | 'viewer' = 'member') {
  const user = await addMember(suite.server.prisma, suite.org.orgId, role);
  const email = await withPassword(suite.server, user.userId);
  return { ...user, email };
}

function login(body: Record<string, unknown>) {
  return suite.server.request('POST', '/v1/auth/login', { body });
}

describe('POST /v1/auth/login', () => {
  it('answers 201 with the session and a CSRF token, and sets a __Host-, HttpOnly, Secure, SameSite=Strict cookie', async () => {
    const user = await newUser();
    const response = await login({ email: user.email.toUpperCase(), password: 'a long test password' });
    expect(response.status, response.text).toBe(201);
    expect(response.body).toEqual({
      session: { id: expect.any(String), createdAt: expect.any(String), expiresAt: expect.any(String) },
      csrfToken: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    expect(response.headers.get('cache-control')).toBe('no-store');
    const cookie = response.headers.get('set-cookie')!;
    expect(cookie).toMatch(
      /^__Host-wds_session=wdss_[A-Za-z0-9_-]{43}; Path=\/; Max-Age=43200; HttpOnly; Secure; SameSite=Strict$/,
    );
    // The session acts as the user, with their current role in every org.
    const headers = { cookie: cookie.split(';')[0]! };
    expect((await suite.server.request('GET', '/v1/me/preferences', { headers })).status).toBe(200);
    expect((await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { headers })).status).toBe(200);
    const stored = await suite.server.prisma.session.findUniqueOrThrow({ where: { id: response.body.session.id } });
    expect(JSON.stringify(stored)).not.toContain(cookie.split(';')[0]!.split('=')[1]!);
    expect(JSON.stringify(stored)).not.toContain(response.body.csrfToken);
  });

  it('refuses a wrong password and an unknown address alike (401), and bad bodies (422)', async () => {
    const user = await newUser();
    const wrong = await login({ email: user.email, password: 'not the password' });
    const unknown = await login({ email: 'nobody@example.com', password: 'not the password' });
    expectError(wrong, 401, 'UNAUTHENTICATED');
    expectError(unknown, 401, 'UNAUTHENTICATED');
    expect(wrong.body.error.message).toBe(unknown.body.error.message);
    expect(wrong.headers.get('set-cookie')).toBeNull();
    expectError(await login({ email: user.email }), 422, 'VALIDATION_FAILED');
    expectError(await login({ email: 'not-an-address', password: 'x' }), 422, 'VALIDATION_FAILED');
    expectError(
      await login({ email: user.email, password: 'a long test password', remember: true }),
      422,
      'VALIDATION_FAILED',
    );
    const noPassword = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    const email = (await suite.server.prisma.user.findUniqueOrThrow({ where: { id: noPassword.userId } })).email;
    expectError(await login({ email, password: 'anything at all' }), 401, 'UNAUTHENTICATED');
  });

  it('locks the account after repeated failures (429 with Retry-After), even for the right password, then recovers', async () => {
    const user = await newUser();
    for (let attempt = 0; attempt < 3; attempt += 1)
      expectError(await login({ email: user.email, password: 'wrong password' }), 401, 'UNAUTHENTICATED');
    const locked = await login({ email: user.email, password: 'a long test password' });
    expectError(locked, 429, 'RATE_LIMITED');
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(25);
    expect(Number(locked.headers.get('retry-after'))).toBeLessThanOrEqual(30);
    await suite.server.prisma.user.update({
      where: { id: user.userId },
      data: { lockedUntil: new Date(Date.now() - 1) },
    });
    // One more failure after the lock doubles the next one.
    expectError(await login({ email: user.email, password: 'wrong again' }), 401, 'UNAUTHENTICATED');
    const relocked = await login({ email: user.email, password: 'a long test password' });
    expectError(relocked, 429, 'RATE_LIMITED');
    expect(Number(relocked.headers.get('retry-after'))).toBeGreaterThan(55);
    await suite.server.prisma.user.update({
      where: { id: user.userId },
      data: { lockedUntil: new Date(Date.now() - 1) },
    });
    expect((await login({ email: user.email, password: 'a long test password' })).status).toBe(201);
    expect((await suite.server.prisma.user.findUniqueOrThrow({ where: { id: user.userId } })).failedLogins).toBe(0);
  });
});

describe('CSRF protection of cookie-authenticated changes', () => {
  it('a change without the X-CSRF-Token header, or with a wrong one, is 403 ACCESS_DENIED; reads need none', async () => {
    const user = await newUser();
    const session = await signIn(suite.server, user.email);
    const change = (headers: Record<string, string>) =>
      suite.server.request('PATCH', '/v1/me/preferences', {
        headers,
        idempotencyKey: idempotencyKey(),
        body: { theme: 'dark' },
      });
    const missing = await change(browser(session, false));
    expectError(missing, 403, 'ACCESS_DENIED');
    expect(missing.body.error.details).toEqual({ reason: 'csrf_token_mismatch' });
    expectError(await change(browser(session, 'A'.repeat(43))), 403, 'ACCESS_DENIED');
    const other = await signIn(suite.server, user.email);
    expectError(await change(browser({ ...session, csrfToken: other.csrfToken })), 403, 'ACCESS_DENIED');
    expect((await change(browser(session))).status).toBe(200);
    expect(
      (await suite.server.request('GET', '/v1/me/preferences', { headers: browser(session, false) })).body.theme,
    ).toBe('dark');
  });

  it('applies on /graphql too', async () => {
    const user = await newUser();
    const session = await signIn(suite.server, user.email);
    const mutation =
      'mutation($k: String!) { updateMyPreferences(idempotencyKey: $k, input: { theme: "light" }) { theme } }';
    const refused = await suite.server.graphql(mutation, { k: idempotencyKey() }, { headers: browser(session, false) });
    expect(refused.body.errors[0].extensions.code).toBe('ACCESS_DENIED');
    const accepted = await suite.server.graphql(mutation, { k: idempotencyKey() }, { headers: browser(session) });
    expect(accepted.body.data.updateMyPreferences.theme).toBe('light');
  });
});

describe('GET /v1/me/sessions and DELETE /v1/me/sessions/{id} (endpoint 10)', () => {
  it('lists the caller’s live sessions, marks the current one, and never shows a token', async () => {
    const user = await newUser();
    const first = await signIn(suite.server, user.email);
    const second = await signIn(suite.server, user.email);
    const list = await suite.server.request('GET', '/v1/me/sessions', { headers: browser(second, false) });
    expect(list.status).toBe(200);
    expect(list.body.data.map((s: { id: string; current: boolean }) => [s.id, s.current])).toEqual([
      [second.id, true],
      [first.id, false],
    ]);
    for (const item of list.body.data) SessionResponse.parse(item);
    for (const secret of [first.cookie, second.cookie, first.csrfToken, second.csrfToken])
      expect(list.text).not.toContain(secret.split('=').pop());
    const viaKey = await suite.server.request('GET', '/v1/me/sessions?limit=1', { token: user.apiKey });
    expect(viaKey.body).toMatchObject({ data: [{ id: second.id, current: false }], hasMore: true });
  });

  it('revokes the caller’s own session (sign out) at once; someone else’s session is 404', async () => {
    const user = await newUser();
    const other = await newUser();
    const mine = await signIn(suite.server, user.email);
    const theirs = await signIn(suite.server, other.email);
    const revoke = (id: string) =>
      suite.server.request('DELETE', `/v1/me/sessions/${id}`, {
        headers: browser(mine),
        idempotencyKey: idempotencyKey(),
      });
    expectError(await revoke(theirs.id), 404, 'RESOURCE_NOT_FOUND');
    expect((await suite.server.request('GET', '/v1/me/preferences', { headers: browser(theirs) })).status).toBe(200);
    const revoked = await revoke(mine.id);
    expect(revoked.status, revoked.text).toBe(200);
    expect(DeletionResponse.parse(revoked.body)).toEqual({ deleted: true, mutationId: expect.any(String) });
    const after = await suite.server.request('GET', '/v1/me/preferences', { headers: browser(mine) });
    expectError(after, 401, 'UNAUTHENTICATED');
    expect(after.headers.get('www-authenticate')).toMatch(/^Bearer realm=/);
  });

  it('a team key has no sessions: 403 PERSONAL_IDENTITY_REQUIRED', async () => {
    const teamKey = await createTeamKey(suite.server.prisma, suite.org, 'write');
    expectError(
      await suite.server.request('GET', '/v1/me/sessions', { token: teamKey }),
      403,
      'PERSONAL_IDENTITY_REQUIRED',
    );
    expectError(
      await suite.server.request('DELETE', '/v1/me/sessions/01J00000000000000000000000', {
        token: teamKey,
        idempotencyKey: idempotencyKey(),
      }),
      403,
      'PERSONAL_IDENTITY_REQUIRED',
    );
    expectError(
      await suite.server.request('POST', '/v1/me/two-factor', { token: teamKey, idempotencyKey: idempotencyKey() }),
      403,
      'PERSONAL_IDENTITY_REQUIRED',
    );
  });

  it('an expired session fails at once', async () => {
    const user = await newUser();
    const session = await signIn(suite.server, user.email);
    await suite.server.prisma.session.update({
      where: { id: session.id },
      data: { expiresAt: new Date(Date.now() - 1) },
    });
    expectError(
      await suite.server.request('GET', '/v1/me/preferences', { headers: browser(session) }),
      401,
      'UNAUTHENTICATED',
    );
    expectError(
      await suite.server.request('GET', '/v1/me/preferences', { headers: { cookie: '__Host-wds_session=garbage' } }),
      401,
      'UNAUTHENTICATED',
    );
  });
});

describe('two-factor (TOTP) and step-up', () => {
  it('enrols, confirms with a code, then login requires the code', async () => {
    const user = await newUser();
    const session = await signIn(suite.server, user.email);
    const enrolled = await suite.server.request('POST', '/v1/me/two-factor', {
      headers: browser(session),
      idempotencyKey: idempotencyKey(),
    });
    expect(enrolled.status, enrolled.text).toBe(201);
    const { secret } = EnrolmentResponse.parse(enrolled.body);
    expect(enrolled.body.otpauthUri).toContain(`secret=${secret}`);
    const confirm = (code: string) =>
      suite.server.request('POST', '/v1/me/two-factor/confirm', {
        headers: browser(session),
        idempotencyKey: idempotencyKey(),
        body: { code },
      });
    const valid = new Set([-1, 0, 1].map((steps) => currentTotp(secret!, steps)));
    const wrongCode = ['000000', '111111', '222222', '333333'].find((code) => !valid.has(code))!;
    expectError(await confirm(wrongCode), 422, 'VALIDATION_FAILED');
    expect((await confirm(currentTotp(secret!, -1))).body).toEqual({ twoFactorEnabled: true });
    const members = await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/members?limit=100`, {
      headers: browser(session),
    });
    expect(members.body.data.find((m: { userId: string }) => m.userId === user.userId).twoFactorEnabled).toBe(true);

    const withoutCode = await login({ email: user.email, password: 'a long test password' });
    expectError(withoutCode, 401, 'UNAUTHENTICATED');
    // The same answer as a wrong password: the password is not confirmed without the second factor (issue 19).
    expect(withoutCode.body.error.details).toBeUndefined();
    expectError(
      await login({ email: user.email, password: 'a long test password', totp: wrongCode }),
      401,
      'UNAUTHENTICATED',
    );
    const code = currentTotp(secret!);
    expect((await login({ email: user.email, password: 'a long test password', totp: code })).status).toBe(201);
    // A code is accepted once (RFC 6238 §5.2), and so is any earlier one.
    expectError(
      await login({ email: user.email, password: 'a long test password', totp: code }),
      401,
      'UNAUTHENTICATED',
    );
    expectError(
      await suite.server.request('POST', '/v1/me/two-factor', {
        headers: browser(session),
        idempotencyKey: idempotencyKey(),
      }),
      409,
      'TWO_FACTOR_ENABLED',
    );

    const disable = (code: string) =>
      suite.server.request('POST', '/v1/me/two-factor/disable', {
        headers: browser(session),
        idempotencyKey: idempotencyKey(),
        body: { code },
      });
    expectError(await disable(wrongCode), 422, 'VALIDATION_FAILED');
    expect((await disable(currentTotp(secret!, 1))).body).toEqual({ twoFactorEnabled: false });
    expect((await login({ email: user.email, password: 'a long test password' })).status).toBe(201);
  });

  it('creating keys and changing roles need a recent strong authentication (STEP_UP_REQUIRED), API keys do not', async () => {
    const org = await createOrg(suite.server.prisma);
    const email = await withPassword(suite.server, org.adminUserId);
    const target = await addMember(suite.server.prisma, org.orgId, 'member');
    const session = await signIn(suite.server, email);
    await suite.server.prisma.session.update({
      where: { id: session.id },
      data: { strongAuthAt: new Date(Date.now() - 3_600_000) },
    });
    const createKey = () =>
      suite.server.request('POST', '/v1/me/keys', {
        headers: browser(session),
        idempotencyKey: idempotencyKey(),
        body: { name: 'K', orgId: org.orgId, access: 'read' },
      });
    const demote = (version: string) =>
      suite.server.request('PATCH', `/v1/orgs/${org.orgId}/members/${target.memberId}`, {
        headers: browser(session),
        idempotencyKey: idempotencyKey(),
        body: { expectedVersion: version, role: 'viewer' },
      });
    expectError(await createKey(), 403, 'STEP_UP_REQUIRED');
    expectError(await demote('1'), 403, 'STEP_UP_REQUIRED');
    const stepUp = (password: string, headers = browser(session)) =>
      suite.server.request('POST', '/v1/auth/step-up', { headers, body: { password } });
    expectError(await stepUp('wrong password'), 401, 'UNAUTHENTICATED');
    expectError(await stepUp('a long test password', browser(session, false)), 403, 'ACCESS_DENIED');
    expectError(
      await suite.server.request('POST', '/v1/auth/step-up', {
        token: org.adminKey,
        body: { password: 'a long test password' },
      }),
      401,
      'UNAUTHENTICATED',
    );
    const fresh = await stepUp('a long test password');
    expect(fresh.status, fresh.text).toBe(200);
    expect(fresh.body).toEqual({ strongAuthAt: expect.any(String) });
    expect((await createKey()).status).toBe(201);
    expect((await demote('1')).status).toBe(200);
    // An API key carries no session, so no step-up applies.
    expect(
      (
        await suite.server.request('POST', '/v1/me/keys', {
          token: org.adminKey,
          idempotencyKey: idempotencyKey(),
          body: { name: 'K2', orgId: org.orgId, access: 'read' },
        })
      ).status,
    ).toBe(201);
  });
});

describe('lockout backoff (pure policy)', () => {
  it('locks from the threshold on, doubling per failure, capped', () => {
    const config = { LOGIN_LOCKOUT_THRESHOLD: 5, LOGIN_LOCKOUT_BASE_SECONDS: 30, LOGIN_LOCKOUT_MAX_SECONDS: 900 };
    expect([1, 4, 5, 6, 7, 9, 10, 50].map((failures) => lockDurationSeconds(failures, config))).toEqual([
      0, 0, 30, 60, 120, 480, 900, 900,
    ]);
  });
});
