import { z } from 'zod';
import { isStorableText } from '../data/field-types.ts';
import { JOB_KINDS } from '../jobs/engine/kinds.ts';
import { JOB_STATES, type JobState } from '../jobs/engine/sql/queue.ts';
import { MappingItem } from '../jobs/kinds/imports/mapping.ts';
import { SchemaChange } from '../jobs/kinds/schema/plan.ts';
import { Id, SchemaVersion } from '../kernel/formats.ts';
import { BIDI_CONTROL_MESSAGE, BIDI_CONTROLS } from '../kernel/input-hygiene.ts';
import { PageQuery } from './pages.ts';

/**
 * The jobs domain's contract: a job's status and handle, the list filters, and the bodies of the jobs started under
 * a table (imports, endpoint 4; schema changes, endpoint 5). Exports and backups start jobs too: their bodies are in
 * exports.ts and backups.ts. No side effects.
 */

/** Spec 2.7. */
export const JobHandleResponse = z.strictObject({ jobId: Id, state: z.literal('queued'), statusUrl: z.string() });

export const JobStateFilter = z.enum(JOB_STATES as [JobState, ...JobState[]]);
export const JobKindFilter = z.enum(JOB_KINDS as [string, ...string[]]);

/** GET /v1/orgs/{orgId}/jobs: a page, optionally only the jobs in one state or of one kind. */
export const ListJobsQuery = PageQuery.extend({ state: JobStateFilter.optional(), kind: JobKindFilter.optional() });

/** GET …/jobs/{jobId}/artifacts/{name}: the artifact's name is the one path parameter that is not an id. */
export const ArtifactPath = z.strictObject({ orgId: Id, jobId: Id, name: z.string().min(1).max(128) });

/** Spec §8: import content is at most 4,194,304 characters (Unicode code points, as JSON Schema counts). */
export const MAX_IMPORT_CHARACTERS = 4_194_304;
/** The JSON body of a maximal import: every character escaped as `\uXXXX` takes 6 bytes, plus the other members. */
export const IMPORT_BODY_LIMIT = MAX_IMPORT_CHARACTERS * 6 + 1_048_576;

const FileName = z
  .string()
  .min(1)
  .max(255)
  .refine(isStorableText, 'must not contain U+0000 or an unpaired surrogate')
  .refine(
    (name) => !/[\u0000-\u001f\u007f/\\]/.test(name),
    'must be a file name without control characters or path separators',
  )
  .refine((name) => !BIDI_CONTROLS.test(name), BIDI_CONTROL_MESSAGE);

export const PreviewImportBody = z.strictObject({
  expectedSchemaVersion: SchemaVersion,
  format: z.enum(['csv', 'jsonl']),
  // The 4,194,304-character limit answers 413 (a payload budget, spec §7), so it is checked by the resolver.
  content: z.string().describe(`At most ${MAX_IMPORT_CHARACTERS} characters (413 PAYLOAD_TOO_LARGE beyond).`),
  fileName: FileName,
  mapping: z.array(MappingItem).min(1).max(200),
  header: z.boolean().optional().describe('CSV only: whether the first record names the columns (default true).'),
});
export type PreviewImportBody = z.infer<typeof PreviewImportBody>;

export const ImportRowsBody = z.strictObject({
  previewJobId: Id,
  expectedSchemaVersion: SchemaVersion,
  mode: z.enum(['valid-rows-only', 'all-or-nothing']),
});
export type ImportRowsBody = z.infer<typeof ImportRowsBody>;

/** Endpoint 5: a journalled, resumable schema change with verified cutover, run as a durable job. */
export const ApplySchemaChangeBody = z.strictObject({
  expectedSchemaVersion: SchemaVersion,
  change: SchemaChange,
});
export type ApplySchemaChangeBody = z.infer<typeof ApplySchemaChangeBody>;
