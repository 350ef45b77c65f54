import { z } from 'zod';
import { Id } from '../../../kernel/formats.ts';
import { IMPORT_BODY_LIMIT, ImportRowsBody, PreviewImportBody } from '../../../graph/jobs/imports.ts';
import { JobKindFilter, JobStateFilter } from '../../../graph/jobs/jobs.ts';
import { ApplySchemaChangeBody } from '../../../graph/jobs/schema-changes.ts';
import { JobResponse } from '../../../contracts/job-results.ts';
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
import { Page, PageQuery } from '../../../contracts/pages.ts';

/** Spec 2.7. */
export const JobHandleResponse = z.strictObject({ jobId: Id, state: z.literal('queued'), statusUrl: z.string() });

const OrgPath = z.strictObject({ orgId: Id });
const JobPath = z.strictObject({ orgId: Id, jobId: Id });
const TablePath = z.strictObject({ orgId: Id, databaseId: Id, tableId: Id });
const JOBS = '/v1/orgs/{orgId}/jobs';
const IMPORTS = '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/imports';

export const jobRoutes = [
  defineRoute({
    method: 'POST',
    path: `${IMPORTS}/preview`,
    summary: 'Preview import rows (endpoint 4)',
    tags: ['imports'],
    operation: PreviewImportRowsDocument,
    params: TablePath,
    query: z.strictObject({}),
    body: PreviewImportBody,
    bodyLimit: IMPORT_BODY_LIMIT,
    idempotent: true,
    successStatus: 202,
    response: JobHandleResponse,
  }),
  defineRoute({
    method: 'POST',
    path: IMPORTS,
    summary: 'Import the rows of a succeeded preview (append-only)',
    tags: ['imports'],
    operation: ImportRowsDocument,
    params: TablePath,
    query: z.strictObject({}),
    body: ImportRowsBody,
    idempotent: true,
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
    params: TablePath,
    query: z.strictObject({}),
    body: ApplySchemaChangeBody,
    idempotent: true,
    successStatus: 202,
    response: JobHandleResponse,
  }),
  defineRoute({
    method: 'GET',
    path: JOBS,
    summary: 'List jobs, newest first',
    tags: ['jobs'],
    operation: ListJobsDocument,
    params: OrgPath,
    query: PageQuery.extend({ state: JobStateFilter.optional(), kind: JobKindFilter.optional() }),
    idempotent: false,
    successStatus: 200,
    response: Page(JobResponse),
  }),
  defineRoute({
    method: 'GET',
    path: `${JOBS}/{jobId}`,
    summary: 'Job status (the statusUrl of every job handle)',
    tags: ['jobs'],
    operation: GetJobDocument,
    params: JobPath,
    query: z.strictObject({}),
    idempotent: false,
    successStatus: 200,
    response: JobResponse,
  }),
  defineRoute({
    method: 'GET',
    path: `${JOBS}/{jobId}/events`,
    summary: 'Live job status: server-sent events on every change of state or progress, until the job ends',
    tags: ['jobs'],
    operation: JobUpdatedDocument,
    params: JobPath,
    query: z.strictObject({}),
    idempotent: false,
    successStatus: 200,
    response: JobResponse,
    stream: true,
  }),
  defineRoute({
    method: 'POST',
    path: `${JOBS}/{jobId}/cancel`,
    summary: 'Cancel a queued or running job',
    tags: ['jobs'],
    operation: CancelJobDocument,
    params: JobPath,
    query: z.strictObject({}),
    idempotent: true,
    successStatus: 200,
    response: JobResponse,
  }),
  defineRoute({
    method: 'POST',
    path: `${JOBS}/{jobId}/retry`,
    summary: 'Run a failed or cancelled job again',
    tags: ['jobs'],
    operation: RetryJobDocument,
    params: JobPath,
    query: z.strictObject({}),
    idempotent: true,
    successStatus: 200,
    response: JobResponse,
  }),
  defineRoute({
    method: 'GET',
    path: `${JOBS}/{jobId}/artifacts/{name}`,
    summary: 'Download a job artifact (e.g. the JSONL error report of an import preview)',
    tags: ['jobs'],
    operation: GetJobArtifactDocument,
    params: JobPath.extend({ name: z.string().min(1).max(128) }),
    query: z.strictObject({}),
    idempotent: false,
    successStatus: 200,
    response: z.string().describe('The artifact’s bytes, with its content type and a Content-Digest header'),
    file: true,
  }),
];
