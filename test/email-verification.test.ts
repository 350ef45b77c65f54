import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { text } from 'node:stream/consumers';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/kernel/config.ts';
import { expectError } from './helpers/expectations.ts';
import { createOrg, createTeamKey, idempotencyKey, type TestOrg } from './helpers/factories.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { browser, signIn } from './helpers/sessions.ts';

/** The deployment's mailer, as the delivery hook sees it: records each message; can refuse or never answer. */
interface HookReceiver {
  url: string;
  messages: Record<string, any>[];
  mode: 'accept' | 'refuse' | 'hang';
  close(): Promise<void>;
}

async function startReceiver(): Promise<HookReceiver> {
  const receiver = { messages: [], mode: 'accept' } as unknown as HookReceiver;
  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const body = await text(req);
    if (receiver.mode === 'hang') return;
    if (receiver.mode === 'refuse') {
      res.writeHead(500).end();
      return;
    }
    receiver.messages.push({ contentType: req.headers['content-type'], method: req.method, ...JSON.parse(body) });
    res.writeHead(204).end();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/deliver`;
  receiver.close = async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  };
  return receiver;
}

let hook: HookReceiver;
/** The service with DELIVERY_WEBHOOK_URL pointing at `hook`. */
let hooked: TestServer;
/** The service without a delivery hook (today's default). */
let plain: TestServer;
let org: TestOrg;

beforeAll(async () => {
  hook = await startReceiver();
  hooked = await startTestServer({ DELIVERY_WEBHOOK_URL: hook.url, DELIVERY_TIMEOUT_MS: '500' });
  plain = await startTestServer();
  org = await createOrg(hooked.prisma);
});
afterAll(async () => {
  await hooked.close();
  await plain.close();
  await hook.close();
});

let counter = 0;
const address = () => `mailbox-${Date.now()}-${(counter += 1)}@example.com`;
const PASSWORD = 'correct horse battery staple';

function invite(server: TestServer, target: TestOrg, email: string, key = idempotencyKey()) {
  return server.request('POST', `/v1/orgs/${target.orgId}/invitations`, {
    token: target.adminKey,
    idempotencyKey: key,
    body: { email, role: 'member' },
  });
}

function requestVerification(headers: Record<string, string>, key = idempotencyKey()) {
  return hooked.request('POST', '/v1/me/email-verification', { headers, idempotencyKey: key });
}

function verify(server: TestServer, token: unknown) {
  return server.request('POST', '/v1/auth/verify-email', { body: { token } });
}

/** An account created by accepting an invitation delivered through the hook, signed in. */
async function invitedAccount() {
  hook.mode = 'accept';
  const email = address();
  const created = await invite(hooked, org, email);
  expect(created.status, created.text).toBe(201);
  const { token } = hook.messages.at(-1)!;
  const joined = await hooked.request('POST', '/v1/invitations/accept', {
    idempotencyKey: idempotencyKey(),
    body: { token, name: 'Invited Person', password: PASSWORD },
  });
  expect(joined.status, joined.text).toBe(200);
  expect(joined.body.verified).toBe(false);
  return { email, userId: joined.body.userId as string, session: await signIn(hooked, email, PASSWORD) };
}

describe('the delivery hook carries invitation tokens', () => {
  it('the inviter gets token: null; the hook gets the token, which the invitee accepts with', async () => {
    hook.mode = 'accept';
    const email = address();
    const key = idempotencyKey();
    const before = hook.messages.length;
    const created = await invite(hooked, org, email, key);
    expect(created.status, created.text).toBe(201);
    expect(created.body.token).toBeNull();
    expect(created.headers.get('cache-control')).toBe('no-store');
    const { invitation } = created.body;
    expect(hook.messages.slice(before)).toEqual([
      {
        contentType: 'application/json',
        method: 'POST',
        kind: 'invitation',
        email,
        token: expect.stringMatching(/^wdsi_[A-Za-z0-9_-]{43}$/),
        expiresAt: invitation.expiresAt,
        invitationId: invitation.id,
        orgId: org.orgId,
        orgName: expect.any(String),
        role: 'member',
        invitedByUserId: org.adminUserId,
      },
    ]);
    const replay = await invite(hooked, org, email, key);
    expect({ status: replay.status, body: replay.body }).toEqual({ status: 201, body: { invitation, token: null } });
    expect(hook.messages.length).toBe(before + 1);

    const joined = await hooked.request('POST', '/v1/invitations/accept', {
      idempotencyKey: idempotencyKey(),
      body: { token: hook.messages.at(-1)!.token, name: 'Invitee', password: PASSWORD },
    });
    expect(joined.status, joined.text).toBe(200);
    expect(joined.body).toMatchObject({ orgId: org.orgId, email, role: 'member', verified: false });
  });

  it.each(['refuse', 'hang'] as const)(
    'a hook that %ss: 502 DEPENDENCY_UNAVAILABLE and no invitation; the same key succeeds later',
    async (mode) => {
      const email = address();
      const key = idempotencyKey();
      hook.mode = mode;
      expectError(await invite(hooked, org, email, key), 502, 'DEPENDENCY_UNAVAILABLE');
      expect(await hooked.prisma.invitation.count({ where: { email } })).toBe(0);
      hook.mode = 'accept';
      const retried = await invite(hooked, org, email, key);
      expect(retried.status, retried.text).toBe(201);
      expect(retried.body.token).toBeNull();
      expect(await hooked.prisma.invitation.count({ where: { email } })).toBe(1);
    },
  );

  it('without a hook, the token is in the creating answer once (unchanged)', async () => {
    const other = await createOrg(plain.prisma);
    const created = await invite(plain, other, address());
    expect(created.status, created.text).toBe(201);
    expect(created.body.token).toMatch(/^wdsi_[A-Za-z0-9_-]{43}$/);
    expect(created.headers.get('cache-control')).toBe('no-store');
  });

  it('DELIVERY_WEBHOOK_URL must be an http(s) URL', () => {
    expect(() => loadConfig({}, { DELIVERY_WEBHOOK_URL: 'ftp://mail.example/hook' })).toThrow(
      /DELIVERY_WEBHOOK_URL: must be an http\(s\) URL/,
    );
    expect(loadConfig({}, {}).DELIVERY_WEBHOOK_URL).toBeUndefined();
  });
});

describe('proving a mailbox', () => {
  it('the token goes only to the hook; spending it verifies the account once', async () => {
    const account = await invitedAccount();
    const key = idempotencyKey();
    const before = hook.messages.length;
    const requested = await requestVerification(browser(account.session), key);
    expect(requested.status, requested.text).toBe(202);
    expect(requested.body).toEqual({ email: account.email, verified: false, expiresAt: expect.any(String) });
    const sent = hook.messages.slice(before);
    expect(sent).toEqual([
      {
        contentType: 'application/json',
        method: 'POST',
        kind: 'email-verification',
        email: account.email,
        token: expect.stringMatching(/^wdsv_[A-Za-z0-9_-]{43}$/),
        expiresAt: requested.body.expiresAt,
        userId: account.userId,
      },
    ]);
    expect(requested.text).not.toContain(sent[0]!.token);
    const stored = await hooked.prisma.emailVerification.findFirstOrThrow({ where: { userId: account.userId } });
    expect(stored.tokenHash).not.toContain(sent[0]!.token);
    const hoursValid = (new Date(requested.body.expiresAt).getTime() - stored.createdAt.getTime()) / 3_600_000;
    expect(Math.round(hoursValid)).toBe(24);

    const replay = await requestVerification(browser(account.session), key);
    expect({ status: replay.status, body: replay.body }).toEqual({ status: 202, body: requested.body });
    expect(hook.messages.length).toBe(before + 1);

    const verified = await verify(hooked, sent[0]!.token);
    expect({ status: verified.status, body: verified.body }).toEqual({
      status: 200,
      body: { email: account.email, verified: true },
    });
    const members = await hooked.request('GET', `/v1/orgs/${org.orgId}/members?limit=100`, { token: org.adminKey });
    expect(members.body.data.find((member: { userId: string }) => member.userId === account.userId)).toMatchObject({
      verified: true,
    });
    expectError(await verify(hooked, sent[0]!.token), 404, 'RESOURCE_NOT_FOUND');

    const again = await requestVerification(browser(account.session));
    expect({ status: again.status, body: again.body }).toEqual({
      status: 202,
      body: { email: account.email, verified: true, expiresAt: null },
    });
    expect(hook.messages.length).toBe(before + 1);
  });

  it('unknown, malformed, expired and superseded tokens change nothing', async () => {
    const account = await invitedAccount();
    expectError(await verify(hooked, `wdsv_${'A'.repeat(43)}`), 404, 'RESOURCE_NOT_FOUND');
    expectError(await verify(hooked, 'wdsi_not-a-verification-token'), 422, 'VALIDATION_FAILED');
    expectError(
      await hooked.request('POST', '/v1/auth/verify-email', { body: { token: `wdsv_${'A'.repeat(43)}`, extra: 1 } }),
      422,
      'VALIDATION_FAILED',
    );

    expect((await requestVerification(browser(account.session))).status).toBe(202);
    const first = hook.messages.at(-1)!.token;
    expect((await requestVerification(browser(account.session))).status).toBe(202);
    const second = hook.messages.at(-1)!.token;
    expectError(await verify(hooked, first), 404, 'RESOURCE_NOT_FOUND');

    await hooked.prisma.emailVerification.updateMany({
      where: { userId: account.userId },
      data: { expiresAt: new Date(Date.now() - 1) },
    });
    expectError(await verify(hooked, second), 404, 'RESOURCE_NOT_FOUND');
    const user = await hooked.prisma.user.findUniqueOrThrow({ where: { id: account.userId } });
    expect(user.verified).toBe(false);
    expect(
      await hooked.prisma.emailVerification.count({ where: { userId: account.userId, usedAt: { not: null } } }),
    ).toBe(0);
  });

  it('a token proves the address it was sent to, not the account', async () => {
    const account = await invitedAccount();
    expect((await requestVerification(browser(account.session))).status).toBe(202);
    const { token } = hook.messages.at(-1)!;
    await hooked.prisma.user.update({ where: { id: account.userId }, data: { email: `moved-${account.email}` } });
    expectError(await verify(hooked, token), 404, 'RESOURCE_NOT_FOUND');
    expect((await hooked.prisma.user.findUniqueOrThrow({ where: { id: account.userId } })).verified).toBe(false);
  });

  it('a failing hook: 502 and no token stored', async () => {
    const account = await invitedAccount();
    hook.mode = 'refuse';
    expectError(await requestVerification(browser(account.session)), 502, 'DEPENDENCY_UNAVAILABLE');
    hook.mode = 'accept';
    expect(await hooked.prisma.emailVerification.count({ where: { userId: account.userId } })).toBe(0);
  });

  it('needs a personal identity; without a hook it is 503 CONFIGURATION_INVALID', async () => {
    expectError(
      await hooked.request('POST', '/v1/me/email-verification', { idempotencyKey: idempotencyKey() }),
      401,
      'UNAUTHENTICATED',
    );
    expectError(
      await requestVerification({ authorization: `Bearer ${await createTeamKey(hooked.prisma, org)}` }),
      403,
      'PERSONAL_IDENTITY_REQUIRED',
    );
    const other = await createOrg(plain.prisma);
    expectError(
      await plain.request('POST', '/v1/me/email-verification', {
        token: other.adminKey,
        idempotencyKey: idempotencyKey(),
      }),
      503,
      'CONFIGURATION_INVALID',
    );
  });
});

describe('cli issue-email-verification', () => {
  const run = promisify(execFile);
  async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    try {
      // What `npm run -s cli` execs (test/cli.test.ts proves that wiring); npm itself costs ~0.5 s of CPU a call.
      const { stdout, stderr } = await run(process.execPath, ['dist/cli.js', ...args], {
        env: { ...process.env, DATABASE_URL: plain.database.url, LOG_LEVEL: 'warn' },
      });
      return { code: 0, stdout, stderr };
    } catch (error) {
      const failed = error as { code: number; stdout: string; stderr: string };
      return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
    }
  }

  it('prints a token that verifies the account; add-user then needs no --accept-unverified', async () => {
    const inviting = await createOrg(plain.prisma);
    const target = await createOrg(plain.prisma);
    const email = address();
    const { token: invitation } = (await invite(plain, inviting, email)).body;
    expect(
      (
        await plain.request('POST', '/v1/invitations/accept', {
          idempotencyKey: idempotencyKey(),
          body: { token: invitation, name: 'Chosen By Someone', password: PASSWORD },
        })
      ).status,
    ).toBe(200);
    const addUser = ['add-user', '--org', target.orgId, '--email', email, '--name', 'Owner', '--role', 'member'];
    const refused = await cli(addUser);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/--accept-unverified/);

    const issued = await cli(['issue-email-verification', '--email', email.toUpperCase()]);
    expect(issued.code, issued.stderr).toBe(0);
    const printed = JSON.parse(issued.stdout.trim());
    expect(printed).toEqual({
      userId: expect.any(String),
      email,
      token: expect.stringMatching(/^wdsv_[A-Za-z0-9_-]{43}$/),
      expiresAt: expect.any(String),
    });
    const verified = await verify(plain, printed.token);
    expect({ status: verified.status, body: verified.body }).toEqual({ status: 200, body: { email, verified: true } });

    const added = await cli(addUser);
    expect(added.code, added.stderr).toBe(0);
    expect(JSON.parse(added.stdout.trim())).toMatchObject({ userId: printed.userId });
    const again = await cli(['issue-email-verification', '--email', email]);
    expect({ code: again.code, stderr: again.stderr.trim() }).toEqual({
      code: 1,
      stderr: `${email} is already verified.`,
    });
    const unknown = await cli(['issue-email-verification', '--email', address()]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^No user with e-mail /);
  });
});
