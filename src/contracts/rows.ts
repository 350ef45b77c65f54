import { z } from 'zod';
import { Cursor } from '../catalog/cursor.ts';
import { FilterExpression, OrderBy } from '../data/filter.ts';
import { Id, SchemaVersion, Timestamp, VersionString } from '../kernel/formats.ts';
import { JsonQueryParameter, Page, PageQuery } from './pages.ts';
import { SearchText } from './rows-search.ts';

/**
 * Rows (spec 2.6, 4.8): the bodies and responses of single-row writes, restore, row pages and cell history. Batches
 * are `rows-batch.ts`; aggregates, search and lookups have their own files. The GraphQL inputs validate with them
 * once, REST validates and documents with them, and the OpenAPI document is generated from them. How values fit the
 * table's fields is the domain's check (src/graph/rows/row-values.ts), not a shape. No side effects.
 */

/** A row's cells as a write names them: keyed by field id or exact name; how they fit the table is checked later. */
export const RowValues = z.record(z.string(), z.unknown());

/** POST …/rows and `createRow(input:)`. */
export const CreateRowBody = z.strictObject({ expectedSchemaVersion: SchemaVersion, values: RowValues });
export type CreateRowBody = z.infer<typeof CreateRowBody>;

/** PATCH …/rows/{rowId} and `updateRow(input:)`: the named cells change, the others stay. */
export const UpdateRowBody = z.strictObject({
  expectedVersion: VersionString,
  values: RowValues,
  expectedSchemaVersion: SchemaVersion.optional(),
});
export type UpdateRowBody = z.infer<typeof UpdateRowBody>;

/** DELETE …/rows/{rowId} and `deleteRow(input:)`. */
export const DeleteRowBody = z.strictObject({
  expectedVersion: VersionString,
  expectedSchemaVersion: SchemaVersion.optional(),
});
export type DeleteRowBody = z.infer<typeof DeleteRowBody>;

/**
 * POST …/rows/{rowId}/restore and `restoreRow(input:)` (docs/decisions/lifecycle.md, "Row restore"):
 * `expectedVersion` is the version of the deletion, as the delete answered it and the history shows it.
 */
export const RestoreRowBody = z.strictObject({
  expectedVersion: VersionString,
  expectedSchemaVersion: SchemaVersion.optional(),
});
export type RestoreRowBody = z.infer<typeof RestoreRowBody>;

const INCLUDE_TOTAL =
  'answer `total`, the exact count of the matches, on the first page: a full count, whose cost grows with the matches';
const IncludeTotal = z
  .enum(['true', 'false'])
  .transform((value) => value === 'true')
  .describe(INCLUDE_TOTAL);

/** GET …/rows's query parameters. */
export const RowListQuery = PageQuery.extend({
  viewId: Id.optional().describe('read through this saved view (its filter, order and hidden columns)'),
  where: JsonQueryParameter(
    FilterExpression,
    'JSON filter expression (spec 2.4); fields by id or exact name',
  ).optional(),
  orderBy: JsonQueryParameter(OrderBy, 'JSON array of {field, direction} (at most 8); row id breaks ties').optional(),
  search: SearchText.optional(),
  includeTotal: IncludeTotal.optional(),
});

/**
 * GET …/rows's parameters as a JSON body (POST …/rows/query), for filters larger than a URL may be: the spec allows
 * 32 path items of 1,024 characters, and Node refuses request lines and headers over 16 KiB
 * (docs/decisions/input-hygiene.md).
 */
export const RowQueryBody = z.strictObject({
  viewId: Id.optional().describe('read through this saved view (its filter, order and hidden columns)'),
  where: FilterExpression.optional().describe('filter expression (spec 2.4); fields by id or exact name'),
  orderBy: OrderBy.optional().describe('[{field, direction}] (at most 8); row id breaks ties'),
  limit: z.int().min(1).max(100).optional(),
  cursor: Cursor.optional(),
  search: SearchText.optional(),
  includeTotal: z.boolean().optional().describe(INCLUDE_TOTAL),
});

/** Spec 2.6 `row`. */
export const RowResponse = z.strictObject({
  id: Id,
  version: VersionString,
  createdAt: Timestamp,
  updatedAt: Timestamp,
  values: z.record(Id, z.unknown()),
});

/** GET …/rows's page: `total` only when `includeTotal` asked for it (null on later pages). */
export const RowListPage = Page(RowResponse).extend({ total: z.int().min(0).nullable().optional() });

export const RowMutationResponse = z.strictObject({ row: RowResponse, mutationId: Id });

export const RowDeletionResponse = z.strictObject({
  id: Id,
  deleted: z.literal(true),
  version: VersionString,
  mutationId: Id,
});

export const HistoryEntryResponse = z.strictObject({
  rowId: Id,
  fieldId: Id,
  version: VersionString,
  operation: z.enum(['create', 'update', 'delete', 'restore']),
  value: z.unknown(),
  mutationId: Id,
  actor: z.strictObject({ id: Id, kind: z.string(), name: z.string() }),
  changedAt: Timestamp,
});
