import { z } from 'zod';
import { Id, Timestamp, VersionString } from '../../../kernel/formats.ts';
import { DeleteBody, UpdateDatabaseBody } from '../../../graph/databases/database-changes.ts';
import { CreateDatabaseBody } from '../../../graph/databases/databases.ts';
import {
  CreateDatabaseDocument,
  DeleteDatabaseDocument,
  GetDatabaseDocument,
  ListDatabasesDocument,
  UpdateDatabaseDocument,
} from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';
import { Page, PageQuery } from '../../../contracts/pages.ts';
import { TrashEntryResponse } from './trash.ts';

export const DatabaseResponse = z.strictObject({
  id: Id,
  orgId: Id,
  name: z.string().min(1).max(120),
  state: z.enum(['active']),
  version: VersionString,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

const OrgPath = z.strictObject({ orgId: Id });
const DatabasePath = z.strictObject({ orgId: Id, databaseId: Id });

export const databaseRoutes = [
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/databases',
    summary: 'Create a database',
    tags: ['databases'],
    operation: CreateDatabaseDocument,
    params: OrgPath,
    query: z.strictObject({}),
    body: CreateDatabaseBody,
    idempotent: true,
    successStatus: 201,
    response: DatabaseResponse,
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/databases',
    summary: 'List databases, oldest first',
    tags: ['databases'],
    operation: ListDatabasesDocument,
    params: OrgPath,
    query: PageQuery,
    idempotent: false,
    successStatus: 200,
    response: Page(DatabaseResponse),
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/databases/{databaseId}',
    summary: 'Get a database',
    tags: ['databases'],
    operation: GetDatabaseDocument,
    params: DatabasePath,
    query: z.strictObject({}),
    idempotent: false,
    successStatus: 200,
    response: DatabaseResponse,
  }),
  defineRoute({
    method: 'PATCH',
    path: '/v1/orgs/{orgId}/databases/{databaseId}',
    summary: 'Rename a database still at `expectedVersion`',
    tags: ['databases'],
    operation: UpdateDatabaseDocument,
    params: DatabasePath,
    query: z.strictObject({}),
    body: UpdateDatabaseBody,
    idempotent: true,
    successStatus: 200,
    response: DatabaseResponse,
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/orgs/{orgId}/databases/{databaseId}',
    summary: 'Move a database and its tables to the trash; purged by a `deleteDatabase` job after TRASH_RETENTION_DAYS',
    tags: ['databases'],
    operation: DeleteDatabaseDocument,
    params: DatabasePath,
    query: z.strictObject({}),
    body: DeleteBody,
    idempotent: true,
    successStatus: 200,
    response: TrashEntryResponse,
  }),
];
