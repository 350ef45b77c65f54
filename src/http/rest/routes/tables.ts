import { DeleteBody } from '../../../contracts/resources.ts';
import {
  CreateForeignKeyBody,
  CreateTableBody,
  CreateUniqueRuleBody,
  ForeignKeyDeletionResponse,
  ForeignKeyResponse,
  TableResponse,
  TableSchemaResponse,
  UpdateTableBody,
} from '../../../contracts/tables.ts';
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

const TABLES = '/v1/orgs/{orgId}/databases/{databaseId}/tables';
const TABLE = `${TABLES}/{tableId}`;

export const tableRoutes = [
  defineRoute({
    method: 'POST',
    path: TABLES,
    summary: 'Create a table with its fields',
    tags: ['tables'],
    operation: CreateTableDocument,
    body: CreateTableBody,
    response: TableResponse,
  }),
  defineRoute({
    method: 'GET',
    path: TABLES,
    summary: 'List tables, oldest first',
    tags: ['tables'],
    operation: ListTablesDocument,
    query: PageQuery,
    response: Page(TableResponse),
  }),
  defineRoute({
    method: 'GET',
    path: TABLE,
    summary: 'Get a table',
    tags: ['tables'],
    operation: GetTableDocument,
    response: TableResponse,
  }),
  defineRoute({
    method: 'PATCH',
    path: TABLE,
    summary: 'Rename a table still at `expectedVersion` (schemaVersion unchanged)',
    tags: ['tables'],
    operation: UpdateTableDocument,
    body: UpdateTableBody,
    response: TableResponse,
  }),
  defineRoute({
    method: 'DELETE',
    path: TABLE,
    summary:
      'Move a table to the trash; purged by a `deleteTable` job after TRASH_RETENTION_DAYS. Refused while another table’s foreign key references it',
    tags: ['tables'],
    operation: DeleteTableDocument,
    body: DeleteBody,
    response: TrashEntryResponse,
  }),
  defineRoute({
    method: 'GET',
    path: `${TABLE}/schema`,
    summary: 'Get the runtime definition of a table: fields, unique rules, foreign keys',
    tags: ['tables'],
    operation: GetTableSchemaDocument,
    response: TableSchemaResponse,
  }),
  defineRoute({
    method: 'POST',
    path: `${TABLE}/unique-rules`,
    summary: 'Add a unique rule (conditional with `where`), built online as a job',
    tags: ['tables'],
    operation: CreateUniqueRuleDocument,
    body: CreateUniqueRuleBody,
    successStatus: 202,
    response: JobHandleResponse,
  }),
  defineRoute({
    method: 'DELETE',
    path: `${TABLE}/unique-rules/{ruleId}`,
    summary: 'Remove a unique rule, its index dropped online as a job; refused while a foreign key references it',
    tags: ['tables'],
    operation: DeleteUniqueRuleDocument,
    successStatus: 202,
    response: JobHandleResponse,
  }),
  defineRoute({
    method: 'POST',
    path: `${TABLE}/foreign-keys`,
    summary: 'Add a foreign key to an unconditional unique rule in the same database, validated online as a job',
    tags: ['tables'],
    operation: CreateForeignKeyDocument,
    body: CreateForeignKeyBody,
    successStatus: 202,
    response: JobHandleResponse,
  }),
  defineRoute({
    method: 'GET',
    path: `${TABLE}/foreign-keys`,
    summary: 'List foreign keys (endpoint 14)',
    tags: ['tables'],
    operation: ListForeignKeysDocument,
    query: PageQuery,
    response: Page(ForeignKeyResponse),
  }),
  defineRoute({
    method: 'DELETE',
    path: `${TABLE}/foreign-keys/{foreignKeyId}`,
    summary: 'Remove a foreign key',
    tags: ['tables'],
    operation: DeleteForeignKeyDocument,
    response: ForeignKeyDeletionResponse,
  }),
];
