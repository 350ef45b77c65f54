import { Page, PageQuery } from '../../../contracts/pages.ts';
import { RestoredResponse, TrashEntryResponse } from '../../../contracts/trash.ts';
import { ListTrashDocument, RestoreFromTrashDocument } from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';

export const trashRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/trash',
    summary: 'List deleted databases and tables that can still be restored, most recently deleted first',
    tags: ['trash'],
    operation: ListTrashDocument,
    query: PageQuery,
    response: Page(TrashEntryResponse),
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/trash/{id}/restore',
    summary: 'Restore a database or table from the trash, exactly as it was, and cancel its purge',
    tags: ['trash'],
    operation: RestoreFromTrashDocument,
    successStatus: 200,
    response: RestoredResponse,
  }),
];
