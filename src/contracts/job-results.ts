import { z } from 'zod';
import { JOB_STATES } from '../jobs/engine/sql/queue.ts';
import { JOB_KINDS, type JobKind } from '../jobs/engine/kinds.ts';
import { JOB_RESULTS } from '../jobs/kinds/results.ts';
import { Id, Timestamp } from '../kernel/formats.ts';
import { JobError } from './error-details.ts';

/*
 * The job status record behind every `statusUrl` (issue 5; spec 2.16 leaves it open), one variant per kind: `kind`
 * says which, and the variant types `result` with the kind's declared result (src/jobs/kinds/results.ts). In the
 * OpenAPI document `Job` is a `oneOf` of `<Kind>Job` components with a `discriminator` on `kind`, which
 * openapi-typescript and @hey-api turn into a union a client narrows with `if (job.kind === 'exportRows')`.
 */

export const JobArtifact = z
  .strictObject({
    name: z.string(),
    contentType: z.string(),
    size: z.number().int().min(0),
    sha256: z.string().regex(/^[0-9a-f]{64}$/),
    createdAt: Timestamp,
    expiresAt: Timestamp,
    url: z.string(),
  })
  .meta({ id: 'JobArtifact' });

export const JobProgress = z
  .strictObject({ done: z.number().int().min(0), total: z.number().int().min(0).nullable() })
  .meta({ id: 'JobProgress' });

const componentOf = (kind: JobKind) => `${kind[0]!.toUpperCase()}${kind.slice(1)}Job`;

function jobOf<Kind extends JobKind>(kind: Kind) {
  return z
    .strictObject({
      jobId: Id,
      kind: z.literal(kind),
      state: z.enum(JOB_STATES as [string, ...string[]]),
      progress: JobProgress,
      createdAt: Timestamp,
      updatedAt: Timestamp,
      startedAt: Timestamp.nullable(),
      finishedAt: Timestamp.nullable(),
      result: (JOB_RESULTS[kind] as (typeof JOB_RESULTS)[Kind])
        .nullable()
        .describe('The kind’s result once the job succeeded, partially completed or failed verifiably; else null.'),
      error: JobError.nullable(),
      artifacts: z.array(JobArtifact),
    })
    .meta({ id: componentOf(kind) });
}

type JobVariant = { [Kind in JobKind]: ReturnType<typeof jobOf<Kind>> }[JobKind];

export const JobResponse = z
  .discriminatedUnion('kind', JOB_KINDS.map((kind) => jobOf(kind)) as [JobVariant, ...JobVariant[]])
  .meta({
    id: 'Job',
    discriminator: {
      propertyName: 'kind',
      mapping: Object.fromEntries(JOB_KINDS.map((kind) => [kind, `#/components/schemas/${componentOf(kind)}`])),
    },
  });
export type JobResponse = z.infer<typeof JobResponse>;
