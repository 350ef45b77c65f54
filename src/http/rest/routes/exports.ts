import { ExportDatabaseBody, ExportRowsBody } from '../../../contracts/exports.ts';
import { JobHandleResponse } from '../../../contracts/jobs.ts';
import { ExportDatabaseDocument, ExportRowsDocument } from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';

/** Exports (issue 15): 202 with a job handle; the file is the job's artifact (GET …/jobs/{jobId}/artifacts/{name}). */
export const exportRoutes = [
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/exports',
    summary: 'Export a table’s rows (or a saved view’s) to CSV, JSONL or XLSX',
    tags: ['exports'],
    operation: ExportRowsDocument,
    body: ExportRowsBody,
    successStatus: 202,
    response: JobHandleResponse,
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/exports',
    summary: 'Export a whole database to a ZIP archive (schema.json and one file per table)',
    tags: ['exports'],
    operation: ExportDatabaseDocument,
    body: ExportDatabaseBody,
    successStatus: 202,
    response: JobHandleResponse,
  }),
];
