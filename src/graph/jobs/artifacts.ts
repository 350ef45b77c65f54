import { DomainError, notFound } from '../../kernel/errors.ts';
import { verifiedContent, type StoredArtifact } from '../../jobs/engine/artifacts.ts';
import { JOB_CATEGORIES, type JobKind } from '../../jobs/engine/kinds.ts';
import type { OAuthScope } from '../../kernel/authority.ts';
import { requireCaller, requireScope } from '../server/guards.ts';
import { builder } from '../server/builder.ts';
import { Id } from '../../kernel/formats.ts';
import { sqlPoolOf } from '../../db/prisma.ts';
import type { Context } from '../server/context.ts';
import { artifactUrlOf, loadJob } from './jobs.ts';
import { BULK_FIELD_COST } from '../server/query-limits.ts';

/**
 * Largest artifact whose bytes the `content` field returns. GraphQL holds a whole response in memory (and base64
 * adds a third), so bigger files (exports) are only served by the REST download, which streams them.
 */
export const GRAPHQL_CONTENT_LIMIT = 8 * 1024 * 1024;

export type ArtifactDownloadShape = StoredArtifact & { orgId: string; contentType: string };

/** Text artifacts travel as UTF-8; anything else (XLSX, ZIP) as base64. */
function encodingOf(contentType: string): 'utf8' | 'base64' {
  return contentType.startsWith('text/') || contentType === 'application/x-ndjson' || contentType === 'application/json'
    ? 'utf8'
    : 'base64';
}

/**
 * Who may read an artifact's bytes (issue 26 §9). Every artifact holds cell values (export files, import reports,
 * unconvertible values), so its content needs the scope that reading rows needs, beside `jobs:read`; a database
 * archive also holds the schema. An export's file is its creator's alone: it was cut to what they could read when
 * it ran (their personal views, a personal view's rows, their choice of fields), and re-checking that for another
 * reader would mean re-running it. Others see the job and its artifact's metadata, and run their own export.
 */
function requireArtifactReader(context: Context, job: { kind: string; actorId: string }): void {
  const scopes: OAuthScope[] = job.kind === 'exportDatabase' ? ['rows:read', 'schema:read'] : ['rows:read'];
  for (const scope of scopes) requireScope(context, scope);
  if (JOB_CATEGORIES[job.kind as JobKind] === 'exports' && job.actorId !== requireCaller(context).actorId) {
    throw new DomainError(
      'FORBIDDEN',
      'An export’s file can be downloaded only by whoever asked for the export; ask for your own export.',
      {
        details: { reason: 'export_creator_only' },
      },
    );
  }
}

async function contentOf(artifact: ArtifactDownloadShape, context: Context): Promise<string> {
  if (artifact.size > GRAPHQL_CONTENT_LIMIT) {
    const url = artifactUrlOf(artifact.orgId, artifact.jobId, artifact.name);
    throw new DomainError(
      'PAYLOAD_TOO_LARGE',
      `This artifact has ${artifact.size} bytes; GraphQL returns the content of artifacts up to ${GRAPHQL_CONTENT_LIMIT} bytes. Download it from ${url}.`,
      {
        details: { size: artifact.size, limit: GRAPHQL_CONTENT_LIMIT, url },
      },
    );
  }
  const pieces: Buffer[] = [];
  try {
    for await (const piece of verifiedContent(sqlPoolOf(context.prisma), artifact)) pieces.push(piece);
  } catch (error) {
    if (error instanceof DomainError)
      context.log.error(
        { jobId: artifact.jobId, artifact: artifact.name, details: error.details },
        'artifact content does not match its recorded digest',
      );
    throw error;
  }
  return Buffer.concat(pieces).toString(encodingOf(artifact.contentType));
}

const ArtifactDownload = builder.objectRef<ArtifactDownloadShape>('JobArtifactDownload').implement({
  description: 'A downloadable artifact: what a download needs to know, and (up to 8 MiB) its verified content.',
  fields: (t) => ({
    jobId: t.exposeID('jobId'),
    name: t.exposeString('name'),
    contentType: t.exposeString('contentType'),
    size: t.exposeInt('size', { description: 'Bytes.' }),
    sha256: t.exposeString('sha256', { description: 'Hex digest of the whole content.' }),
    chunks: t.exposeInt('chunks', { description: 'How many stored pieces hold the content (0: stored in one piece).' }),
    encoding: t.string({
      description: '`utf8` for text artifacts (CSV, JSON Lines), `base64` for binary ones (XLSX, ZIP).',
      resolve: (artifact) => encodingOf(artifact.contentType),
    }),
    content: t.string({
      description:
        'The bytes, encoded as `encoding` says, checked against the recorded size and sha256 (ARTIFACT_UNVERIFIED otherwise). ' +
        'Only for artifacts up to 8 MiB (8,388,608 bytes); larger ones answer PAYLOAD_TOO_LARGE: download them from the REST route, which streams. ' +
        `Costs ${BULK_FIELD_COST} of the query cost, so an operation reads at most one artifact's content.`,
      extensions: { cost: BULK_FIELD_COST },
      resolve: (artifact, _args, context) => contentOf(artifact, context),
    }),
  }),
});

builder.queryFields((t) => ({
  jobArtifact: t.field({
    type: ArtifactDownload,
    description:
      'A job artifact for download: 410 ARTIFACT_EXPIRED after its expiry, 409 ARTIFACT_UNVERIFIED when its content no longer matches its digest. ' +
      'Needs `rows:read` (a database archive also `schema:read`); an export’s file only for whoever asked for the export (403 otherwise).',
    args: {
      orgId: t.arg.id({ required: true, validate: Id }),
      jobId: t.arg.id({ required: true, validate: Id }),
      name: t.arg.string({ required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'jobs:read' }),
    resolve: async (_root, args, context) => {
      const [orgId, jobId] = [String(args.orgId), String(args.jobId)];
      requireArtifactReader(context, await loadJob(context.prisma, orgId, jobId));
      const artifact = await context.prisma.jobArtifact.findFirst({
        where: { jobId, name: args.name, listed: true },
        select: { name: true, contentType: true, sizeBytes: true, sha256: true, chunks: true, expiresAt: true },
      });
      if (!artifact) throw notFound('artifact');
      if (artifact.expiresAt.getTime() <= Date.now()) {
        throw new DomainError(
          'ARTIFACT_EXPIRED',
          'This artifact has expired; run the job again to produce a new one.',
          {
            details: { expiredAt: artifact.expiresAt.toISOString() },
          },
        );
      }
      return {
        orgId,
        jobId,
        name: artifact.name,
        contentType: artifact.contentType,
        size: Number(artifact.sizeBytes),
        sha256: artifact.sha256,
        chunks: artifact.chunks,
      };
    },
  }),
}));
