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

const VIEWS = '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/views';

export const viewRoutes = [
  defineRoute({
    method: 'POST',
    path: VIEWS,
    summary: 'Create saved view (endpoint 1)',
    tags: ['views'],
    operation: CreateViewDocument,
    body: CreateViewBody,
    response: SavedViewResponse,
  }),
  defineRoute({
    method: 'GET',
    path: VIEWS,
    summary: 'List the caller’s personal views and the shared views of a table',
    tags: ['views'],
    operation: ListViewsDocument,
    query: PageQuery,
    response: Page(SavedViewResponse),
  }),
  defineRoute({
    method: 'GET',
    path: `${VIEWS}/{viewId}`,
    summary: 'Get a saved view',
    tags: ['views'],
    operation: GetViewDocument,
    response: SavedViewResponse,
  }),
  defineRoute({
    method: 'PATCH',
    path: `${VIEWS}/{viewId}`,
    summary: 'Rename a view, change its visibility or replace its definition',
    tags: ['views'],
    operation: UpdateViewDocument,
    body: UpdateViewBody,
    response: SavedViewResponse,
  }),
  defineRoute({
    method: 'DELETE',
    path: `${VIEWS}/{viewId}`,
    summary: 'Delete saved view (endpoint 2)',
    tags: ['views'],
    operation: DeleteViewDocument,
    body: DeleteViewBody,
    response: ViewDeletionResponse,
  }),
];
