import type { PrismaClient } from '../../db/prisma.ts';

/** Deletes expired idempotency records in batches, so one sweep never holds long locks. Returns rows removed. */
export async function sweepIdempotencyRecords(prisma: PrismaClient, batchSize = 1_000): Promise<number> {
  let removed = 0;
  for (;;) {
    const deleted = await prisma.$executeRaw`
      DELETE FROM idempotency_records
       WHERE ctid IN (SELECT ctid FROM idempotency_records WHERE expires_at < now() LIMIT ${batchSize})`;
    removed += deleted;
    if (deleted < batchSize) return removed;
  }
}
