import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../src/idempotency/key.ts';
import { expectError } from './helpers/expectations.ts';
import { addMember, idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';

const suite = useServerWithOrg();

async function newUser() {
  return addMember(suite.server.prisma, suite.org.orgId, 'member');
}

const patch = (token: string, key: string | undefined, body: unknown) =>
  suite.server.request('PATCH', '/v1/me/preferences', {
    token,
    body,
    ...(key === undefined ? {} : { idempotencyKey: key }),
  });

describe('Idempotency-Key (DESIGN §4)', () => {
  it('replays the stored status and body for the same key and payload, without a second effect', async () => {
    const user = await newUser();
    const key = idempotencyKey();
    const first = await patch(user.apiKey, key, { theme: 'dark' });
    const changedMeanwhile = await patch(user.apiKey, idempotencyKey(), { theme: 'light' });
    expect(changedMeanwhile.body.theme).toBe('light');

    const replay = await patch(user.apiKey, key, { theme: 'dark' });
    expect(replay.status).toBe(first.status);
    expect(replay.text).toBe(first.text);
    // The replay did not write: the later change stands.
    expect((await suite.server.request('GET', '/v1/me/preferences', { token: user.apiKey })).body.theme).toBe('light');
  });

  it('treats key order and whitespace in the body as the same payload', async () => {
    const user = await newUser();
    const key = idempotencyKey();
    const first = await suite.server.request('PATCH', '/v1/me/preferences', {
      token: user.apiKey,
      idempotencyKey: key,
      rawBody: '{"theme":"dark","locale":"de-DE"}',
    });
    const replay = await suite.server.request('PATCH', '/v1/me/preferences', {
      token: user.apiKey,
      idempotencyKey: key,
      rawBody: '{ "locale": "de-DE",\n "theme": "dark" }',
    });
    expect(replay.status).toBe(200);
    expect(replay.text).toBe(first.text);
  });

  it('answers 409 IDEMPOTENCY_CONFLICT when the same key comes with a different body, and changes nothing', async () => {
    const user = await newUser();
    const key = idempotencyKey();
    await patch(user.apiKey, key, { theme: 'dark' });
    const conflict = await patch(user.apiKey, key, { theme: 'light' });
    expectError(conflict, 409, 'IDEMPOTENCY_CONFLICT');
    expect((await suite.server.request('GET', '/v1/me/preferences', { token: user.apiKey })).body.theme).toBe('dark');
  });

  it('binds the key to the operation and target as well as the body', async () => {
    const key = idempotencyKey();
    const version = (await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: suite.org.adminKey }))
      .body.version;
    const renamed = await suite.server.request('PATCH', `/v1/orgs/${suite.org.orgId}`, {
      token: suite.org.adminKey,
      idempotencyKey: key,
      body: { expectedVersion: version, name: 'Same key' },
    });
    expect(renamed.status).toBe(200);
    expectError(await patch(suite.org.adminKey, key, { theme: 'dark' }), 409, 'IDEMPOTENCY_CONFLICT');
  });

  it('scopes keys to the actor: two users may use the same key independently', async () => {
    const [a, b] = [await newUser(), await newUser()];
    const key = idempotencyKey();
    expect((await patch(a.apiKey, key, { theme: 'dark' })).status).toBe(200);
    const other = await patch(b.apiKey, key, { theme: 'light' });
    expect(other.status).toBe(200);
    expect(other.body.theme).toBe('light');
  });

  it('lets concurrent duplicates produce exactly one effect; the rest replay or are told to retry', async () => {
    const user = await newUser();
    const key = idempotencyKey();
    const responses = await Promise.all(
      Array.from({ length: 12 }, () => patch(user.apiKey, key, { timezone: 'Asia/Tokyo' })),
    );
    for (const response of responses) {
      if (response.status === 200) {
        expect(response.body.timezone).toBe('Asia/Tokyo');
      } else {
        expectError(response, 409, 'IDEMPOTENCY_IN_PROGRESS');
        expect(response.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
      }
    }
    expect(responses.some((response) => response.status === 200)).toBe(true);
    const stored = await suite.server.prisma.preference.findUniqueOrThrow({ where: { userId: user.userId } });
    expect(stored.version).toBe(1n);
    expect(await suite.server.prisma.idempotencyRecord.count({ where: { key } })).toBe(1);
  });

  it('records an expected failure and replays it identically', async () => {
    const key = idempotencyKey();
    const body = { expectedVersion: '424242', name: 'Stale' };
    const first = await suite.server.request('PATCH', `/v1/orgs/${suite.org.orgId}`, {
      token: suite.org.adminKey,
      idempotencyKey: key,
      body,
    });
    expectError(first, 409, 'ROW_VERSION_CONFLICT');
    const replay = await suite.server.request('PATCH', `/v1/orgs/${suite.org.orgId}`, {
      token: suite.org.adminKey,
      idempotencyKey: key,
      body,
    });
    expect(replay.status).toBe(409);
    expect(replay.body.error).toEqual({ ...first.body.error, requestId: replay.headers.get('x-request-id') });
  });

  it('does not consume the key when the request fails validation', async () => {
    const user = await newUser();
    const key = idempotencyKey();
    expectError(await patch(user.apiKey, key, { theme: 'neon' }), 422, 'VALIDATION_FAILED');
    expect((await patch(user.apiKey, key, { theme: 'dark' })).status).toBe(200);
  });

  it.each([
    ['missing', undefined],
    ['too short (7)', '1234567'],
    ['too long (256)', 'k'.repeat(256)],
    ['not visible ASCII', 'key with spaces'],
  ])('answers 400 BAD_REQUEST when the key is %s, and changes nothing', async (_name, key) => {
    const user = await newUser();
    const response = await patch(user.apiKey, key, { theme: 'dark' });
    expectError(response, 400, 'BAD_REQUEST');
    expect((await suite.server.request('GET', '/v1/me/preferences', { token: user.apiKey })).body.theme).toBe('system');
  });

  it('accepts keys of exactly 8 and 255 characters', async () => {
    const user = await newUser();
    expect((await patch(user.apiKey, 'k'.repeat(8), { theme: 'dark' })).status).toBe(200);
    expect((await patch(user.apiKey, 'k'.repeat(255), { theme: 'light' })).status).toBe(200);
  });

  it('is shared with GraphQL: the same key and input replay across both', async () => {
    const user = await newUser();
    const key = idempotencyKey();
    const rest = await patch(user.apiKey, key, { theme: 'dark' });
    await patch(user.apiKey, idempotencyKey(), { theme: 'light' });
    const graph = await suite.server.graphql(
      'mutation($key: String!) { updateMyPreferences(idempotencyKey: $key, input: { theme: "dark" }) { theme timezone } }',
      { key },
      { token: user.apiKey },
    );
    expect(graph.body.data.updateMyPreferences).toEqual({ theme: rest.body.theme, timezone: rest.body.timezone });
    const conflict = await suite.server.graphql(
      'mutation($key: String!) { updateMyPreferences(idempotencyKey: $key, input: { theme: "system" }) { theme } }',
      { key },
      { token: user.apiKey },
    );
    expect(conflict.body.errors[0].extensions.code).toBe('IDEMPOTENCY_CONFLICT');
  });

  it('keeps records for at least 24 hours', async () => {
    const user = await newUser();
    const key = idempotencyKey();
    await patch(user.apiKey, key, { theme: 'dark' });
    const record = await suite.server.prisma.idempotencyRecord.findFirstOrThrow({ where: { key } });
    expect(record.expiresAt.getTime() - record.createdAt.getTime()).toBeGreaterThanOrEqual(24 * 3_600_000);
  });
});

describe('canonicalJson', () => {
  it('sorts keys at every depth and drops undefined members', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: undefined } })).toBe(
      '{"a":{"d":[1,{"y":2,"z":1}]},"b":1}',
    );
  });
});
