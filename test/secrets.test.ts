import { createHash, randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerClient } from '../src/identity/oauth/clients.ts';
import { createOrg, idempotencyKey, type TestOrg } from './helpers/factories.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { browser, signIn, withPassword } from './helpers/sessions.ts';
import { checkedFetch } from './helpers/contract.ts';

/** Every log line the service writes, at the most verbose level, to search for secrets afterwards. */
const lines: string[] = [];
const capture = new Writable({
  write(chunk, _encoding, done) {
    lines.push(String(chunk));
    done();
  },
});

let server: TestServer;
let org: TestOrg;

beforeAll(async () => {
  server = await startTestServer({ LOG_LEVEL: 'trace' }, pino({ level: 'trace' }, capture));
  org = await createOrg(server.prisma);
});
afterAll(() => server.close());

describe('secrets never reach the logs', () => {
  it('keys, invitation tokens, passwords, session and CSRF tokens, TOTP secrets, OAuth codes, tokens and client secrets', async () => {
    const secrets: string[] = [];
    const key = await server.request('POST', '/v1/me/keys', {
      token: org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { name: 'K', orgId: org.orgId, access: 'read' },
    });
    const team = await server.request('POST', `/v1/orgs/${org.orgId}/keys`, {
      token: org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { name: 'T', access: 'read' },
    });
    const invitation = await server.request('POST', `/v1/orgs/${org.orgId}/invitations`, {
      token: org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { email: 'logs@example.com', role: 'member' },
    });
    const password = `pw-${randomBytes(12).toString('hex')}`;
    expect(
      (
        await server.request('POST', '/v1/invitations/accept', {
          idempotencyKey: idempotencyKey(),
          body: { token: invitation.body.token, name: 'Logs', password },
        })
      ).status,
    ).toBe(200);
    const session = await signIn(server, 'logs@example.com', password);
    await server.request('POST', '/v1/auth/login', {
      body: { email: 'logs@example.com', password: `${password}-wrong` },
    });
    const totp = await server.request('POST', '/v1/me/two-factor', {
      headers: browser(session),
      idempotencyKey: idempotencyKey(),
    });

    const email = await withPassword(server, org.adminUserId, password);
    const admin = await signIn(server, email, password);
    const { clientId, clientSecret } = await registerClient(server.prisma, {
      name: 'Logs',
      redirectUris: ['https://logs.example/cb'],
      confidential: true,
    });
    const verifier = randomBytes(32).toString('base64url');
    const consent = await checkedFetch(`${server.url}/oauth/authorize`, {
      method: 'POST',
      redirect: 'manual',
      headers: { ...browser(admin), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        response_type: 'code',
        client_id: clientId,
        redirect_uri: 'https://logs.example/cb',
        scope: 'org:read',
        code_challenge: createHash('sha256').update(verifier).digest('base64url'),
        code_challenge_method: 'S256',
        decision: 'approve',
      }).toString(),
    });
    const code = new URL(consent.headers.get('location')!).searchParams.get('code')!;
    const tokens = (await (
      await checkedFetch(`${server.url}/oauth/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`,
        },
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          code,
          redirect_uri: 'https://logs.example/cb',
          code_verifier: verifier,
        }).toString(),
      })
    ).json()) as { access_token: string; refresh_token: string };
    await server.request('GET', `/v1/orgs/${org.orgId}`, { token: tokens.access_token });

    secrets.push(
      org.adminKey,
      key.body.secret,
      team.body.secret,
      invitation.body.token,
      password,
      session.csrfToken,
      session.cookie.split('=')[1]!,
      totp.body.secret,
      code,
      verifier,
      tokens.access_token,
      tokens.refresh_token,
      clientSecret!,
    );
    const log = lines.join('');
    expect(lines.length).toBeGreaterThan(10);
    for (const secret of secrets) {
      expect(typeof secret).toBe('string');
      expect(log.includes(secret), `a secret starting ${secret.slice(0, 6)} is in the logs`).toBe(false);
    }
  });
});
