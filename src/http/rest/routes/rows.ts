import { z } from 'zod';
import { Id, Timestamp, VersionString } from '../../../kernel/formats.ts';
import { CreateRowBody, DeleteRowBody, UpdateRowBody } from '../../../graph/rows/rows.ts';
import { BatchRowsBody } from '../../../graph/rows/row-batch-plan.ts';
import { FilterExpression, OrderBy } from '../../../data/filter.ts';
import { RestoreRowBody } from '../../../graph/rows/row-restore.ts';
import {
  BatchRowsDocument,
  CreateRowDocument,
  DeleteRowDocument,
  GetRowDocument,
  ListRowHistoryDocument,
  ListRowsDocument,
  RestoreRowDocument,
  UpdateRowDocument,
} from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';
import { JsonQueryParameter, Page, PageQuery } from '../../../contracts/pages.ts';
import { Cursor } from '../../../catalog/cursor.ts';
import { SearchText } from '../../../contracts/rows-search.ts';

const INCLUDE_TOTAL =
  'answer `total`, the exact count of the matches, on the first page: a full count, whose cost grows with the matches';
const IncludeTotal = z
  .enum(['true', 'false'])
  .transform((value) => value === 'true')
  .describe(INCLUDE_TOTAL);

/** Spec 2.6 `row`. */
export const RowResponse = z.strictObject({
  id: Id,
  version: VersionString,
  createdAt: Timestamp,
  updatedAt: Timestamp,
  values: z.record(Id, z.unknown()),
});

/** GET …/rows's page: `total` only when `includeTotal` asked for it (null on later pages). */
const RowListPage = Page(RowResponse).extend({ total: z.int().min(0).nullable().optional() });

export const RowMutationResponse = z.strictObject({ row: RowResponse, mutationId: Id });
export const RowBatchResponse = z.strictObject({
  results: z.array(
    z.strictObject({ row: RowResponse, outcome: z.enum(['created', 'updated', 'deleted', 'unchanged']) }),
  ),
  mutationId: Id,
});
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

const RowListQuery = PageQuery.extend({
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
 * GET …/rows's parameters as a JSON body, for filters larger than a URL may be: the spec allows 32 path items of
 * 1,024 characters, and Node refuses request lines and headers over 16 KiB (docs/decisions/input-hygiene.md).
 */
const RowQueryBody = z.strictObject({
  viewId: Id.optional().describe('read through this saved view (its filter, order and hidden columns)'),
  where: FilterExpression.optional().describe('filter expression (spec 2.4); fields by id or exact name'),
  orderBy: OrderBy.optional().describe('[{field, direction}] (at most 8); row id breaks ties'),
  limit: z.int().min(1).max(100).optional(),
  cursor: Cursor.optional(),
  search: SearchText.optional(),
  includeTotal: z.boolean().optional().describe(INCLUDE_TOTAL),
});

const TablePath = z.strictObject({ orgId: Id, databaseId: Id, tableId: Id });
const RowPath = z.strictObject({ orgId: Id, databaseId: Id, tableId: Id, rowId: Id });
const ROWS = '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows';

export const rowRoutes = [
  defineRoute({
    method: 'POST',
    path: ROWS,
    summary: 'Create row (endpoint 6)',
    tags: ['rows'],
    operation: CreateRowDocument,
    params: TablePath,
    query: z.strictObject({}),
    body: CreateRowBody,
    idempotent: true,
    successStatus: 201,
    response: RowMutationResponse,
  }),
  defineRoute({
    method: 'POST',
    path: `${ROWS}/batch`,
    summary: 'Create, update, delete and upsert up to 1,000 rows in one transaction, all or nothing',
    tags: ['rows'],
    operation: BatchRowsDocument,
    params: TablePath,
    query: z.strictObject({}),
    body: BatchRowsBody,
    idempotent: true,
    successStatus: 200,
    response: RowBatchResponse,
  }),
  defineRoute({
    method: 'GET',
    path: ROWS,
    summary: 'List rows: filter, order, keyset pages',
    tags: ['rows'],
    operation: ListRowsDocument,
    params: TablePath,
    query: RowListQuery,
    idempotent: false,
    successStatus: 200,
    response: RowListPage,
  }),
  defineRoute({
    method: 'POST',
    path: `${ROWS}/query`,
    summary: 'List rows with the query in the body (a read: no Idempotency-Key); the same answers as GET …/rows',
    tags: ['rows'],
    operation: ListRowsDocument,
    params: TablePath,
    query: z.strictObject({}),
    body: RowQueryBody,
    bodyVariables: true,
    idempotent: false,
    successStatus: 200,
    response: RowListPage,
  }),
  defineRoute({
    method: 'GET',
    path: `${ROWS}/{rowId}/history`,
    summary: 'Cell history of a row, newest first',
    tags: ['rows'],
    operation: ListRowHistoryDocument,
    params: RowPath,
    query: PageQuery,
    idempotent: false,
    successStatus: 200,
    response: Page(HistoryEntryResponse),
  }),
  defineRoute({
    method: 'GET',
    path: `${ROWS}/{rowId}`,
    summary: 'Get a row',
    tags: ['rows'],
    operation: GetRowDocument,
    params: RowPath,
    query: z.strictObject({}),
    idempotent: false,
    successStatus: 200,
    response: RowResponse,
  }),
  defineRoute({
    method: 'PATCH',
    path: `${ROWS}/{rowId}`,
    summary: 'Change some cells of a row',
    tags: ['rows'],
    operation: UpdateRowDocument,
    params: RowPath,
    query: z.strictObject({}),
    body: UpdateRowBody,
    idempotent: true,
    successStatus: 200,
    response: RowMutationResponse,
  }),
  defineRoute({
    method: 'DELETE',
    path: `${ROWS}/{rowId}`,
    summary: 'Delete a row',
    tags: ['rows'],
    operation: DeleteRowDocument,
    params: RowPath,
    query: z.strictObject({}),
    body: DeleteRowBody,
    idempotent: true,
    successStatus: 200,
    response: RowDeletionResponse,
  }),
  defineRoute({
    method: 'POST',
    path: `${ROWS}/{rowId}/restore`,
    summary: 'Restore a deleted row from its cell history (expectedVersion = the deletion’s version)',
    tags: ['rows'],
    operation: RestoreRowDocument,
    params: RowPath,
    query: z.strictObject({}),
    body: RestoreRowBody,
    idempotent: true,
    successStatus: 200,
    response: RowMutationResponse,
  }),
];
