import type { PrismaClient, TransactionClient } from '../db/prisma.ts';
import type { Role } from '../kernel/authority.ts';
import { issueEmailVerification } from './email-verification.ts';
import { hashPassword } from './passwords.ts';
import { issueApiKeySecret } from './secrets.ts';
import { newId } from '../kernel/ids.ts';

export interface ProvisionedUser {
  userId: string;
  memberId: string;
  apiKey: string;
}

async function findOrCreateUser(tx: TransactionClient, email: string, name: string): Promise<string> {
  const existing = await tx.user.findUnique({ where: { email }, select: { id: true } });
  if (existing) return existing.id;
  const { id } = await tx.user.create({ data: { id: newId(), email, name }, select: { id: true } });
  return id;
}

/** A personal key with the full authority of the role it is created for (admins' keys include admin). */
async function createPersonalKey(tx: TransactionClient, orgId: string, userId: string, role: Role): Promise<string> {
  const secret = issueApiKeySecret();
  await tx.apiKey.create({
    data: {
      id: newId(),
      scope: 'personal',
      orgId,
      userId,
      createdByUserId: userId,
      name: 'CLI key',
      prefix: secret.prefix,
      secretHash: secret.hash,
      access: role === 'viewer' ? 'read' : 'write',
      includeAdmin: role === 'admin',
    },
  });
  return secret.token;
}

export class ProvisionError extends Error {}

/** A new org with the user as its admin, and a full-access personal key; the user is created if new. */
export async function bootstrapOrg(prisma: PrismaClient, input: { orgName: string; email: string; name: string }) {
  return prisma.$transaction(async (tx) => {
    const userId = await findOrCreateUser(tx, input.email, input.name);
    const org = await tx.org.create({ data: { id: newId(), name: input.orgName }, select: { id: true } });
    await tx.member.create({ data: { id: newId(), orgId: org.id, userId, role: 'admin' } });
    const apiKey = await createPersonalKey(tx, org.id, userId, 'admin');
    return { orgId: org.id, userId, apiKey };
  });
}

/** Adds a user (new or existing) to an org with a role, and gives them a personal key of that role. */
export async function addUser(
  prisma: PrismaClient,
  input: { orgId: string; email: string; name: string; role: Role; acceptUnverified?: boolean },
): Promise<ProvisionedUser> {
  return prisma.$transaction(async (tx) => {
    const org = await tx.org.findUnique({ where: { id: input.orgId }, select: { id: true } });
    if (!org) throw new ProvisionError(`No organisation with id ${input.orgId}.`);
    const existing = await tx.user.findUnique({
      where: { email: input.email },
      select: { verified: true, passwordHash: true },
    });
    // Anyone who can invite can create an account for any address and choose its password: an existing account
    // whose mailbox was never proven may belong to someone else, so the operator must say they checked it.
    if (existing && !existing.verified && existing.passwordHash !== null && !input.acceptUnverified) {
      throw new ProvisionError(
        `${input.email} has an unverified account with a password someone else may have chosen; confirm its owner, then repeat with --accept-unverified.`,
      );
    }
    const userId = await findOrCreateUser(tx, input.email, input.name);
    const already = await tx.member.findUnique({
      where: { orgId_userId: { orgId: org.id, userId } },
      select: { id: true },
    });
    if (already) throw new ProvisionError(`${input.email} is already a member of ${input.orgId}.`);
    const member = await tx.member.create({
      data: { id: newId(), orgId: org.id, userId, role: input.role },
      select: { id: true },
    });
    const apiKey = await createPersonalKey(tx, org.id, userId, input.role);
    return { userId, memberId: member.id, apiKey };
  });
}

/**
 * Sets (or replaces) a user's password and lifts any login lockout. A reset is what one does after a compromise,
 * so every interactive credential ends with it: browser sessions, OAuth grants (access and refresh tokens) and
 * unredeemed authorization codes. API keys are listed and revoked by their owner and stay.
 */
export async function setPassword(
  prisma: PrismaClient,
  input: { email: string; password: string },
): Promise<{ userId: string }> {
  const passwordHash = await hashPassword(input.password);
  return prisma.$transaction(async (tx) => {
    const updated = await tx.user.updateManyAndReturn({
      where: { email: input.email },
      data: { passwordHash, failedLogins: 0, lockedUntil: null },
      select: { id: true },
    });
    if (!updated[0]) throw new ProvisionError(`No user with e-mail ${input.email}.`);
    const userId = updated[0].id;
    const now = new Date();
    await tx.session.updateMany({ where: { userId, revokedAt: null }, data: { revokedAt: now } });
    await tx.oAuthToken.updateMany({ where: { userId, revokedAt: null }, data: { revokedAt: now } });
    await tx.oAuthCode.updateMany({ where: { userId, usedAt: null }, data: { usedAt: now } });
    return { userId: updated[0].id };
  });
}

/**
 * A mailbox verification token for an operator who delivers by hand (no delivery hook, or a mailbox that needs
 * another channel). Spending it at `POST /v1/auth/verify-email` marks the account verified; the operator must send
 * it to the address itself, never to whoever asked, or it proves nothing.
 */
export async function issueVerificationToken(
  prisma: PrismaClient,
  input: { email: string; ttlHours: number },
): Promise<{ userId: string; email: string; token: string; expiresAt: string }> {
  return prisma.$transaction(async (tx) => {
    const user = await tx.user.findUnique({
      where: { email: input.email },
      select: { id: true, email: true, verified: true },
    });
    if (!user) throw new ProvisionError(`No user with e-mail ${input.email}.`);
    if (user.verified) throw new ProvisionError(`${input.email} is already verified.`);
    const issued = await issueEmailVerification(tx, user, input.ttlHours);
    return { userId: user.id, email: user.email, token: issued.token, expiresAt: issued.expiresAt.toISOString() };
  });
}
