import { z } from 'zod';
import { Id, SchemaVersion } from '../../../kernel/formats.ts';

/*
 * What the import kinds answer as a job's `result` (succeeded, partially completed, or failed with counts); the
 * OpenAPI `Job` reads these through JOB_RESULTS (src/jobs/kinds/results.ts). No code that runs a job lives here.
 */

const Count = z.number().int().min(0);

/** The `errors.jsonl` artifact: one line per problem, at most 100,000 (`truncated` says more were found). */
export const ImportReport = z
  .strictObject({
    name: z.string(),
    size: Count.describe('Bytes.'),
    sha256: z.string().regex(/^[0-9a-f]{64}$/),
    problems: Count.describe('Problems listed in the report.'),
    truncated: z.boolean(),
  })
  .meta({ id: 'ImportReport' });

const ImportCounts = {
  totalRows: Count,
  validRows: Count,
  invalidRows: Count,
};

export const PreviewImportRowsResult = z
  .strictObject({
    ...ImportCounts,
    schemaVersion: SchemaVersion.describe('The table’s schema version the preview checked against.'),
    preview: z
      .array(
        z.strictObject({
          line: z.number().int().min(1),
          valid: z.boolean(),
          values: z.record(Id, z.json()).describe('Typed cell values by field id.'),
        }),
      )
      .describe('The first rows as they would be stored.'),
    report: ImportReport,
  })
  .meta({ id: 'PreviewImportRowsResult' });
export type PreviewImportRowsResult = z.infer<typeof PreviewImportRowsResult>;

export const ImportRowsResult = z
  .strictObject({
    ...ImportCounts,
    insertedRows: Count,
    skippedRows: Count,
    mode: z.enum(['valid-rows-only', 'all-or-nothing']),
    report: ImportReport,
  })
  .meta({ id: 'ImportRowsResult' });
export type ImportRowsResult = z.infer<typeof ImportRowsResult>;
