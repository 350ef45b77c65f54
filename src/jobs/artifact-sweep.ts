import type { PrismaClient } from '../db/prisma.ts';

/**
 * Frees the content of expired artifacts (import uploads and reports), in batches. The rows stay, so a download
 * of an expired artifact keeps answering 410 ARTIFACT_EXPIRED rather than 404. Returns artifacts freed.
 */
export async function sweepExpiredArtifacts(prisma: PrismaClient, batchSize = 100): Promise<number> {
  let freed = 0;
  for (;;) {
    const updated = await prisma.$executeRaw`
      UPDATE job_artifacts SET content = '\\x'::bytea
       WHERE (job_id, name) IN (SELECT job_id, name FROM job_artifacts
                                 WHERE expires_at < now() AND octet_length(content) > 0 LIMIT ${batchSize})`;
    freed += updated;
    if (updated < batchSize) return freed;
  }
}
