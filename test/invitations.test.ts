import { describe, expect, it } from 'vitest';
import { DeletionResponse } from '../src/contracts/responses.ts';
import { CreatedInvitationResponse, InvitationResponse } from '../src/contracts/invitations.ts';
import { MemberResponse } from '../src/contracts/members.ts';
import { expectError } from './helpers/expectations.ts';
import { addMember, createOrg, createTeamKey, idempotencyKey, type TestOrg } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';

const suite = useServerWithOrg();

let counter = 0;
const address = () => `invitee-${Date.now()}-${(counter += 1)}@example.com`;

function invite(org: TestOrg, body: Record<string, unknown>, token = org.adminKey, key = idempotencyKey()) {
  return suite.server.request('POST', `/v1/orgs/${org.orgId}/invitations`, { token, idempotencyKey: key, body });
}

function accept(body: Record<string, unknown>, token?: string) {
  return suite.server.request('POST', '/v1/invitations/accept', {
    ...(token ? { token } : {}),
    idempotencyKey: idempotencyKey(),
    body,
  });
}

describe('invitations', () => {
  it('an admin invites; the token is in the creating answer only; the invitee (signed in) joins with the role', async () => {
    const org = await createOrg(suite.server.prisma);
    const other = await createOrg(suite.server.prisma);
    const invitee = await addMember(suite.server.prisma, other.orgId, 'admin');
    const email = (await suite.server.prisma.user.findUniqueOrThrow({ where: { id: invitee.userId } })).email;
    const key = idempotencyKey();
    const created = await invite(org, { email: email.toUpperCase(), role: 'member' }, org.adminKey, key);
    expect(created.status, created.text).toBe(201);
    const { invitation, token } = CreatedInvitationResponse.parse(created.body);
    expect(invitation).toMatchObject({
      orgId: org.orgId,
      email,
      role: 'member',
      state: 'pending',
      invitedByUserId: org.adminUserId,
      acceptedAt: null,
    });
    expect((await invite(org, { email, role: 'member' }, org.adminKey, key)).body).toEqual({ invitation, token: null });

    const list = await suite.server.request('GET', `/v1/orgs/${org.orgId}/invitations`, { token: org.adminKey });
    expect(list.status).toBe(200);
    expect(list.body).toEqual({
      data: [InvitationResponse.parse({ ...invitation })],
      nextCursor: null,
      hasMore: false,
    });
    expect(list.text).not.toContain(token!);

    const joined = await accept({ token }, invitee.apiKey);
    expect(joined.status, joined.text).toBe(200);
    expect(MemberResponse.parse(joined.body)).toMatchObject({
      orgId: org.orgId,
      userId: invitee.userId,
      role: 'member',
      verified: false,
      version: '1',
    });
    expect(
      (await suite.server.request('GET', `/v1/orgs/${org.orgId}/invitations`, { token: org.adminKey })).body.data[0],
    ).toMatchObject({ state: 'accepted', acceptedAt: expect.any(String) });
    expectError(await accept({ token }, invitee.apiKey), 409, 'INVITATION_ACCEPTED');
  });

  it('without a credential, accepting creates the user with a password', async () => {
    const email = address();
    const { token } = (await invite(suite.org, { email, role: 'viewer' })).body;
    expectError(await accept({ token }), 422, 'VALIDATION_FAILED');
    expectError(await accept({ token, name: 'New Person', password: 'short' }), 422, 'VALIDATION_FAILED');
    const joined = await accept({ token, name: 'New Person', password: 'correct horse battery staple' });
    expect(joined.status, joined.text).toBe(200);
    expect(joined.body).toMatchObject({
      orgId: suite.org.orgId,
      name: 'New Person',
      email,
      role: 'viewer',
      verified: false,
    });
    const user = await suite.server.prisma.user.findUniqueOrThrow({ where: { email } });
    expect(user.passwordHash).toMatch(/^scrypt\$15\$8\$1\$/);
    expect(user.passwordHash).not.toContain('correct horse');
  });

  it('the invitation is for one address; an unknown, cancelled or expired token is 404', async () => {
    const stranger = await addMember(suite.server.prisma, (await createOrg(suite.server.prisma)).orgId, 'member');
    const { token } = (await invite(suite.org, { email: address(), role: 'member' })).body;
    expectError(await accept({ token }, stranger.apiKey), 403, 'FORBIDDEN');
    expectError(await accept({ token: `wdsi_${'A'.repeat(43)}` }, stranger.apiKey), 404, 'RESOURCE_NOT_FOUND');
    expectError(await accept({ token: 'nope' }, stranger.apiKey), 422, 'VALIDATION_FAILED');

    const expired = (await invite(suite.org, { email: address(), role: 'member' })).body;
    await suite.server.prisma.invitation.update({
      where: { id: expired.invitation.id },
      data: { expiresAt: new Date(Date.now() - 1) },
    });
    expectError(
      await accept({ token: expired.token, name: 'Late', password: 'long enough password' }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    const teamKey = await createTeamKey(suite.server.prisma, suite.org);
    expectError(await accept({ token }, teamKey), 403, 'PERSONAL_IDENTITY_REQUIRED');
  });

  it('refuses members, duplicates of a pending invitation, non-admins and bad input', async () => {
    const org = await createOrg(suite.server.prisma);
    const member = await addMember(suite.server.prisma, org.orgId, 'member');
    const memberEmail = (await suite.server.prisma.user.findUniqueOrThrow({ where: { id: member.userId } })).email;
    expectError(await invite(org, { email: memberEmail, role: 'admin' }), 409, 'UNIQUE_CONFLICT');
    const email = address();
    expect((await invite(org, { email, role: 'member' })).status).toBe(201);
    expectError(await invite(org, { email, role: 'viewer' }), 409, 'UNIQUE_CONFLICT');
    expectError(await invite(org, { email: address(), role: 'member' }, member.apiKey), 403, 'FORBIDDEN');
    expectError(await invite(org, { email: 'not an address', role: 'member' }), 422, 'VALIDATION_FAILED');
    expectError(await invite(org, { email: address(), role: 'owner' }), 422, 'VALIDATION_FAILED');
    expectError(
      await suite.server.request('GET', `/v1/orgs/${org.orgId}/invitations`, { token: member.apiKey }),
      403,
      'FORBIDDEN',
    );
    expectError(
      await suite.server.request('GET', `/v1/orgs/${org.orgId}/invitations`, { token: suite.org.adminKey }),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });

  it('cancel (endpoint 8): {deleted, mutationId}; the token stops working; an accepted invitation is 409', async () => {
    const org = await createOrg(suite.server.prisma);
    const cancel = (id: string, token = org.adminKey) =>
      suite.server.request('DELETE', `/v1/orgs/${org.orgId}/invitations/${id}`, {
        token,
        idempotencyKey: idempotencyKey(),
      });
    const pending = (await invite(org, { email: address(), role: 'member' })).body;
    const member = await addMember(suite.server.prisma, org.orgId, 'member');
    expectError(await cancel(pending.invitation.id, member.apiKey), 403, 'FORBIDDEN');
    const cancelled = await cancel(pending.invitation.id);
    expect(cancelled.status).toBe(200);
    expect(DeletionResponse.parse(cancelled.body)).toEqual({ deleted: true, mutationId: expect.any(String) });
    expectError(
      await accept({ token: pending.token, name: 'X', password: 'long enough password' }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(await cancel(pending.invitation.id), 404, 'RESOURCE_NOT_FOUND');

    const accepted = (await invite(org, { email: address(), role: 'viewer' })).body;
    expect((await accept({ token: accepted.token, name: 'Joiner', password: 'long enough password' })).status).toBe(
      200,
    );
    expectError(await cancel(accepted.invitation.id), 409, 'INVITATION_ACCEPTED');
    expectError(await cancel('01J00000000000000000000000'), 404, 'RESOURCE_NOT_FOUND');
  });
});
