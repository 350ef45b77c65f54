import type { PrismaClient } from '../../db/prisma.ts';

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
    const chunked = await prisma.$executeRaw`
      UPDATE job_artifacts SET chunks = 0
       WHERE (job_id, name) IN (SELECT job_id, name FROM job_artifacts WHERE expires_at < now() AND chunks > 0 LIMIT ${batchSize})`;
    // An export's chunks go with it; the row stays (410), as for an artifact stored in one value.
    await prisma.$executeRaw`
      DELETE FROM job_artifact_chunks c
       WHERE NOT EXISTS (SELECT 1 FROM job_artifacts a WHERE a.job_id = c.job_id AND a.name = c.name AND a.chunks > 0)
         AND EXISTS (SELECT 1 FROM job_artifacts a WHERE a.job_id = c.job_id AND a.name = c.name)`;
    freed += updated + chunked;
    if (updated < batchSize && chunked < batchSize) return freed;
  }
}
