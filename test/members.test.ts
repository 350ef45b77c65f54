import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { MemberResponse } from '../src/contracts/members.ts';
import { DeletionResponse } from '../src/contracts/responses.ts';
import { expectError } from './helpers/expectations.ts';
import { addMember, createOrg, createTeamKey, idempotencyKey, type TestOrg } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';

const suite = useServerWithOrg();

const membersOf = (org: { orgId: string }) => `/v1/orgs/${org.orgId}/members`;

async function memberOf(token: string, orgId: string, memberId: string) {
  const page = await suite.server.request('GET', `/v1/orgs/${orgId}/members?limit=100`, { token });
  expect(page.status, page.text).toBe(200);
  return page.body.data.find((member: { id: string }) => member.id === memberId);
}

async function adminMemberId(org: TestOrg): Promise<string> {
  return (await suite.server.prisma.member.findFirstOrThrow({ where: { orgId: org.orgId, userId: org.adminUserId } }))
    .id;
}

function patch(token: string, orgId: string, memberId: string, body: unknown) {
  return suite.server.request('PATCH', `/v1/orgs/${orgId}/members/${memberId}`, {
    token,
    idempotencyKey: idempotencyKey(),
    body,
  });
}

describe('GET /v1/orgs/{orgId}/members', () => {
  it('lists every member as spec 2.5, oldest first, in pages', async () => {
    const org = await createOrg(suite.server.prisma);
    const viewer = await addMember(suite.server.prisma, org.orgId, 'viewer', 'Vera Viewer');
    const first = await suite.server.request('GET', `${membersOf(org)}?limit=1`, { token: viewer.apiKey });
    expect(first.status).toBe(200);
    expect(first.body.hasMore).toBe(true);
    expect(MemberResponse.parse(first.body.data[0])).toMatchObject({
      userId: org.adminUserId,
      role: 'admin',
      version: '1',
      verified: false,
      twoFactorEnabled: false,
    });
    const second = await suite.server.request(
      'GET',
      `${membersOf(org)}?limit=1&cursor=${encodeURIComponent(first.body.nextCursor)}`,
      { token: viewer.apiKey },
    );
    expect(second.body).toEqual({
      data: [
        {
          id: viewer.memberId,
          orgId: org.orgId,
          userId: viewer.userId,
          name: 'Vera Viewer',
          email: expect.stringMatching(/^viewer-.*@example\.com$/),
          role: 'viewer',
          version: '1',
          verified: false,
          twoFactorEnabled: false,
        },
      ],
      nextCursor: null,
      hasMore: false,
    });
  });

  it('a cursor from another org is 400 CURSOR_INVALID', async () => {
    const org = await createOrg(suite.server.prisma);
    await addMember(suite.server.prisma, org.orgId, 'member');
    const first = await suite.server.request('GET', `${membersOf(org)}?limit=1`, { token: org.adminKey });
    const replayed = await suite.server.request(
      'GET',
      `${membersOf(suite.org)}?cursor=${encodeURIComponent(first.body.nextCursor)}`,
      { token: suite.org.adminKey },
    );
    expectError(replayed, 400, 'CURSOR_INVALID');
  });

  it('another org’s member list is 404', async () => {
    const org = await createOrg(suite.server.prisma);
    expectError(
      await suite.server.request('GET', membersOf(org), { token: suite.org.adminKey }),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });

  it('a team key may list its org’s members', async () => {
    const org = await createOrg(suite.server.prisma);
    await addMember(suite.server.prisma, org.orgId, 'member');
    const teamKey = await createTeamKey(suite.server.prisma, org, 'read');
    expect((await suite.server.request('GET', membersOf(org), { token: teamKey })).body.data).toHaveLength(2);
  });
});

describe('PATCH /v1/orgs/{orgId}/members/{id} (endpoint 3)', () => {
  it('an admin changes a role and a name; the answer is the Member of spec 2.5 with the next version', async () => {
    const org = await createOrg(suite.server.prisma);
    const member = await addMember(suite.server.prisma, org.orgId, 'member');
    const response = await patch(org.adminKey, org.orgId, member.memberId, {
      expectedVersion: '1',
      role: 'viewer',
      name: 'Renamed',
    });
    expect(response.status, response.text).toBe(200);
    expect(MemberResponse.parse(response.body)).toEqual({
      id: member.memberId,
      orgId: org.orgId,
      userId: member.userId,
      name: 'Renamed',
      email: expect.any(String),
      role: 'viewer',
      version: '2',
      verified: false,
      twoFactorEnabled: false,
    });
    // The new role applies at once: the member's write key now only reads.
    const refused = await suite.server.request('POST', `/v1/orgs/${org.orgId}/databases`, {
      token: member.apiKey,
      idempotencyKey: idempotencyKey(),
      body: { name: 'X' },
    });
    expectError(refused, 403, 'FORBIDDEN');
  });

  it('a stale expectedVersion is 409 ROW_VERSION_CONFLICT naming the current version', async () => {
    const org = await createOrg(suite.server.prisma);
    const member = await addMember(suite.server.prisma, org.orgId, 'member');
    expect(
      (await patch(org.adminKey, org.orgId, member.memberId, { expectedVersion: '1', name: 'First' })).status,
    ).toBe(200);
    const stale = await patch(org.adminKey, org.orgId, member.memberId, { expectedVersion: '1', name: 'Second' });
    expectError(stale, 409, 'ROW_VERSION_CONFLICT');
    expect(stale.body.error.details).toEqual({ expectedVersion: '1', currentVersion: '2' });
    expectError(
      await patch(org.adminKey, org.orgId, member.memberId, { expectedVersion: '9999999999999999999', name: 'Huge' }),
      409,
      'ROW_VERSION_CONFLICT',
    );
  });

  it('anyone renames themself, but only admins rename others or change roles', async () => {
    const org = await createOrg(suite.server.prisma);
    const viewer = await addMember(suite.server.prisma, org.orgId, 'viewer');
    const member = await addMember(suite.server.prisma, org.orgId, 'member');
    const self = await patch(viewer.apiKey, org.orgId, viewer.memberId, { expectedVersion: '1', name: 'Me Myself' });
    expect(self.status, self.text).toBe(200);
    expect(self.body).toMatchObject({ name: 'Me Myself', role: 'viewer', version: '2' });
    expectError(
      await patch(viewer.apiKey, org.orgId, viewer.memberId, { expectedVersion: '2', role: 'member' }),
      403,
      'FORBIDDEN',
    );
    expectError(
      await patch(member.apiKey, org.orgId, viewer.memberId, { expectedVersion: '2', name: 'Other' }),
      403,
      'FORBIDDEN',
    );
    expectError(
      await patch(member.apiKey, org.orgId, viewer.memberId, { expectedVersion: '2', role: 'admin' }),
      403,
      'FORBIDDEN',
    );
    const teamKey = await createTeamKey(suite.server.prisma, org, 'write');
    expectError(
      await patch(teamKey, org.orgId, viewer.memberId, { expectedVersion: '2', role: 'admin' }),
      403,
      'FORBIDDEN',
    );
  });

  it('an admin’s personal read key cannot change roles; a replay answers the same body; a changed body with the same key is 409', async () => {
    const org = await createOrg(suite.server.prisma);
    const member = await addMember(suite.server.prisma, org.orgId, 'member');
    const readKey = await suite.server.request('POST', '/v1/me/keys', {
      token: org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { name: 'Read', orgId: org.orgId, access: 'read' },
    });
    expectError(
      await patch(readKey.body.secret, org.orgId, member.memberId, { expectedVersion: '1', role: 'viewer' }),
      403,
      'FORBIDDEN',
    );
    const key = idempotencyKey();
    const send = (body: unknown) =>
      suite.server.request('PATCH', `${membersOf(org)}/${member.memberId}`, {
        token: org.adminKey,
        idempotencyKey: key,
        body,
      });
    const first = await send({ expectedVersion: '1', role: 'viewer' });
    expect(first.status).toBe(200);
    const replay = await send({ expectedVersion: '1', role: 'viewer' });
    expect([replay.status, replay.text]).toEqual([200, first.text]);
    expectError(await send({ expectedVersion: '1', role: 'admin' }), 409, 'IDEMPOTENCY_CONFLICT');
  });

  it('bad input is a 4xx envelope: unknown role, long name, extra member, missing version, malformed id', async () => {
    const id = await adminMemberId(suite.org);
    const { orgId, adminKey } = suite.org;
    expectError(await patch(adminKey, orgId, id, { expectedVersion: '1', role: 'owner' }), 422, 'VALIDATION_FAILED');
    expectError(
      await patch(adminKey, orgId, id, { expectedVersion: '1', name: 'x'.repeat(121) }),
      422,
      'VALIDATION_FAILED',
    );
    expectError(await patch(adminKey, orgId, id, { expectedVersion: '1', email: 'a@b.c' }), 422, 'VALIDATION_FAILED');
    expectError(await patch(adminKey, orgId, id, { name: 'No version' }), 422, 'VALIDATION_FAILED');
    expectError(await patch(adminKey, orgId, 'not-an-id', { expectedVersion: '1' }), 400, 'BAD_REQUEST');
    expectError(
      await patch(adminKey, orgId, '01J00000000000000000000000', { expectedVersion: '1' }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    const missingKey = await suite.server.request('PATCH', `/v1/orgs/${orgId}/members/${id}`, {
      token: adminKey,
      body: { expectedVersion: '1' },
    });
    expectError(missingKey, 400, 'BAD_REQUEST');
  });

  it('the last admin cannot demote themself (LAST_ADMIN), and nothing changes', async () => {
    const org = await createOrg(suite.server.prisma);
    const id = await adminMemberId(org);
    const response = await patch(org.adminKey, org.orgId, id, { expectedVersion: '1', role: 'member' });
    expectError(response, 409, 'LAST_ADMIN');
    expect(await memberOf(org.adminKey, org.orgId, id)).toMatchObject({ role: 'admin', version: '1' });
  });

  it('two admins demoting each other at the same time: exactly one succeeds, the other is LAST_ADMIN', async () => {
    for (let round = 0; round < 3; round += 1) {
      const org = await createOrg(suite.server.prisma);
      const first = { id: await adminMemberId(org), key: org.adminKey };
      const other = await addMember(suite.server.prisma, org.orgId, 'admin');
      const second = { id: other.memberId, key: other.apiKey };
      // Hold the admin rows so that both requests pass their authority check and then meet at the lock.
      const gate = new pg.Client({ connectionString: suite.server.database.url });
      await gate.connect();
      await gate.query('BEGIN');
      await gate.query(`SELECT id FROM members WHERE org_id = $1::bpchar AND role = 'admin' FOR UPDATE`, [org.orgId]);
      const both = Promise.all([
        patch(first.key, org.orgId, second.id, { expectedVersion: '1', role: 'member' }),
        patch(second.key, org.orgId, first.id, { expectedVersion: '1', role: 'member' }),
      ]);
      await waitForLockWaiters(2);
      await gate.query('COMMIT');
      await gate.end();
      const [a, b] = await both;
      expect([a.status, b.status].sort()).toEqual([200, 409]);
      expectError(a.status === 409 ? a : b, 409, 'LAST_ADMIN');
      const admins = await suite.server.prisma.member.count({ where: { orgId: org.orgId, role: 'admin' } });
      expect(admins).toBe(1);
    }
  });
});

/** Polls (with a deadline) until `count` sessions of this database wait for a lock. */
async function waitForLockWaiters(count: number): Promise<void> {
  await expect
    .poll(
      async () => {
        const [row] = await suite.server.prisma.$queryRaw<{ waiting: number }[]>`
      SELECT count(*)::int AS waiting FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`;
        return row?.waiting ?? 0;
      },
      { timeout: 10_000, interval: 0, message: `requests waiting on the lock (of ${count})` },
    )
    .toBeGreaterThanOrEqual(count);
}

describe('DELETE /v1/orgs/{orgId}/members/{id}', () => {
  it('an admin removes a member: {deleted, mutationId}; their key then reaches nothing (404)', async () => {
    const org = await createOrg(suite.server.prisma);
    const member = await addMember(suite.server.prisma, org.orgId, 'member');
    const response = await suite.server.request('DELETE', `${membersOf(org)}/${member.memberId}`, {
      token: org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1' },
    });
    expect(response.status, response.text).toBe(200);
    expect(DeletionResponse.parse(response.body)).toEqual({ deleted: true, mutationId: expect.any(String) });
    const after = await suite.server.request('GET', `/v1/orgs/${org.orgId}`, { token: member.apiKey });
    expect(after.status).toBe(401); // the personal key was revoked with the membership
  });

  const remove = (org: TestOrg, token: string, id: string, expectedVersion: string) =>
    suite.server.request('DELETE', `${membersOf(org)}/${id}`, {
      token,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion },
    });

  it('refuses removing the last admin (409 LAST_ADMIN)', async () => {
    const org = await createOrg(suite.server.prisma);
    expectError(await remove(org, org.adminKey, await adminMemberId(org), '1'), 409, 'LAST_ADMIN');
  });

  it('refuses a stale version (409 ROW_VERSION_CONFLICT)', async () => {
    const org = await createOrg(suite.server.prisma);
    const member = await addMember(suite.server.prisma, org.orgId, 'member');
    expectError(await remove(org, org.adminKey, member.memberId, '2'), 409, 'ROW_VERSION_CONFLICT');
  });

  it('refuses non-admins (403 FORBIDDEN)', async () => {
    const org = await createOrg(suite.server.prisma);
    const member = await addMember(suite.server.prisma, org.orgId, 'member');
    expectError(await remove(org, member.apiKey, member.memberId, '1'), 403, 'FORBIDDEN');
  });
});
