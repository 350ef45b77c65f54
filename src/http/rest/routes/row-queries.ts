import { AggregateRowsBody, AggregateRowsResponse } from '../../../contracts/rows-aggregate.ts';
import { LookupRowsBody, LookupRowsResponse } from '../../../contracts/rows-lookup.ts';
import { SimilarRowsBody, SimilarRowsResponse } from '../../../contracts/rows-search.ts';
import { AggregateRowsDocument, LookupRowsDocument, SimilarRowsDocument } from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';
import { RowResponse } from '../../../contracts/rows.ts';

/** Reads of rows beyond pages (issue 28): aggregates, similar rows, rows by key. Each a read: no Idempotency-Key. */
const ROWS = '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows';

export const rowQueryRoutes = [
  defineRoute({
    method: 'POST',
    path: `${ROWS}/aggregate`,
    summary: 'Count, sum and other aggregates of rows, optionally grouped (a read: no Idempotency-Key)',
    tags: ['rows'],
    operation: AggregateRowsDocument,
    body: AggregateRowsBody,
    idempotent: false,
    successStatus: 200,
    response: AggregateRowsResponse,
    errorStatuses: [413],
  }),
  defineRoute({
    method: 'POST',
    path: `${ROWS}/similar`,
    summary: 'The rows whose text field is most similar to a value, with scores (a read: no Idempotency-Key)',
    tags: ['rows'],
    operation: SimilarRowsDocument,
    body: SimilarRowsBody,
    idempotent: false,
    successStatus: 200,
    response: SimilarRowsResponse(RowResponse),
  }),
  defineRoute({
    method: 'POST',
    path: `${ROWS}/lookup`,
    summary: 'Rows by the values of an unconditional unique rule, in key order (a read: no Idempotency-Key)',
    tags: ['rows'],
    operation: LookupRowsDocument,
    body: LookupRowsBody,
    idempotent: false,
    successStatus: 200,
    response: LookupRowsResponse(RowResponse),
  }),
];
