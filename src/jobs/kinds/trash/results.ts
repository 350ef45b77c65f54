import { z } from 'zod';
import { Id } from '../../../kernel/formats.ts';

/* What the purge kinds answer as a job's `result` (read by the OpenAPI `Job` through src/jobs/kinds/results.ts). */

export const DeleteDatabaseResult = z
  .strictObject({ purged: z.literal(true), databaseId: Id, tables: z.number().int().min(0) })
  .meta({ id: 'DeleteDatabaseResult' });
export type DeleteDatabaseResult = z.infer<typeof DeleteDatabaseResult>;

export const DeleteTableResult = z
  .strictObject({ purged: z.literal(true), tableId: Id })
  .meta({ id: 'DeleteTableResult' });
export type DeleteTableResult = z.infer<typeof DeleteTableResult>;
