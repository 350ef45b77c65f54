import type { PrismaClient } from '../../db/prisma.ts';

/**
 * Deletes email verification tokens that can no longer be spent: used, or expired (`POST /v1/auth/verify-email`
 * spends only `expires_at > now()`). Live ones stay. A spent row is no record worth keeping: `users.verified` holds
 * the outcome. In batches, like the idempotency sweep. Returns rows removed.
 */
export async function sweepEmailVerifications(prisma: PrismaClient, batchSize = 1_000): Promise<number> {
  let removed = 0;
  for (;;) {
    const deleted = await prisma.$executeRaw`
      DELETE FROM email_verifications
       WHERE ctid IN (SELECT ctid FROM email_verifications WHERE used_at IS NOT NULL OR expires_at <= now() LIMIT ${batchSize})`;
    removed += deleted;
    if (deleted < batchSize) return removed;
  }
}
