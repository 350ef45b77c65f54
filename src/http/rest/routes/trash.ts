import { z } from 'zod';
import { Id, Timestamp, VersionString } from '../../../kernel/formats.ts';
import { ListTrashDocument, RestoreFromTrashDocument } from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';
import { Page, PageQuery } from '../../../contracts/pages.ts';

/** What DELETE of a database or table answers, and one item of GET …/trash (issue 13). */
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

export const RestoredResponse = z.strictObject({
  id: Id,
  kind: z.enum(['database', 'table']),
  name: z.string().min(1).max(120),
  databaseId: Id.nullable(),
  version: VersionString,
  restoredTables: z.number().int().min(0),
});

const OrgPath = z.strictObject({ orgId: Id });

export const trashRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/trash',
    summary: 'List deleted databases and tables that can still be restored, most recently deleted first',
    tags: ['trash'],
    operation: ListTrashDocument,
    params: OrgPath,
    query: PageQuery,
    idempotent: false,
    successStatus: 200,
    response: Page(TrashEntryResponse),
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/trash/{id}/restore',
    summary: 'Restore a database or table from the trash, exactly as it was, and cancel its purge',
    tags: ['trash'],
    operation: RestoreFromTrashDocument,
    params: OrgPath.extend({ id: Id }),
    query: z.strictObject({}),
    idempotent: true,
    successStatus: 200,
    response: RestoredResponse,
  }),
];
