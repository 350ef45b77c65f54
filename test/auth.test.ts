import { describe, expect, it } from 'vitest';
import { expectError } from './helpers/expectations.ts';
import { addMember, createOrg, createTeamKey, idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';

const suite = useServerWithOrg();

const INVALID_TOKEN_CHALLENGE = /^Bearer realm="workspace-data-service", error="invalid_token"/;

async function keyIdOf(token: string): Promise<string> {
  const prefix = token.slice('wds_'.length, 'wds_'.length + 12);
  return (await suite.server.prisma.apiKey.findUniqueOrThrow({ where: { prefix } })).id;
}

describe('401 UNAUTHENTICATED with WWW-Authenticate', () => {
  it('for a missing credential (bare challenge, RFC 6750 §3.1)', async () => {
    const response = await suite.server.request('GET', '/v1/me/preferences');
    expectError(response, 401, 'UNAUTHENTICATED');
    expect(response.headers.get('www-authenticate')).toBe('Bearer realm="workspace-data-service"');
  });

  it.each([
    ['a malformed header', { authorization: 'Basic dXNlcjpwYXNz' }],
    ['a malformed token', { authorization: 'Bearer not-a-key' }],
    ['an unknown key', { authorization: `Bearer wds_abcdefghijkl_${'A'.repeat(43)}` }],
  ])('for %s', async (_name, headers) => {
    const response = await suite.server.request('GET', '/v1/me/preferences', { headers });
    expectError(response, 401, 'UNAUTHENTICATED');
    expect(response.headers.get('www-authenticate')).toMatch(INVALID_TOKEN_CHALLENGE);
  });

  it('for a revoked key, from the next call on', async () => {
    const { apiKey } = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    expect((await suite.server.request('GET', '/v1/me/preferences', { token: apiKey })).status).toBe(200);
    await suite.server.prisma.apiKey.update({ where: { id: await keyIdOf(apiKey) }, data: { revokedAt: new Date() } });
    const response = await suite.server.request('GET', '/v1/me/preferences', { token: apiKey });
    expectError(response, 401, 'UNAUTHENTICATED');
    expect(response.headers.get('www-authenticate')).toMatch(INVALID_TOKEN_CHALLENGE);
  });

  it('for an expired key', async () => {
    const { apiKey } = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    await suite.server.prisma.apiKey.update({
      where: { id: await keyIdOf(apiKey) },
      data: { expiresAt: new Date(Date.now() - 1000) },
    });
    expectError(await suite.server.request('GET', '/v1/me/preferences', { token: apiKey }), 401, 'UNAUTHENTICATED');
  });

  it('on /graphql too, with the code in extensions', async () => {
    const response = await suite.server.graphql(
      '{ myPreferences { theme } }',
      {},
      { headers: { authorization: 'Bearer nope' } },
    );
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toMatch(INVALID_TOKEN_CHALLENGE);
    expect(response.body.errors[0].extensions.code).toBe('UNAUTHENTICATED');
  });
});

describe('authority is the current role ∩ the key’s access', () => {
  it('an admin renames the org; after being lowered to member the next call is 403', async () => {
    const admin = await addMember(suite.server.prisma, suite.org.orgId, 'admin');
    const read = await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: admin.apiKey });
    expect(read.status).toBe(200);
    const renamed = await suite.server.request('PATCH', `/v1/orgs/${suite.org.orgId}`, {
      token: admin.apiKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: read.body.version, name: 'Renamed' },
    });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({
      id: suite.org.orgId,
      name: 'Renamed',
      version: String(Number(read.body.version) + 1),
    });

    await suite.server.prisma.member.update({ where: { id: admin.memberId }, data: { role: 'member' } });
    const refused = await suite.server.request('PATCH', `/v1/orgs/${suite.org.orgId}`, {
      token: admin.apiKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: renamed.body.version, name: 'Again' },
    });
    expectError(refused, 403, 'FORBIDDEN');
    expect((await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: admin.apiKey })).body.name).toBe(
      'Renamed',
    );
  });

  it('a key without includeAdmin cannot act as admin even for an admin', async () => {
    const admin = await addMember(suite.server.prisma, suite.org.orgId, 'admin');
    await suite.server.prisma.apiKey.update({
      where: { id: await keyIdOf(admin.apiKey) },
      data: { includeAdmin: false },
    });
    const version = (await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: admin.apiKey })).body
      .version;
    const response = await suite.server.request('PATCH', `/v1/orgs/${suite.org.orgId}`, {
      token: admin.apiKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: version, name: 'Nope' },
    });
    expectError(response, 403, 'FORBIDDEN');
  });

  it('a viewer reads but cannot administer', async () => {
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    expect((await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: viewer.apiKey })).status).toBe(
      200,
    );
    const response = await suite.server.request('PATCH', `/v1/orgs/${suite.org.orgId}`, {
      token: viewer.apiKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1', name: 'Nope' },
    });
    expectError(response, 403, 'FORBIDDEN');
  });

  it('a removed member’s org answers 404, never 403', async () => {
    const member = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    await suite.server.prisma.member.delete({ where: { id: member.memberId } });
    expectError(
      await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: member.apiKey }),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });

  it('another org is 404, and so is an org that does not exist', async () => {
    const other = await createOrg(suite.server.prisma);
    expectError(
      await suite.server.request('GET', `/v1/orgs/${other.orgId}`, { token: suite.org.adminKey }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(
      await suite.server.request('GET', '/v1/orgs/01J00000000000000000000000', { token: suite.org.adminKey }),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });

  it('a read-only team key reads its org but cannot change it', async () => {
    const teamKey = await createTeamKey(suite.server.prisma, suite.org, 'read');
    const read = await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: teamKey });
    expect(read.status).toBe(200);
    const response = await suite.server.request('PATCH', `/v1/orgs/${suite.org.orgId}`, {
      token: teamKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: read.body.version, name: 'Nope' },
    });
    expectError(response, 403, 'FORBIDDEN');
  });

  it('a stale expectedVersion is a 409 that names the current version', async () => {
    const current = (await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: suite.org.adminKey }))
      .body;
    const response = await suite.server.request('PATCH', `/v1/orgs/${suite.org.orgId}`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '999999', name: 'Stale' },
    });
    expectError(response, 409, 'ROW_VERSION_CONFLICT');
    expect(response.body.error.details).toEqual({ expectedVersion: '999999', currentVersion: current.version });
  });

  it.each([
    [
      'the largest 19-digit version (beyond bigint) is a conflict, not a 500',
      '9999999999999999999',
      409,
      'ROW_VERSION_CONFLICT',
    ],
    ['a version with a leading zero is malformed', '01', 422, 'VALIDATION_FAILED'],
    ['a 20-digit version is malformed', '1'.repeat(20), 422, 'VALIDATION_FAILED'],
  ])('%s', async (_name, expectedVersion, status, code) => {
    const response = await suite.server.request('PATCH', `/v1/orgs/${suite.org.orgId}`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion, name: 'Edge' },
    });
    expectError(response, status, code);
  });
});

describe('credential bookkeeping', () => {
  it('records lastUsedAt on use', async () => {
    const member = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    const id = await keyIdOf(member.apiKey);
    expect((await suite.server.prisma.apiKey.findUniqueOrThrow({ where: { id } })).lastUsedAt).toBeNull();
    await suite.server.request('GET', '/v1/me/preferences', { token: member.apiKey });
    expect((await suite.server.prisma.apiKey.findUniqueOrThrow({ where: { id } })).lastUsedAt).toBeInstanceOf(Date);
  });

  it('stores only a hash of the secret', async () => {
    const member = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    const row = await suite.server.prisma.apiKey.findUniqueOrThrow({ where: { id: await keyIdOf(member.apiKey) } });
    const secret = member.apiKey.slice('wds_'.length + 12 + 1); // base64url may itself contain '_'
    expect(secret).toHaveLength(43);
    expect(JSON.stringify(row)).not.toContain(secret);
    expect(row.secretHash).toMatch(/^[0-9a-f]{64}$/);
  });
});
