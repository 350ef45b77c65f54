import { z } from 'zod';
import { Id, SchemaVersion } from '../../../kernel/formats.ts';

/* What the export kinds answer as a job's `result` (read by the OpenAPI `Job` through src/jobs/kinds/results.ts). */

const Count = z.number().int().min(0);

/** The exported file: download it from the job's `artifacts` (same name). */
export const ExportArtifact = z
  .strictObject({ name: z.string(), size: Count.describe('Bytes.'), sha256: z.string().regex(/^[0-9a-f]{64}$/) })
  .meta({ id: 'ExportArtifact' });

/** What every export adds to its writer's fields: rows written, rows the snapshot held, the file. */
export const ExportTotals = { rowsDone: Count, rowsTotal: Count, artifact: ExportArtifact };

export const ExportRowsResult = z
  .strictObject({
    format: z.enum(['csv', 'jsonl', 'xlsx']),
    fieldIds: z.array(Id).describe('The exported columns, in order.'),
    schemaVersion: SchemaVersion.describe('The table’s schema version the export read.'),
    ...ExportTotals,
  })
  .meta({ id: 'ExportRowsResult', description: 'exportRows and exportView.' });
export type ExportRowsResult = z.infer<typeof ExportRowsResult>;

export const ExportDatabaseResult = z
  .strictObject({ format: z.enum(['csv', 'jsonl']), tables: Count, ...ExportTotals })
  .meta({ id: 'ExportDatabaseResult' });
export type ExportDatabaseResult = z.infer<typeof ExportDatabaseResult>;
