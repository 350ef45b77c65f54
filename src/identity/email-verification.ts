import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { PrismaClient, TransactionClient } from '../db/prisma.ts';
import { DomainError } from '../kernel/errors.ts';
import { newId } from '../kernel/ids.ts';
import { sha256Hex } from './secrets.ts';

/**
 * Proving a mailbox (issue 19 §2). A token is 32 random bytes, stored as its sha256 only, bound to the address it
 * was issued for, spent once. The API sends it only through the delivery hook; `cli issue-email-verification`
 * prints it for operators who deliver by hand. Shared by the resolver, the plain `/v1/auth/verify-email` handler
 * and the CLI, so it loads no GraphQL.
 */
export const EmailVerificationToken = z
  .string()
  .regex(/^wdsv_[A-Za-z0-9_-]{43}$/, 'must be an e-mail verification token');
export const VerifyEmailBody = z.strictObject({ token: EmailVerificationToken });

export interface IssuedVerification {
  token: string;
  expiresAt: Date;
}

/** A new token for the user's current address; earlier unspent ones stop working (only the newest mail counts). */
export async function issueEmailVerification(
  tx: TransactionClient,
  user: { id: string; email: string },
  ttlHours: number,
): Promise<IssuedVerification> {
  const token = `wdsv_${randomBytes(32).toString('base64url')}`;
  const expiresAt = new Date(Date.now() + ttlHours * 3_600_000);
  await tx.emailVerification.deleteMany({ where: { userId: user.id, usedAt: null } });
  await tx.emailVerification.create({
    data: { id: newId(), userId: user.id, email: user.email, tokenHash: sha256Hex(token), expiresAt },
  });
  return { token, expiresAt };
}

/**
 * Spends the token and marks its user verified, in one transaction. The conditional UPDATE takes the token's row
 * lock, so of two parallel spends one wins and the other sees `used_at` set. Unknown, spent, expired and
 * re-addressed tokens answer alike (404) and change nothing.
 */
export async function verifyEmail(prisma: PrismaClient, token: string): Promise<{ email: string; verified: true }> {
  return prisma.$transaction(async (tx) => {
    const [spent] = await tx.$queryRaw<{ user_id: string; email: string }[]>`
      UPDATE email_verifications SET used_at = now()
       WHERE token_hash = ${sha256Hex(token)}::bpchar AND used_at IS NULL AND expires_at > now()
       RETURNING user_id, email`;
    const updated = spent
      ? await tx.user.updateMany({ where: { id: spent.user_id, email: spent.email }, data: { verified: true } })
      : { count: 0 };
    if (!spent || updated.count === 0) {
      throw new DomainError(
        'RESOURCE_NOT_FOUND',
        'The verification token is unknown, used or expired; request a new one.',
      );
    }
    return { email: spent.email, verified: true as const };
  });
}
