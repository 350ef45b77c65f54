import { ChangeHeadResponse, ChangePageResponse, ChangeResponse, ChangesQuery } from '../../../contracts/changes.ts';
import { GetChangesHeadDocument, ListChangesDocument, RowChangesDocument } from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';

const CHANGES = '/v1/orgs/{orgId}/databases/{databaseId}/changes';

/** Issue 27: the change feed. `Accept: text/event-stream` on the list turns it into a live stream (RowChanges). */
export const changeRoutes = [
  defineRoute({
    method: 'GET',
    path: CHANGES,
    summary:
      'The database’s change feed, in commit order (long poll with `wait`; server-sent events with `Accept: text/event-stream`)',
    tags: ['changes'],
    operation: ListChangesDocument,
    query: ChangesQuery,
    response: ChangePageResponse,
    eventStream: { operation: RowChangesDocument, response: ChangeResponse, eventId: 'cursor' },
    errorStatuses: [410],
  }),
  defineRoute({
    method: 'GET',
    path: `${CHANGES}/head`,
    summary: 'A cursor at the newest change, to follow the feed from now on',
    tags: ['changes'],
    operation: GetChangesHeadDocument,
    response: ChangeHeadResponse,
  }),
];
