import { DomainError, notFound } from '../../errors.ts';
import { sha256Of } from '../../jobs/artifacts.ts';
import { builder } from '../builder.ts';
import { Id } from '../common.ts';
import { loadJob } from './jobs.ts';

export type ArtifactDownloadShape = {
  name: string;
  contentType: string;
  size: number;
  sha256: string;
  content: string;
};

const ArtifactDownload = builder.objectRef<ArtifactDownloadShape>('JobArtifactDownload').implement({
  description: 'An artifact’s content, verified against its recorded size and sha256.',
  fields: (t) => ({
    name: t.exposeString('name'),
    contentType: t.exposeString('contentType'),
    size: t.exposeInt('size'),
    sha256: t.exposeString('sha256'),
    content: t.exposeString('content', { description: 'UTF-8 text (the artifacts jobs produce are JSON Lines).' }),
  }),
});

builder.queryFields((t) => ({
  jobArtifact: t.field({
    type: ArtifactDownload,
    description: 'Downloads a job artifact: 410 ARTIFACT_EXPIRED after its expiry, 409 ARTIFACT_UNVERIFIED when its content no longer matches its digest.',
    args: {
      orgId: t.arg.id({ required: true, validate: Id }),
      jobId: t.arg.id({ required: true, validate: Id }),
      name: t.arg.string({ required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'jobs:read' }),
    resolve: async (_root, args, context) => {
      const [orgId, jobId] = [String(args.orgId), String(args.jobId)];
      await loadJob(context.prisma, orgId, jobId);
      const artifact = await context.prisma.jobArtifact.findFirst({ where: { jobId, name: args.name, listed: true } });
      if (!artifact) throw notFound('artifact');
      if (artifact.expiresAt.getTime() <= Date.now()) {
        throw new DomainError('ARTIFACT_EXPIRED', 'This artifact has expired; run the job again to produce a new one.', {
          details: { expiredAt: artifact.expiresAt.toISOString() },
        });
      }
      const content = Buffer.from(artifact.content);
      const digest = sha256Of(content);
      if (content.length !== Number(artifact.sizeBytes) || digest !== artifact.sha256) {
        context.log.error({ jobId, artifact: artifact.name }, 'artifact content does not match its recorded digest');
        throw new DomainError('ARTIFACT_UNVERIFIED', 'The artifact’s content does not match its recorded checksum; it is not served.');
      }
      return { name: artifact.name, contentType: artifact.contentType, size: content.length, sha256: digest, content: content.toString('utf8') };
    },
  }),
}));
