import { createHash, type Hash } from 'node:crypto';
import type pg from 'pg';
import { inPgTransaction, pgExecutor, type SqlExecutor } from '../../db/sql.ts';
import { DomainError } from '../../kernel/errors.ts';

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
    [
      artifact.jobId,
      artifact.name,
      artifact.contentType,
      artifact.content,
      artifact.content.length,
      sha256Of(artifact.content),
      artifact.listed,
      artifact.ttlHours * 3600,
    ],
  );
}

export async function loadArtifactContent(sql: SqlExecutor, jobId: string, name: string): Promise<Buffer | null> {
  const [row] = await sql.query<{ content: Buffer }>(
    'SELECT content FROM public.job_artifacts WHERE job_id = $1::bpchar AND name = $2',
    [jobId, name],
  );
  return row?.content ?? null;
}

/**
 * Large artifacts (exports) are stored as ordered chunks, written while the job streams so that its worker never
 * holds the whole file; the `job_artifacts` row that makes them downloadable is written last, with the size and
 * sha256 computed on the way (`chunks` > 0, `content` empty).
 */
export async function saveChunk(
  sql: SqlExecutor,
  jobId: string,
  name: string,
  seq: number,
  data: Buffer,
): Promise<void> {
  await sql.query(
    'INSERT INTO public.job_artifact_chunks (job_id, name, seq, data, sha256) VALUES ($1::bpchar, $2, $3, $4, $5)',
    [jobId, name, seq, data, sha256Of(data)],
  );
}

/** Chunks and artifacts of an earlier, unfinished run of the job: it starts again from nothing. */
export async function deleteChunkedArtifacts(sql: SqlExecutor, jobId: string): Promise<void> {
  await sql.query('DELETE FROM public.job_artifact_chunks WHERE job_id = $1::bpchar', [jobId]);
  await sql.query('DELETE FROM public.job_artifacts WHERE job_id = $1::bpchar AND chunks > 0', [jobId]);
}

export interface ChunkedArtifact {
  jobId: string;
  name: string;
  contentType: string;
  size: number;
  sha256: string;
  chunks: number;
  ttlHours: number;
}

export async function registerChunkedArtifact(sql: SqlExecutor, artifact: ChunkedArtifact): Promise<void> {
  await sql.query(
    `INSERT INTO public.job_artifacts (job_id, name, content_type, content, size_bytes, sha256, listed, chunks, expires_at)
     VALUES ($1::bpchar, $2, $3, '\\x'::bytea, $4, $5, true, $6, now() + make_interval(secs => $7))`,
    [
      artifact.jobId,
      artifact.name,
      artifact.contentType,
      artifact.size,
      artifact.sha256,
      artifact.chunks,
      artifact.ttlHours * 3600,
    ],
  );
}

/** What a download needs to know about an artifact before reading any of its bytes. */
export interface StoredArtifact {
  jobId: string;
  name: string;
  size: number;
  sha256: string;
  /** 0: the content is in `job_artifacts.content`. */
  chunks: number;
}

function unverified(artifact: StoredArtifact, reason: string): DomainError {
  return new DomainError(
    'ARTIFACT_UNVERIFIED',
    'The artifact’s content does not match its recorded checksum; it is not served.',
    {
      details: { reason, name: artifact.name },
    },
  );
}

/**
 * Reads chunk `seq` as the socket delivers it (src/db/sql.ts `copyOutValue`) once PostgreSQL has checked it against
 * the sha256 its writer stored, in the same REPEATABLE READ snapshot as the COPY: the bytes read are the bytes
 * checked. PostgreSQL hashes the chunk in its own process, so the API's event loop only feeds each piece into the whole
 * file's digest as it arrives (4 MiB hashed twice on the event loop took ~55 ms a chunk on the shared 2-core machine,
 * docs/decisions/exports.md, "Downloads"). The COPY takes no bound parameters: the job id and name reach it as
 * transaction-local settings (as the exports' filter values do), `seq` is an integer. The connection goes back to
 * the pool before a byte is sent, so a slow client never holds one.
 */
async function readChunk(pool: pg.Pool, artifact: StoredArtifact, seq: number, whole: Hash): Promise<Buffer[]> {
  const pieces: Buffer[] = [];
  const intact = await inPgTransaction(pool, ['SET TRANSACTION ISOLATION LEVEL REPEATABLE READ'], async (sql) => {
    const [chunk] = await sql.query<{ intact: boolean }>(
      `SELECT encode(sha256(data), 'hex') = sha256 AS intact,
              set_config('wds.artifact_job', $1, true), set_config('wds.artifact_name', $2, true)
         FROM public.job_artifact_chunks WHERE job_id = $1::bpchar AND name = $2 AND seq = $3`,
      [artifact.jobId, artifact.name, seq],
    );
    if (!chunk?.intact) return { value: false };
    await sql.copyOutValue(
      `SELECT data FROM public.job_artifact_chunks
        WHERE job_id = current_setting('wds.artifact_job')::bpchar AND name = current_setting('wds.artifact_name')
          AND seq = ${Math.trunc(seq)}`,
      (piece) => {
        whole.update(piece);
        pieces.push(piece);
      },
    );
    return { value: true };
  });
  if (!intact) throw unverified(artifact, `chunk ${seq}`);
  return pieces;
}

/**
 * The artifact's bytes, in pieces of tens of KiB, each checked before it is handed on (ARTIFACT_UNVERIFIED
 * otherwise): the pieces present are exactly `chunks` and add up to `size` (checked before any byte is read:
 * `octet_length` of an uncompressed TOAST value reads only its header), every chunk matches the sha256 its writer
 * stored (checked by PostgreSQL, on the snapshot the bytes are read from) before any of its pieces is handed on,
 * and the last chunk's pieces only when the whole file's digest, computed here from the bytes received, matches the
 * artifact's. So no byte that fails a check is ever sent, and a consumer that gets every piece got exactly the
 * recorded file. Once the first piece of a chunk is taken the next chunk is read, so a download holds about two
 * chunks (one being sent, one read); the event loop hashes piece by piece as the bytes arrive, never 4 MiB at once
 * (docs/decisions/exports.md, "Downloads").
 */
export async function* verifiedContent(pool: pg.Pool, artifact: StoredArtifact): AsyncGenerator<Buffer> {
  if (artifact.chunks === 0) {
    const content = await loadArtifactContent(pgExecutor(pool), artifact.jobId, artifact.name);
    if (!content || content.length !== artifact.size || sha256Of(content) !== artifact.sha256)
      throw unverified(artifact, 'content');
    yield content;
    return;
  }
  const [shape] = await pgExecutor(pool).query<{ count: number; bytes: string; last: number | null }>(
    `SELECT count(*)::int AS count, coalesce(sum(octet_length(data)), 0)::text AS bytes, max(seq) AS last
       FROM public.job_artifact_chunks WHERE job_id = $1::bpchar AND name = $2`,
    [artifact.jobId, artifact.name],
  );
  if (
    !shape ||
    shape.count !== artifact.chunks ||
    shape.last !== artifact.chunks - 1 ||
    Number(shape.bytes) !== artifact.size
  ) {
    throw unverified(artifact, 'chunks');
  }
  const whole = createHash('sha256');
  let next = readChunk(pool, artifact, 0, whole);
  for (let seq = 0; seq < artifact.chunks; seq += 1) {
    const pieces = await next;
    if (seq === artifact.chunks - 1 && whole.digest('hex') !== artifact.sha256) throw unverified(artifact, 'digest');
    const [first, ...rest] = pieces;
    if (first) yield first;
    if (seq + 1 < artifact.chunks) {
      next = readChunk(pool, artifact, seq + 1, whole);
      // A consumer that stops (a client gone, a HEAD) leaves this read to finish on its own.
      next.catch(() => undefined);
    }
    yield* rest;
  }
}
