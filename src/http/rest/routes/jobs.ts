import { z } from 'zod';
import {
  ApplySchemaChangeBody,
  ArtifactPath,
  IMPORT_BODY_LIMIT,
  ImportRowsBody,
  JobHandleResponse,
  ListJobsQuery,
  PreviewImportBody,
} from '../../../contracts/jobs.ts';
import { JobResponse } from '../../../contracts/job-results.ts';
import { Page } from '../../../contracts/pages.ts';
import {
  ApplySchemaChangeDocument,
  CancelJobDocument,
  GetJobArtifactDocument,
  GetJobDocument,
  ImportRowsDocument,
  JobUpdatedDocument,
  ListJobsDocument,
  PreviewImportRowsDocument,
  RetryJobDocument,
} from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';

const JOBS = '/v1/orgs/{orgId}/jobs';
const IMPORTS = '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/imports';

export const jobRoutes = [
  defineRoute({
    method: 'POST',
    path: `${IMPORTS}/preview`,
    summary: 'Preview import rows (endpoint 4)',
    tags: ['imports'],
    operation: PreviewImportRowsDocument,
    body: PreviewImportBody,
    bodyLimit: IMPORT_BODY_LIMIT,
    successStatus: 202,
    response: JobHandleResponse,
  }),
  defineRoute({
    method: 'POST',
    path: IMPORTS,
    summary: 'Import the rows of a succeeded preview (append-only)',
    tags: ['imports'],
    operation: ImportRowsDocument,
    body: ImportRowsBody,
    // The preview's uploaded file has expired (ARTIFACT_EXPIRED): preview it again.
    errorStatuses: [410],
    successStatus: 202,
    response: JobHandleResponse,
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/schema/operations',
    summary: 'Apply schema change (endpoint 5)',
    tags: ['schema'],
    operation: ApplySchemaChangeDocument,
    body: ApplySchemaChangeBody,
    successStatus: 202,
    response: JobHandleResponse,
  }),
  defineRoute({
    method: 'GET',
    path: JOBS,
    summary: 'List jobs, newest first',
    tags: ['jobs'],
    operation: ListJobsDocument,
    query: ListJobsQuery,
    response: Page(JobResponse),
  }),
  defineRoute({
    method: 'GET',
    path: `${JOBS}/{jobId}`,
    summary: 'Job status (the statusUrl of every job handle)',
    tags: ['jobs'],
    operation: GetJobDocument,
    response: JobResponse,
  }),
  defineRoute({
    method: 'GET',
    path: `${JOBS}/{jobId}/events`,
    summary: 'Live job status: server-sent events on every change of state or progress, until the job ends',
    tags: ['jobs'],
    operation: JobUpdatedDocument,
    response: JobResponse,
    stream: true,
  }),
  defineRoute({
    method: 'POST',
    path: `${JOBS}/{jobId}/cancel`,
    summary: 'Cancel a queued or running job',
    tags: ['jobs'],
    operation: CancelJobDocument,
    successStatus: 200,
    response: JobResponse,
  }),
  defineRoute({
    method: 'POST',
    path: `${JOBS}/{jobId}/retry`,
    summary: 'Run a failed or cancelled job again',
    tags: ['jobs'],
    operation: RetryJobDocument,
    successStatus: 200,
    response: JobResponse,
  }),
  defineRoute({
    method: 'GET',
    path: `${JOBS}/{jobId}/artifacts/{name}`,
    summary: 'Download a job artifact (e.g. the JSONL error report of an import preview)',
    tags: ['jobs'],
    operation: GetJobArtifactDocument,
    params: ArtifactPath,
    response: z.string().describe('The artifact’s bytes, with its content type and a Content-Digest header'),
    file: true,
  }),
];
