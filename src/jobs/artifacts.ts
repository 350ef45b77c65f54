import { createHash } from 'node:crypto';
import type { SqlExecutor } from '../db/sql.ts';

export interface ArtifactInput {
  jobId: string;
  name: string;
  contentType: string;
  content: Buffer;
  /** false for a job's own inputs (an import's upload), which are kept but not offered for download. */
  listed: boolean;
  ttlHours: number;
}

export function sha256Of(content: Buffer): string {
  return createHash('sha256').update(content).digest('hex');
}

/** Stores (or replaces, on a rerun) one artifact with its size and digest. */
export async function saveArtifact(sql: SqlExecutor, artifact: ArtifactInput): Promise<void> {
  await sql.query(
    `INSERT INTO public.job_artifacts (job_id, name, content_type, content, size_bytes, sha256, listed, expires_at)
     VALUES ($1::bpchar, $2, $3, $4, $5, $6, $7, now() + make_interval(secs => $8))
     ON CONFLICT (job_id, name) DO UPDATE
        SET content_type = EXCLUDED.content_type, content = EXCLUDED.content, size_bytes = EXCLUDED.size_bytes,
            sha256 = EXCLUDED.sha256, listed = EXCLUDED.listed, created_at = now(), expires_at = EXCLUDED.expires_at`,
    [artifact.jobId, artifact.name, artifact.contentType, artifact.content, artifact.content.length, sha256Of(artifact.content),
      artifact.listed, artifact.ttlHours * 3600],
  );
}

export async function loadArtifactContent(sql: SqlExecutor, jobId: string, name: string): Promise<Buffer | null> {
  const [row] = await sql.query<{ content: Buffer }>(
    'SELECT content FROM public.job_artifacts WHERE job_id = $1::bpchar AND name = $2', [jobId, name]);
  return row?.content ?? null;
}
