import { z } from 'zod';
import { Id } from '../../../kernel/formats.ts';
import { ExportDatabaseBody, ExportRowsBody } from '../../../graph/exports/exports.ts';
import { ExportDatabaseDocument, ExportRowsDocument } from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';
import { JobHandleResponse } from './jobs.ts';

/** Exports (issue 15): 202 with a job handle; the file is the job's artifact (GET …/jobs/{jobId}/artifacts/{name}). */
export const exportRoutes = [
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/exports',
    summary: 'Export a table’s rows (or a saved view’s) to CSV, JSONL or XLSX',
    tags: ['exports'],
    operation: ExportRowsDocument,
    params: z.strictObject({ orgId: Id, databaseId: Id, tableId: Id }),
    query: z.strictObject({}),
    body: ExportRowsBody,
    idempotent: true,
    successStatus: 202,
    response: JobHandleResponse,
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/exports',
    summary: 'Export a whole database to a ZIP archive (schema.json and one file per table)',
    tags: ['exports'],
    operation: ExportDatabaseDocument,
    params: z.strictObject({ orgId: Id, databaseId: Id }),
    query: z.strictObject({}),
    body: ExportDatabaseBody,
    idempotent: true,
    successStatus: 202,
    response: JobHandleResponse,
  }),
];
