import { z } from 'zod';
import { Id, Timestamp, VersionString } from '../kernel/formats.ts';

/** The trash domain's contract (issue 13): what REST, GraphQL and OpenAPI read. No side effects. */

/** What DELETE of a database or table answers, and one item of GET …/trash. */
export const TrashEntryResponse = z.strictObject({
  id: Id,
  kind: z.enum(['database', 'table']),
  name: z.string().min(1).max(120),
  databaseId: Id.nullable(),
  databaseName: z.string().nullable(),
  version: VersionString,
  deletedAt: Timestamp,
  deletedBy: z.strictObject({ id: Id, name: z.string() }),
  purgeAfter: Timestamp,
  purgeJobId: Id,
  purgeJobUrl: z.string(),
});

/** POST …/trash/{id}/restore. */
export const RestoredResponse = z.strictObject({
  id: Id,
  kind: z.enum(['database', 'table']),
  name: z.string().min(1).max(120),
  databaseId: Id.nullable(),
  version: VersionString,
  restoredTables: z.number().int().min(0),
});
