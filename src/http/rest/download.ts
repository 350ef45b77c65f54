import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import type pg from 'pg';
import { DomainError } from '../../kernel/errors.ts';
import { verifiedContent, type StoredArtifact } from '../../jobs/engine/artifacts.ts';
import { sendDomainError } from '../error-response.ts';

/** What the artifact route's GraphQL operation answers: everything but the bytes. */
export interface ArtifactPayload extends StoredArtifact {
  contentType: string;
}

/** RFC 6266: a safe ASCII name, plus the exact (UTF-8) name in `filename*` when the two differ. */
function contentDisposition(name: string): string {
  const fallback = name.replace(/[^\w.-]/g, '_');
  const exact = fallback === name ? '' : `; filename*=UTF-8''${encodeURIComponent(name)}`;
  return `attachment; filename="${fallback}"${exact}`;
}

/**
 * The one exception to "a route is one GraphQL operation" (docs/decisions/exports.md, "Downloads"): the operation
 * has already decided authority and expiry and answered the artifact's size and digest; the bytes are streamed
 * from storage here, a chunk at a time in pieces of tens of KiB, so the API process never holds a whole export. Each piece is
 * verified before it is sent (src/jobs/engine/artifacts.ts). The first piece is read before the status line, so a
 * failed check there (every single-piece artifact, or a missing or resized chunk) is still 409 ARTIFACT_UNVERIFIED.
 * A later failure can only cut the connection: the client sees fewer bytes than Content-Length and no matching
 * Content-Digest.
 */
export async function streamArtifact(
  req: Request,
  res: Response,
  pool: pg.Pool,
  artifact: ArtifactPayload,
): Promise<void> {
  const pieces = verifiedContent(pool, artifact);
  let first: IteratorResult<Buffer>;
  try {
    first = await pieces.next();
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    res.locals.log.error(
      { jobId: artifact.jobId, artifact: artifact.name, details: error.details },
      'artifact content does not match its recorded digest',
    );
    return sendDomainError(req, res, error);
  }
  res
    .status(200)
    .type(artifact.contentType)
    .set('Content-Length', String(artifact.size))
    .set('Content-Disposition', contentDisposition(artifact.name))
    .set('Content-Digest', `sha-256=:${Buffer.from(artifact.sha256, 'hex').toString('base64')}:`);
  if (req.method === 'HEAD') {
    await pieces.return(undefined);
    res.end();
    return;
  }
  async function* all(): AsyncGenerator<Buffer> {
    if (!first.done) yield first.value;
    yield* pieces;
  }
  // highWaterMark 1: the next piece (tens of KiB) is taken once the socket has taken the previous one into its
  // buffer (`drain`), and verifiedContent reads a chunk ahead, so a download holds about two chunks whatever the
  // file's size.
  try {
    await pipeline(Readable.from(all(), { objectMode: false, highWaterMark: 1 }), res);
  } catch (error) {
    if (error instanceof DomainError) {
      res.locals.log.error(
        { jobId: artifact.jobId, artifact: artifact.name, details: error.details },
        'artifact piece failed its check mid-download; connection cut',
      );
    } else if ((error as { code?: string }).code !== 'ERR_STREAM_PREMATURE_CLOSE') {
      res.locals.log.error({ err: error, jobId: artifact.jobId, artifact: artifact.name }, 'artifact download failed');
    }
  }
}
