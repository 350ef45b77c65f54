import { z } from 'zod';
import { FIELD_TYPES } from '../../../data/field-types.ts';
import { Id, SchemaVersion, Timestamp, VersionString } from '../../../kernel/formats.ts';
import { CreateForeignKeyBody } from '../../../graph/tables/foreign-keys.ts';
import { DeleteBody } from '../../../contracts/databases.ts';
import { UpdateTableBody } from '../../../graph/tables/table-changes.ts';
import { CreateTableBody } from '../../../graph/tables/tables.ts';
import { CreateUniqueRuleBody } from '../../../graph/tables/unique-rules.ts';
import {
  CreateForeignKeyDocument,
  CreateTableDocument,
  CreateUniqueRuleDocument,
  DeleteForeignKeyDocument,
  DeleteTableDocument,
  DeleteUniqueRuleDocument,
  GetTableDocument,
  GetTableSchemaDocument,
  ListForeignKeysDocument,
  ListTablesDocument,
  UpdateTableDocument,
} from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';
import { JobHandleResponse } from '../../../contracts/jobs.ts';
import { Page, PageQuery } from '../../../contracts/pages.ts';
import { TrashEntryResponse } from '../../../contracts/trash.ts';

export const FieldResponse = z.strictObject({
  id: Id,
  name: z.string().min(1).max(64),
  type: z.enum(FIELD_TYPES),
  required: z.boolean(),
  options: z.record(z.string(), z.unknown()),
  position: z.number().int().min(0),
});

export const TableResponse = z.strictObject({
  id: Id,
  orgId: Id,
  databaseId: Id,
  name: z.string().min(1).max(120),
  state: z.enum(['active']),
  version: VersionString,
  schemaVersion: SchemaVersion,
  fields: z.array(FieldResponse),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

/** Spec 2.13. */
export const ForeignKeyResponse = z.strictObject({
  id: Id,
  tableId: Id,
  fieldIds: z.array(Id),
  referencedTableId: Id,
  referencedTableName: z.string(),
  referencedRuleId: Id,
  referencedFieldIds: z.array(Id),
  referencedFieldNames: z.array(z.string()),
  state: z.enum(['active']),
});

export const UniqueRuleResponse = z.strictObject({
  id: Id,
  tableId: Id,
  fieldIds: z.array(Id),
  where: z.unknown(),
  state: z.enum(['active']),
  referenceable: z
    .boolean()
    .describe('whether a foreign key can reference the rule (unconditional and not hash-enforced)'),
  createdAt: Timestamp,
});

export const SortIndexResponse = z.strictObject({
  id: Id,
  keys: z
    .array(z.strictObject({ fieldId: Id, direction: z.enum(['asc', 'desc']) }))
    .min(1)
    .max(500),
  origin: z.enum(['explicit', 'automatic']),
  state: z.enum(['building', 'ready']),
  method: z
    .enum(['btree', 'trigram', 'search'])
    .describe(
      'btree: a sort index; trigram: one text field, for POST …/rows/similar; ' +
        'search: the table’s text-like fields, for search',
    ),
  createdAt: Timestamp,
});

export const TableSchemaResponse = z.strictObject({
  tableId: Id,
  schemaVersion: SchemaVersion,
  fields: z.array(FieldResponse),
  uniqueRules: z.array(UniqueRuleResponse),
  foreignKeys: z.array(ForeignKeyResponse),
  indexes: z.array(SortIndexResponse),
});

const DatabasePath = z.strictObject({ orgId: Id, databaseId: Id });
export const TablePath = z.strictObject({ orgId: Id, databaseId: Id, tableId: Id });

export const tableRoutes = [
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/tables',
    summary: 'Create a table with its fields',
    tags: ['tables'],
    operation: CreateTableDocument,
    params: DatabasePath,
    query: z.strictObject({}),
    body: CreateTableBody,
    idempotent: true,
    successStatus: 201,
    response: TableResponse,
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/tables',
    summary: 'List tables, oldest first',
    tags: ['tables'],
    operation: ListTablesDocument,
    params: DatabasePath,
    query: PageQuery,
    idempotent: false,
    successStatus: 200,
    response: Page(TableResponse),
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}',
    summary: 'Get a table',
    tags: ['tables'],
    operation: GetTableDocument,
    params: TablePath,
    query: z.strictObject({}),
    idempotent: false,
    successStatus: 200,
    response: TableResponse,
  }),
  defineRoute({
    method: 'PATCH',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}',
    summary: 'Rename a table still at `expectedVersion` (schemaVersion unchanged)',
    tags: ['tables'],
    operation: UpdateTableDocument,
    params: TablePath,
    query: z.strictObject({}),
    body: UpdateTableBody,
    idempotent: true,
    successStatus: 200,
    response: TableResponse,
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}',
    summary:
      'Move a table to the trash; purged by a `deleteTable` job after TRASH_RETENTION_DAYS. Refused while another table’s foreign key references it',
    tags: ['tables'],
    operation: DeleteTableDocument,
    params: TablePath,
    query: z.strictObject({}),
    body: DeleteBody,
    idempotent: true,
    successStatus: 200,
    response: TrashEntryResponse,
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/schema',
    summary: 'Get the runtime definition of a table: fields, unique rules, foreign keys',
    tags: ['tables'],
    operation: GetTableSchemaDocument,
    params: TablePath,
    query: z.strictObject({}),
    idempotent: false,
    successStatus: 200,
    response: TableSchemaResponse,
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/unique-rules',
    summary: 'Add a unique rule (conditional with `where`), built online as a job',
    tags: ['tables'],
    operation: CreateUniqueRuleDocument,
    params: TablePath,
    query: z.strictObject({}),
    body: CreateUniqueRuleBody,
    idempotent: true,
    successStatus: 202,
    response: JobHandleResponse,
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/unique-rules/{ruleId}',
    summary: 'Remove a unique rule, its index dropped online as a job; refused while a foreign key references it',
    tags: ['tables'],
    operation: DeleteUniqueRuleDocument,
    params: TablePath.extend({ ruleId: Id }),
    query: z.strictObject({}),
    idempotent: true,
    successStatus: 202,
    response: JobHandleResponse,
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/foreign-keys',
    summary: 'Add a foreign key to an unconditional unique rule in the same database, validated online as a job',
    tags: ['tables'],
    operation: CreateForeignKeyDocument,
    params: TablePath,
    query: z.strictObject({}),
    body: CreateForeignKeyBody,
    idempotent: true,
    successStatus: 202,
    response: JobHandleResponse,
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/foreign-keys',
    summary: 'List foreign keys (endpoint 14)',
    tags: ['tables'],
    operation: ListForeignKeysDocument,
    params: TablePath,
    query: PageQuery,
    idempotent: false,
    successStatus: 200,
    response: Page(ForeignKeyResponse),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/foreign-keys/{foreignKeyId}',
    summary: 'Remove a foreign key',
    tags: ['tables'],
    operation: DeleteForeignKeyDocument,
    params: TablePath.extend({ foreignKeyId: Id }),
    query: z.strictObject({}),
    idempotent: true,
    successStatus: 200,
    response: z.strictObject({ id: Id, deleted: z.literal(true), mutationId: Id }),
  }),
];
