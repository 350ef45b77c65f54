import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UNSEALED_SECRETS_WARNING } from '../src/bin/runtime.ts';
import { createOrg, idempotencyKey, type TestOrg } from './helpers/factories.ts';
import { expectError } from './helpers/expectations.ts';
import { oauthTokens } from './helpers/oauth.ts';
import { logged, startApiProcess } from './helpers/processes.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { signIn, withPassword } from './helpers/sessions.ts';
import { createRow, createTable } from './helpers/workspace.ts';

/**
 * Issues 46 and 48: who may point a webhook at the org's rows, where a webhook may point (names resolved at creation,
 * IPv6 forms of IPv4 addresses, ports), how often test and replay may run, and what the operator is told in the log.
 * The server allows no private network and no http:, port 8443 besides 443, and two tests or replays a minute.
 */
const lines: string[] = [];
const capture = new Writable({
  write(chunk, _encoding, done) {
    lines.push(String(chunk));
    done();
  },
});
const ACTIONS_PER_MINUTE = 2;
let server: TestServer;
let org: TestOrg;

beforeAll(async () => {
  server = await startTestServer(
    {
      WEBHOOK_ALLOWED_PORTS: '8443',
      WEBHOOK_ACTIONS_PER_MINUTE: String(ACTIONS_PER_MINUTE),
      WEBHOOK_RETRY_SCHEDULE: '100ms',
      WEBHOOK_TIMEOUT_MS: '1000',
    },
    pino({ level: 'warn' }, capture),
  );
  org = await createOrg(server.prisma);
});
afterAll(() => server?.close());

const UNTIL = { timeout: 15_000, interval: 50 };
const hooks = (target = org) => `/v1/orgs/${target.orgId}/webhooks`;

function create(url: string, token = org.adminKey, target = org) {
  return server.request('POST', hooks(target), {
    token,
    idempotencyKey: idempotencyKey(),
    body: { url, events: ['*'] },
  });
}

async function created(url = 'https://hooks.example.com/in', target = org) {
  const response = await create(url, target.adminKey, target);
  expect(response.status, response.text).toBe(201);
  return response.body as { id: string; version: string; url: string };
}

function post(path: string, token: string, body?: Record<string, unknown>) {
  return server.request('POST', path, { token, idempotencyKey: idempotencyKey(), ...(body ? { body } : {}) });
}

async function attemptsOf(webhookId: string, target = org) {
  const response = await server.request('GET', `${hooks(target)}/${webhookId}/deliveries?limit=100`, {
    token: target.adminKey,
  });
  expect(response.status, response.text).toBe(200);
  return response.body.data as { messageId: string; succeeded: boolean; error: string | null }[];
}

const problemOf = (response: { body: any }) => response.body.error.details.problems[0];

describe('a token that manages the org but may not read rows (issue 48)', () => {
  let manager: string;
  let reader: string;

  beforeAll(async () => {
    const session = await signIn(server, await withPassword(server, org.adminUserId));
    manager = (await oauthTokens(server, session, 'org:manage')).access_token;
    reader = (await oauthTokens(server, session, 'org:manage rows:read')).access_token;
  });

  function expectScopeRefusal(response: Awaited<ReturnType<typeof create>>) {
    expectError(response, 403, 'INSUFFICIENT_SCOPE');
    expect(response.body.error.details).toEqual({ requiredScope: 'rows:read' });
    expect(response.headers.get('www-authenticate')).toMatch(/error="insufficient_scope", scope="rows:read"/);
  }

  it('cannot create a webhook: 403 INSUFFICIENT_SCOPE, and none is created', async () => {
    const before = await server.request('GET', `${hooks()}?limit=100`, { token: org.adminKey });
    expectScopeRefusal(await create('https://hooks.example.com/by-manager', manager));
    const after = await server.request('GET', `${hooks()}?limit=100`, { token: org.adminKey });
    expect(after.body.data).toEqual(before.body.data);
  });

  it('cannot change a webhook: 403 INSUFFICIENT_SCOPE, and it keeps its URL', async () => {
    const webhook = await created();
    const patch = await server.request('PATCH', `${hooks()}/${webhook.id}`, {
      token: manager,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: webhook.version, url: 'https://elsewhere.example.com/in' },
    });
    expectScopeRefusal(patch);
    const now = await server.request('GET', `${hooks()}/${webhook.id}`, { token: org.adminKey });
    expect(now.body).toMatchObject({ url: webhook.url, version: webhook.version });
  });

  it('cannot replay a webhook: 403 INSUFFICIENT_SCOPE, and its place does not move', async () => {
    const webhook = await created();
    const generation = () =>
      server.prisma.$queryRawUnsafe<{ generation: bigint }[]>(
        'SELECT generation FROM webhooks WHERE id = $1::bpchar',
        webhook.id,
      );
    const before = await generation();
    expectScopeRefusal(await post(`${hooks()}/${webhook.id}/replay`, manager, {}));
    expect(await generation()).toEqual(before);
  });

  it('cannot test a webhook: 403 INSUFFICIENT_SCOPE, and no message is queued or sent', async () => {
    const target = await createOrg(server.prisma);
    const session = await signIn(server, await withPassword(server, target.adminUserId));
    const webhook = await created('https://hooks.example.com/in', target);
    const managerOfTarget = (await oauthTokens(server, session, 'org:manage')).access_token;
    expectScopeRefusal(await post(`${hooks(target)}/${webhook.id}/test`, managerOfTarget));
    // Queued messages are sent in order: once the admin's own test was attempted, a refused one would have been too.
    const accepted = await post(`${hooks(target)}/${webhook.id}/test`, target.adminKey);
    expect(accepted.status, accepted.text).toBe(202);
    await expect.poll(async () => (await attemptsOf(webhook.id, target)).length, UNTIL).toBeGreaterThan(0);
    expect((await attemptsOf(webhook.id, target)).map((attempt) => attempt.messageId)).toEqual([
      accepted.body.messageId,
    ]);
  });

  it('may create, test and replay a webhook with rows:read as well', async () => {
    const response = await create('https://hooks.example.com/by-reader', reader);
    expect(response.status, response.text).toBe(201);
    expect((await post(`${hooks()}/${response.body.id}/replay`, reader, {})).status).toBe(202);
  });
});

describe('where a webhook may point (issues 46 and 48)', () => {
  it.each([
    ['IPv4-compatible loopback', 'https://[::127.0.0.1]/hook', 'loopback'],
    ['IPv4-compatible private', 'https://[::10.0.0.1]/hook', 'private (RFC 1918)'],
    ['IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]/hook', 'loopback'],
    ['NAT64 loopback', 'https://[64:ff9b::127.0.0.1]/hook', 'reserved'],
  ])('refuses a URL naming an %s address with 422, naming the setting that allows it', async (_name, url, range) => {
    const response = await create(url);
    expectError(response, 422, 'VALIDATION_FAILED');
    expect(response.body.error.details.problems).toEqual([
      { path: ['url'], message: `must not name a ${range} address (WEBHOOK_ALLOWED_NETWORKS can allow its network)` },
    ]);
  });

  it('refuses a name that resolves to loopback at creation, as it refuses 127.0.0.1, naming the setting', async () => {
    const response = await create('https://localhost/hook');
    expectError(response, 422, 'VALIDATION_FAILED');
    expect(problemOf(response).path).toEqual(['url']);
    expect(problemOf(response).message).toMatch(
      /^localhost resolves to (127\.0\.0\.1|::1), a loopback address webhooks may not reach \(WEBHOOK_ALLOWED_NETWORKS can allow its network\)$/,
    );
  });

  it('refuses a name that resolves to loopback on PATCH, and keeps the URL', async () => {
    const webhook = await created();
    const response = await server.request('PATCH', `${hooks()}/${webhook.id}`, {
      token: org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: webhook.version, url: 'https://localhost:8443/hook' },
    });
    expectError(response, 422, 'VALIDATION_FAILED');
    expect(problemOf(response).message).toMatch(/^localhost resolves to/);
    const now = await server.request('GET', `${hooks()}/${webhook.id}`, { token: org.adminKey });
    expect(now.body.url).toBe(webhook.url);
  });

  it('names WEBHOOK_ALLOW_HTTP when it refuses http:', async () => {
    const response = await create('http://hooks.example.com/in');
    expectError(response, 422, 'VALIDATION_FAILED');
    expect(problemOf(response).message).toBe('must be an https: URL (WEBHOOK_ALLOW_HTTP=true allows http:)');
  });

  it('accepts a name that does not resolve (the worker checks each address it connects to)', async () => {
    expect((await create('https://hooks.invalid/in')).status).toBe(201);
  });

  it.each([
    ['SSH', 'https://hooks.example.com:22/in', 22],
    ['a database', 'https://203.0.114.9:5432/in', 5432],
    ['80 without WEBHOOK_ALLOW_HTTP', 'https://hooks.example.com:80/in', 80],
  ])('refuses a port other than 443 and WEBHOOK_ALLOWED_PORTS (%s) with 422', async (_name, url, port) => {
    const response = await create(url);
    expectError(response, 422, 'VALIDATION_FAILED');
    expect(response.body.error.details.problems).toEqual([
      { path: ['url'], message: `port ${port} is not allowed (443; WEBHOOK_ALLOWED_PORTS can add it)` },
    ]);
  });

  it('accepts 443 written out and a port of WEBHOOK_ALLOWED_PORTS', async () => {
    expect((await create('https://hooks.example.com:443/in')).status).toBe(201);
    expect((await create('https://hooks.example.com:8443/in')).status).toBe(201);
  });

  it('refuses a port at connect time too, and logs the failed attempt at warn', async () => {
    const target = await createOrg(server.prisma);
    const webhook = await created('https://hooks.example.com/in', target);
    // As if the URL had been saved under other settings: the worker applies the rule as it stands when it sends.
    await server.prisma.$executeRawUnsafe(
      'UPDATE webhooks SET url = $1 WHERE id = $2::bpchar',
      'https://1.1.1.1:22/in',
      webhook.id,
    );
    const queued = await post(`${hooks(target)}/${webhook.id}/test`, target.adminKey);
    expect(queued.status, queued.text).toBe(202);
    await expect.poll(async () => (await attemptsOf(webhook.id, target)).length, UNTIL).toBe(1);
    expect((await attemptsOf(webhook.id, target))[0]).toMatchObject({
      succeeded: false,
      error: '1.1.1.1: port 22 is not allowed (443; WEBHOOK_ALLOWED_PORTS can add it)',
    });
    const warned = () =>
      lines
        .map((line) => JSON.parse(line))
        .filter((entry) => entry.msg === 'webhook attempt failed' && entry.webhookId === webhook.id);
    await expect.poll(() => warned().length, UNTIL).toBe(1);
    expect(warned()[0]).toMatchObject({ level: 40, messageId: queued.body.messageId, attempt: 1 });
  });
});

describe('a failed change message (issue 46)', () => {
  it('is logged at warn with its attempt', async () => {
    const target = await createOrg(server.prisma);
    const table = await createTable(server, target, [{ name: 'Name', type: 'text' }]);
    const webhook = await created('https://hooks.example.com/in', target);
    await server.prisma.$executeRawUnsafe(
      'UPDATE webhooks SET url = $1 WHERE id = $2::bpchar',
      'https://1.1.1.1:22/in',
      webhook.id,
    );
    await createRow(server, target.adminKey, table, { Name: 'a' });
    const warned = () =>
      lines
        .map((line) => JSON.parse(line))
        .filter((entry) => entry.msg === 'webhook attempt failed' && entry.webhookId === webhook.id);
    await expect.poll(() => warned().length, UNTIL).toBeGreaterThan(0);
    expect(warned()[0]).toMatchObject({
      level: 40,
      attempt: 1,
      error: '1.1.1.1: port 22 is not allowed (443; WEBHOOK_ALLOWED_PORTS can add it)',
    });
  });
});

describe('test and replay are rate-limited per org (issue 48)', () => {
  it(`answers 429 RATE_LIMITED with Retry-After past ${ACTIONS_PER_MINUTE} a minute, tests and replays together`, async () => {
    const target = await createOrg(server.prisma);
    const webhook = await created('https://hooks.example.com/in', target);
    const path = `${hooks(target)}/${webhook.id}`;
    const first = await post(`${path}/test`, target.adminKey);
    expect(first.status, first.text).toBe(202);
    expect((await post(`${path}/replay`, target.adminKey, {})).status).toBe(202);
    for (const refused of [
      await post(`${path}/test`, target.adminKey),
      await post(`${path}/replay`, target.adminKey, {}),
    ]) {
      expectError(refused, 429, 'RATE_LIMITED');
      expect(refused.body.error.details).toEqual({ limit: 'webhook-actions', scope: 'org', max: ACTIONS_PER_MINUTE });
      const retryAfter = Number(refused.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
    }
    // Another org has its own allowance.
    const other = await createOrg(server.prisma);
    const elsewhere = await created('https://hooks.example.com/in', other);
    expect((await post(`${hooks(other)}/${elsewhere.id}/replay`, other.adminKey, {})).status).toBe(202);
  });

  it('answers a repeated Idempotency-Key from its record without counting it', async () => {
    const target = await createOrg(server.prisma);
    const webhook = await created('https://hooks.example.com/in', target);
    const key = idempotencyKey();
    const send = () =>
      server.request('POST', `${hooks(target)}/${webhook.id}/test`, { token: target.adminKey, idempotencyKey: key });
    const first = await send();
    expect(first.status, first.text).toBe(202);
    for (let i = 0; i < ACTIONS_PER_MINUTE + 1; i++) expect((await send()).body).toEqual(first.body);
  });
});

describe('start-up warning (issue 46)', () => {
  it('npm start with NODE_ENV=production and no WEBHOOK_SECRET_KEY logs a warning naming it; with the key, none', async () => {
    const [unset, set] = await Promise.all([
      startApiProcess(server.database, server.prisma, { LOG_LEVEL: 'info' }),
      startApiProcess(server.database, server.prisma, {
        LOG_LEVEL: 'info',
        WEBHOOK_SECRET_KEY: randomBytes(32).toString('base64'),
      }),
    ]);
    try {
      // Logged before `listening`: once a process logged that, its warning (or none) is in its lines.
      await expect.poll(() => logged(unset, 'listening').length + logged(set, 'listening').length, UNTIL).toBe(2);
      expect(logged(unset, UNSEALED_SECRETS_WARNING)).toEqual([
        expect.objectContaining({ level: 40, setting: 'WEBHOOK_SECRET_KEY' }),
      ]);
      expect(logged(set, UNSEALED_SECRETS_WARNING)).toEqual([]);
    } finally {
      await Promise.all([unset.stop(), set.stop()]);
    }
  }, 120_000);
});
