import { z } from 'zod';
import { CHANGE_KINDS, MAX_CHANGE_PAGE } from '../catalog/changes.ts';
import { Id, Timestamp, VersionString } from '../kernel/formats.ts';

/** The change feed's requests and answers (issue 27): REST, GraphQL and OpenAPI read these. */

export const ChangeCursor = z.string().min(1).max(200);

export const ChangesQuery = z.strictObject({
  after: ChangeCursor.optional(),
  limit: z.coerce.number().int().min(1).max(MAX_CHANGE_PAGE).default(100),
  tableId: Id.optional(),
  /** Seconds to wait for a change when none is there yet (long poll). */
  wait: z.coerce.number().int().min(1).max(30).optional(),
});
export type ChangesQuery = z.output<typeof ChangesQuery>;

export const RowChangesQuery = z.strictObject({ after: ChangeCursor.optional(), tableId: Id.optional() });

/** Members a change does not have (a table change's rowId, a create's previous) are null here, absent in webhooks. */
export const ChangeResponse = z.strictObject({
  cursor: ChangeCursor,
  kind: z.enum(CHANGE_KINDS),
  tableId: Id,
  rowId: Id.nullable(),
  version: VersionString.nullable(),
  schemaVersion: z.number().int().nullable(),
  mutationId: Id,
  actor: z.strictObject({ id: z.string(), kind: z.string() }),
  committedAt: Timestamp,
  values: z.record(z.string(), z.unknown()).nullable(),
  previous: z.record(z.string(), z.unknown()).nullable(),
});

export const ChangePageResponse = z.strictObject({
  data: z.array(ChangeResponse).max(MAX_CHANGE_PAGE),
  nextCursor: ChangeCursor,
  hasMore: z.boolean(),
});

export const ChangeHeadResponse = z.strictObject({ cursor: ChangeCursor });
