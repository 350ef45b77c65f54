import { CreateDatabaseBody, DatabaseResponse, UpdateDatabaseBody } from '../../../contracts/databases.ts';
import { DeleteBody } from '../../../contracts/resources.ts';
import { Page, PageQuery } from '../../../contracts/pages.ts';
import { TrashEntryResponse } from '../../../contracts/trash.ts';
import {
  CreateDatabaseDocument,
  DeleteDatabaseDocument,
  GetDatabaseDocument,
  ListDatabasesDocument,
  UpdateDatabaseDocument,
} from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';

export const databaseRoutes = [
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/databases',
    summary: 'Create a database',
    tags: ['databases'],
    operation: CreateDatabaseDocument,
    body: CreateDatabaseBody,
    response: DatabaseResponse,
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/databases',
    summary: 'List databases, oldest first',
    tags: ['databases'],
    operation: ListDatabasesDocument,
    query: PageQuery,
    response: Page(DatabaseResponse),
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/databases/{databaseId}',
    summary: 'Get a database',
    tags: ['databases'],
    operation: GetDatabaseDocument,
    response: DatabaseResponse,
  }),
  defineRoute({
    method: 'PATCH',
    path: '/v1/orgs/{orgId}/databases/{databaseId}',
    summary: 'Rename a database still at `expectedVersion`',
    tags: ['databases'],
    operation: UpdateDatabaseDocument,
    body: UpdateDatabaseBody,
    response: DatabaseResponse,
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/orgs/{orgId}/databases/{databaseId}',
    summary: 'Move a database and its tables to the trash; purged by a `deleteDatabase` job after TRASH_RETENTION_DAYS',
    tags: ['databases'],
    operation: DeleteDatabaseDocument,
    body: DeleteBody,
    response: TrashEntryResponse,
  }),
];
