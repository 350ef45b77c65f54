import { describe, expect, it } from 'vitest';
import { DeletionResponse } from '../src/contracts/responses.ts';
import { CreatedKeyResponse, KeyMetadata } from '../src/contracts/keys.ts';
import { expectError } from './helpers/expectations.ts';
import { addMember, createOrg, createTeamKey, idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';

const suite = useServerWithOrg();

function createMyKey(token: string, body: Record<string, unknown>, key = idempotencyKey()) {
  return suite.server.request('POST', '/v1/me/keys', { token, idempotencyKey: key, body });
}

function createTeam(token: string, orgId: string, body: Record<string, unknown>, key = idempotencyKey()) {
  return suite.server.request('POST', `/v1/orgs/${orgId}/keys`, { token, idempotencyKey: key, body });
}

describe('personal keys', () => {
  it('creates a key whose secret is in the creating answer only, then lists metadata exactly as spec 2.12', async () => {
    const member = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const key = idempotencyKey();
    const created = await createMyKey(
      member.apiKey,
      { name: 'CI', orgId: suite.org.orgId, access: 'read', expiresAt },
      key,
    );
    expect(created.status, created.text).toBe(201);
    const parsed = CreatedKeyResponse.parse(created.body);
    expect(parsed.key).toEqual({
      scope: 'personal',
      access: 'read',
      includeAdmin: false,
      id: expect.any(String),
      orgId: suite.org.orgId,
      name: 'CI',
      userId: member.userId,
      createdByUserId: member.userId,
      prefix: parsed.secret!.slice(4, 16),
      createdAt: expect.any(String),
      expiresAt,
      revokedAt: null,
      lastUsedAt: null,
    });
    const secret = parsed.secret!;

    // The new key works, within `read`.
    expect((await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: secret })).status).toBe(200);
    expectError(
      await suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/databases`, {
        token: secret,
        idempotencyKey: idempotencyKey(),
        body: { name: 'No' },
      }),
      403,
      'FORBIDDEN',
    );

    const list = await suite.server.request('GET', '/v1/me/keys', { token: member.apiKey });
    expect(list.status).toBe(200);
    expect(list.body.hasMore).toBe(false);
    for (const item of list.body.data) KeyMetadata.parse(item);
    expect(list.body.data[0]).toMatchObject({ id: parsed.key.id, lastUsedAt: expect.any(String) });
    expect(list.text).not.toContain(secret.slice(17));

    // A replay of the creation confirms it but cannot show the secret again: it was never stored.
    const replay = await createMyKey(
      member.apiKey,
      { name: 'CI', orgId: suite.org.orgId, access: 'read', expiresAt },
      key,
    );
    expect(replay.status).toBe(201);
    expect(replay.body).toEqual({ key: { ...parsed.key }, secret: null });
    const records = await suite.server.prisma.idempotencyRecord.findMany();
    expect(JSON.stringify(records, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).not.toContain(secret.slice(17));
  });

  it('pages newest first with an opaque cursor', async () => {
    const member = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    for (const name of ['one', 'two'])
      expect((await createMyKey(member.apiKey, { name, orgId: suite.org.orgId, access: 'read' })).status).toBe(201);
    const first = await suite.server.request('GET', '/v1/me/keys?limit=2', { token: member.apiKey });
    expect(first.body.data.map((k: { name: string }) => k.name)).toEqual(['two', 'one']);
    expect(first.body.hasMore).toBe(true);
    const second = await suite.server.request(
      'GET',
      `/v1/me/keys?limit=2&cursor=${encodeURIComponent(first.body.nextCursor)}`,
      { token: member.apiKey },
    );
    expect(second.body).toMatchObject({ data: [{ name: 'CLI key' }], hasMore: false, nextCursor: null });
    expectError(
      await suite.server.request('GET', '/v1/me/keys?cursor=forged.cursor', { token: member.apiKey }),
      400,
      'CURSOR_INVALID',
    );
  });

  it.each([
    ['a viewer asking for write', 'viewer', { access: 'write' }],
    ['a member asking for admin', 'member', { access: 'write', includeAdmin: true }],
  ] as const)('%s is 403 DELEGATION_EXCEEDS_AUTHORITY', async (_name, role, ceiling) => {
    const user = await addMember(suite.server.prisma, suite.org.orgId, role);
    expectError(
      await createMyKey(user.apiKey, { name: 'Too much', orgId: suite.org.orgId, ...ceiling }),
      403,
      'DELEGATION_EXCEEDS_AUTHORITY',
    );
  });

  it('a read key cannot mint a write key, even for an admin', async () => {
    const created = await createMyKey(suite.org.adminKey, { name: 'Reader', orgId: suite.org.orgId, access: 'read' });
    const reader = created.body.secret as string;
    expectError(
      await createMyKey(reader, { name: 'Writer', orgId: suite.org.orgId, access: 'write' }),
      403,
      'DELEGATION_EXCEEDS_AUTHORITY',
    );
  });

  it('the key’s authority shrinks when the owner’s role does', async () => {
    const user = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    const writer = (await createMyKey(user.apiKey, { name: 'W', orgId: suite.org.orgId, access: 'write' })).body
      .secret as string;
    const attempt = () =>
      suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/databases`, {
        token: writer,
        idempotencyKey: idempotencyKey(),
        body: { name: `DB ${idempotencyKey()}` },
      });
    expect((await attempt()).status).toBe(201);
    await suite.server.prisma.member.update({ where: { id: user.memberId }, data: { role: 'viewer' } });
    expectError(await attempt(), 403, 'FORBIDDEN');
  });

  it('an org the caller is not in is 404; bad input is 422', async () => {
    const other = await createOrg(suite.server.prisma);
    const { adminKey, orgId } = suite.org;
    expectError(
      await createMyKey(adminKey, { name: 'X', orgId: other.orgId, access: 'read' }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(await createMyKey(adminKey, { name: 'X', orgId, access: 'admin' }), 422, 'VALIDATION_FAILED');
    expectError(await createMyKey(adminKey, { name: '', orgId, access: 'read' }), 422, 'VALIDATION_FAILED');
    expectError(
      await createMyKey(adminKey, { name: 'X', orgId, access: 'read', expiresAt: '2020-01-01T00:00:00.000Z' }),
      422,
      'VALIDATION_FAILED',
    );
    expectError(
      await createMyKey(adminKey, { name: 'X', orgId, access: 'read', expiresAt: 'tomorrow' }),
      422,
      'VALIDATION_FAILED',
    );
    expectError(
      await createMyKey(adminKey, { name: 'X', orgId, access: 'read', secret: 'mine' }),
      422,
      'VALIDATION_FAILED',
    );
  });

  it('revocation: {deleted, mutationId}; the key fails at once; someone else’s key is 404', async () => {
    const user = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    const created = (await createMyKey(user.apiKey, { name: 'Temp', orgId: suite.org.orgId, access: 'read' })).body;
    expectError(
      await suite.server.request('DELETE', `/v1/me/keys/${created.key.id}`, {
        token: suite.org.adminKey,
        idempotencyKey: idempotencyKey(),
      }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    const revoked = await suite.server.request('DELETE', `/v1/me/keys/${created.key.id}`, {
      token: user.apiKey,
      idempotencyKey: idempotencyKey(),
    });
    expect(revoked.status).toBe(200);
    expect(DeletionResponse.parse(revoked.body).deleted).toBe(true);
    expectError(
      await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: created.secret }),
      401,
      'UNAUTHENTICATED',
    );
    expectError(
      await suite.server.request('DELETE', `/v1/me/keys/${created.key.id}`, {
        token: user.apiKey,
        idempotencyKey: idempotencyKey(),
      }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    const listed = (await suite.server.request('GET', '/v1/me/keys', { token: user.apiKey })).body.data.find(
      (k: { id: string }) => k.id === created.key.id,
    );
    expect(listed.revokedAt).toEqual(expect.any(String));
  });

  it('an expired key fails at once', async () => {
    const created = (
      await createMyKey(suite.org.adminKey, {
        name: 'Short',
        orgId: suite.org.orgId,
        access: 'read',
        expiresAt: new Date(Date.now() + 1500).toISOString(),
      })
    ).body;
    expect((await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: created.secret })).status).toBe(
      200,
    );
    await suite.server.prisma.apiKey.update({
      where: { id: created.key.id },
      data: { expiresAt: new Date(Date.now() - 1) },
    });
    expectError(
      await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: created.secret }),
      401,
      'UNAUTHENTICATED',
    );
  });

  it('a team key on /v1/me/* is 403 PERSONAL_IDENTITY_REQUIRED', async () => {
    const teamKey = await createTeamKey(suite.server.prisma, suite.org, 'write');
    expectError(
      await suite.server.request('GET', '/v1/me/keys', { token: teamKey }),
      403,
      'PERSONAL_IDENTITY_REQUIRED',
    );
    expectError(
      await createMyKey(teamKey, { name: 'X', orgId: suite.org.orgId, access: 'read' }),
      403,
      'PERSONAL_IDENTITY_REQUIRED',
    );
    expectError(
      await suite.server.request('DELETE', '/v1/me/keys/01J00000000000000000000000', {
        token: teamKey,
        idempotencyKey: idempotencyKey(),
      }),
      403,
      'PERSONAL_IDENTITY_REQUIRED',
    );
  });
});

describe('team keys', () => {
  it('an admin creates, lists and revokes (endpoint 9); the key acts for the org without a person', async () => {
    const org = await createOrg(suite.server.prisma);
    const created = await createTeam(org.adminKey, org.orgId, { name: 'Sync', access: 'write' });
    expect(created.status, created.text).toBe(201);
    const { key, secret } = CreatedKeyResponse.parse(created.body);
    expect(key).toMatchObject({ scope: 'team', userId: null, access: 'write', includeAdmin: false, orgId: org.orgId });
    expect(
      (
        await suite.server.request('POST', `/v1/orgs/${org.orgId}/databases`, {
          token: secret!,
          idempotencyKey: idempotencyKey(),
          body: { name: 'By team key' },
        })
      ).status,
    ).toBe(201);

    const list = await suite.server.request('GET', `/v1/orgs/${org.orgId}/keys`, { token: org.adminKey });
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ data: [{ ...key, lastUsedAt: expect.any(String) }], nextCursor: null, hasMore: false });
    expect(list.text).not.toContain(secret!.slice(17));

    const revoked = await suite.server.request('DELETE', `/v1/orgs/${org.orgId}/keys/${key.id}`, {
      token: org.adminKey,
      idempotencyKey: idempotencyKey(),
    });
    expect(revoked.status).toBe(200);
    expect(DeletionResponse.parse(revoked.body)).toEqual({ deleted: true, mutationId: expect.any(String) });
    expectError(await suite.server.request('GET', `/v1/orgs/${org.orgId}`, { token: secret! }), 401, 'UNAUTHENTICATED');
    expectError(
      await suite.server.request('DELETE', `/v1/orgs/${org.orgId}/keys/${key.id}`, {
        token: org.adminKey,
        idempotencyKey: idempotencyKey(),
      }),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });

  it('only admins manage team keys; a personal key id is not a team key (404); another org is 404', async () => {
    const org = await createOrg(suite.server.prisma);
    const member = await addMember(suite.server.prisma, org.orgId, 'member');
    const key = (await createTeam(org.adminKey, org.orgId, { name: 'K', access: 'read' })).body.key;
    expectError(await createTeam(member.apiKey, org.orgId, { name: 'K', access: 'read' }), 403, 'FORBIDDEN');
    expectError(
      await suite.server.request('GET', `/v1/orgs/${org.orgId}/keys`, { token: member.apiKey }),
      403,
      'FORBIDDEN',
    );
    expectError(
      await suite.server.request('DELETE', `/v1/orgs/${org.orgId}/keys/${key.id}`, {
        token: member.apiKey,
        idempotencyKey: idempotencyKey(),
      }),
      403,
      'FORBIDDEN',
    );
    const personal = (await createMyKey(member.apiKey, { name: 'P', orgId: org.orgId, access: 'read' })).body.key;
    expectError(
      await suite.server.request('DELETE', `/v1/orgs/${org.orgId}/keys/${personal.id}`, {
        token: org.adminKey,
        idempotencyKey: idempotencyKey(),
      }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(
      await suite.server.request('DELETE', `/v1/orgs/${suite.org.orgId}/keys/${key.id}`, {
        token: suite.org.adminKey,
        idempotencyKey: idempotencyKey(),
      }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(
      await suite.server.request('GET', `/v1/orgs/${org.orgId}/keys`, { token: suite.org.adminKey }),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });

  it('an admin key without includeAdmin cannot, and a team key cannot create team keys', async () => {
    const org = await createOrg(suite.server.prisma);
    const writer = (await createMyKey(org.adminKey, { name: 'W', orgId: org.orgId, access: 'write' })).body
      .secret as string;
    expectError(await createTeam(writer, org.orgId, { name: 'K', access: 'read' }), 403, 'FORBIDDEN');
    const adminTeamKey = (
      await createTeam(org.adminKey, org.orgId, { name: 'Admin team key', access: 'write', includeAdmin: true })
    ).body.secret as string;
    expectError(
      await createTeam(adminTeamKey, org.orgId, { name: 'K', access: 'read' }),
      403,
      'PERSONAL_IDENTITY_REQUIRED',
    );
  });
});
