import { describe, expect, it } from 'vitest';
import { addUser } from '../src/identity/provision.ts';
import { createOrg, idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';

/** Issue 18 §3: a member's name set by one org's admin stays in that org; only the user changes their profile name. */
const suite = useServerWithOrg();

async function nameIn(orgId: string, token: string, userId: string): Promise<string> {
  const page = await suite.server.request('GET', `/v1/orgs/${orgId}/members?limit=100`, { token });
  expect(page.status, page.text).toBe(200);
  return page.body.data.find((member: { userId: string }) => member.userId === userId).name;
}

async function rename(token: string, orgId: string, memberId: string, name: string) {
  const current = (await suite.server.request('GET', `/v1/orgs/${orgId}/members?limit=100`, { token })).body.data.find(
    (member: { id: string }) => member.id === memberId,
  );
  return suite.server.request('PATCH', `/v1/orgs/${orgId}/members/${memberId}`, {
    token,
    idempotencyKey: idempotencyKey(),
    body: { expectedVersion: current.version, name },
  });
}

describe('member names are per org', () => {
  it('an admin’s rename stays in the admin’s org; the user’s own rename is their profile name elsewhere', async () => {
    const [a, b, c] = await Promise.all([
      createOrg(suite.server.prisma),
      createOrg(suite.server.prisma),
      createOrg(suite.server.prisma),
    ]);
    const email = `shared-${Date.now()}@example.com`;
    const inA = await addUser(suite.server.prisma, { orgId: a.orgId, email, name: 'Sam Shared', role: 'member' });
    const inB = await addUser(suite.server.prisma, { orgId: b.orgId, email, name: 'ignored', role: 'member' });
    await addUser(suite.server.prisma, { orgId: c.orgId, email, name: 'ignored', role: 'viewer' });
    expect(inB.userId).toBe(inA.userId);

    const byAdmin = await rename(a.adminKey, a.orgId, inA.memberId, 'Sam (Contractor)');
    expect(byAdmin.status, byAdmin.text).toBe(200);
    expect(byAdmin.body).toMatchObject({ id: inA.memberId, name: 'Sam (Contractor)', version: '2' });
    expect(await nameIn(a.orgId, inA.apiKey, inA.userId)).toBe('Sam (Contractor)');
    expect(await nameIn(b.orgId, b.adminKey, inA.userId)).toBe('Sam Shared');
    expect(await nameIn(c.orgId, c.adminKey, inA.userId)).toBe('Sam Shared');

    // Sam renames themself in B: their profile name, shown wherever no admin named them (C), not in A.
    const bySelf = await rename(inB.apiKey, b.orgId, inB.memberId, 'Samantha');
    expect(bySelf.status, bySelf.text).toBe(200);
    expect(bySelf.body).toMatchObject({ name: 'Samantha' });
    expect(await nameIn(b.orgId, b.adminKey, inA.userId)).toBe('Samantha');
    expect(await nameIn(c.orgId, c.adminKey, inA.userId)).toBe('Samantha');
    expect(await nameIn(a.orgId, a.adminKey, inA.userId)).toBe('Sam (Contractor)');

    // Renaming themself in A replaces A's name for them with their profile name.
    const inOwnWords = await rename(inA.apiKey, a.orgId, inA.memberId, 'Sam S.');
    expect(inOwnWords.status, inOwnWords.text).toBe(200);
    expect(await nameIn(a.orgId, a.adminKey, inA.userId)).toBe('Sam S.');
    expect(await nameIn(b.orgId, b.adminKey, inA.userId)).toBe('Sam S.');
  });
});
