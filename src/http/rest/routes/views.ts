import { z } from 'zod';
import { Id } from '../../../kernel/formats.ts';
import {
  CreateViewBody,
  DeleteViewBody,
  SavedViewResponse,
  UpdateViewBody,
  ViewDeletionResponse,
} from '../../../contracts/views.ts';
import {
  CreateViewDocument,
  DeleteViewDocument,
  GetViewDocument,
  ListViewsDocument,
  UpdateViewDocument,
} from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';
import { Page, PageQuery } from '../../../contracts/pages.ts';

const TablePath = z.strictObject({ orgId: Id, databaseId: Id, tableId: Id });
const ViewPath = TablePath.extend({ viewId: Id });
const VIEWS = '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/views';

export const viewRoutes = [
  defineRoute({
    method: 'POST',
    path: VIEWS,
    summary: 'Create saved view (endpoint 1)',
    tags: ['views'],
    operation: CreateViewDocument,
    params: TablePath,
    query: z.strictObject({}),
    body: CreateViewBody,
    idempotent: true,
    successStatus: 201,
    response: SavedViewResponse,
  }),
  defineRoute({
    method: 'GET',
    path: VIEWS,
    summary: 'List the caller’s personal views and the shared views of a table',
    tags: ['views'],
    operation: ListViewsDocument,
    params: TablePath,
    query: PageQuery,
    idempotent: false,
    successStatus: 200,
    response: Page(SavedViewResponse),
  }),
  defineRoute({
    method: 'GET',
    path: `${VIEWS}/{viewId}`,
    summary: 'Get a saved view',
    tags: ['views'],
    operation: GetViewDocument,
    params: ViewPath,
    query: z.strictObject({}),
    idempotent: false,
    successStatus: 200,
    response: SavedViewResponse,
  }),
  defineRoute({
    method: 'PATCH',
    path: `${VIEWS}/{viewId}`,
    summary: 'Rename a view, change its visibility or replace its definition',
    tags: ['views'],
    operation: UpdateViewDocument,
    params: ViewPath,
    query: z.strictObject({}),
    body: UpdateViewBody,
    idempotent: true,
    successStatus: 200,
    response: SavedViewResponse,
  }),
  defineRoute({
    method: 'DELETE',
    path: `${VIEWS}/{viewId}`,
    summary: 'Delete saved view (endpoint 2)',
    tags: ['views'],
    operation: DeleteViewDocument,
    params: ViewPath,
    query: z.strictObject({}),
    body: DeleteViewBody,
    idempotent: true,
    successStatus: 200,
    response: ViewDeletionResponse,
  }),
];
