import { randomBytes } from 'node:crypto';
import { addUser, bootstrapOrg } from '../../src/identity/provision.ts';
import type { PrismaClient } from '../../src/db/prisma.ts';
import type { Role } from '../../src/kernel/authority.ts';
import { issueApiKeySecret } from '../../src/identity/secrets.ts';
import { newId } from '../../src/kernel/ids.ts';

const unique = () => randomBytes(4).toString('hex');

export interface TestOrg {
  orgId: string;
  adminUserId: string;
  adminKey: string;
}

/** A new org whose admin holds a full-access personal key (the same path as `cli bootstrap`). */
export async function createOrg(prisma: PrismaClient, name = `Org ${unique()}`): Promise<TestOrg> {
  const { orgId, userId, apiKey } = await bootstrapOrg(prisma, {
    orgName: name,
    email: `admin-${unique()}@example.com`,
    name: 'Ada Admin',
  });
  return { orgId, adminUserId: userId, adminKey: apiKey };
}

export async function addMember(prisma: PrismaClient, orgId: string, role: Role, name = `User ${unique()}`) {
  return addUser(prisma, { orgId, email: `${role}-${unique()}@example.com`, name, role });
}

/** A workspace-owned key; it has no personal identity. */
export async function createTeamKey(
  prisma: PrismaClient,
  org: TestOrg,
  access: 'read' | 'write' = 'write',
): Promise<string> {
  const secret = issueApiKeySecret();
  await prisma.apiKey.create({
    data: {
      id: newId(),
      scope: 'team',
      orgId: org.orgId,
      userId: null,
      createdByUserId: org.adminUserId,
      name: 'Team key',
      prefix: secret.prefix,
      secretHash: secret.hash,
      access,
      includeAdmin: false,
    },
  });
  return secret.token;
}

export function idempotencyKey(): string {
  return `test-${newId()}`;
}
