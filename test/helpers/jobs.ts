import { expect, vi } from 'vitest';
import { idempotencyKey } from './factories.ts';
import type { ApiResponse, TestServer } from './server.ts';
import type { TestTable } from './workspace.ts';

const TERMINAL = new Set(['succeeded', 'failed', 'partially_completed', 'cancelled']);

/** Polls a job's statusUrl until it is terminal (or `until` holds), with a deadline instead of a fixed sleep. */
export async function waitForJob(
  server: TestServer,
  token: string,
  statusUrl: string,
  until = (job: any) => TERMINAL.has(job.state),
  timeoutMs = 30_000,
): Promise<any> {
  const response = await vi.waitFor(
    async () => {
      const response = await server.request('GET', statusUrl, { token });
      if (response.status !== 200 || until(response.body)) return response;
      throw new Error(`job did not reach the expected state in time: ${response.text}`);
    },
    { timeout: timeoutMs, interval: 50 },
  );
  expect(response.status, response.text).toBe(200);
  return response.body;
}

export interface PreviewRequest {
  format?: 'csv' | 'jsonl';
  content: string;
  mapping: { source: string | number; fieldId: string }[];
  fileName?: string;
  header?: boolean;
  expectedSchemaVersion?: number;
}

export function requestPreview(
  server: TestServer,
  token: string,
  table: TestTable,
  request: PreviewRequest,
  key = idempotencyKey(),
): Promise<ApiResponse> {
  return server.request('POST', `${table.path}/imports/preview`, {
    token,
    idempotencyKey: key,
    body: {
      expectedSchemaVersion: request.expectedSchemaVersion ?? table.schemaVersion,
      format: request.format ?? 'csv',
      content: request.content,
      fileName: request.fileName ?? 'import.csv',
      mapping: request.mapping,
      ...(request.header === undefined ? {} : { header: request.header }),
    },
  });
}

/** Previews a file and waits for the preview to finish; returns the terminal job. */
export async function preview(
  server: TestServer,
  token: string,
  table: TestTable,
  request: PreviewRequest,
): Promise<any> {
  const accepted = await requestPreview(server, token, table, request);
  expect(accepted.status, accepted.text).toBe(202);
  return waitForJob(server, token, accepted.body.statusUrl);
}

/** The JSONL error report of a job, parsed. */
export async function reportOf(server: TestServer, token: string, job: any): Promise<any[]> {
  const artifact = job.artifacts.find((item: { name: string }) => item.name === 'errors.jsonl');
  expect(artifact).toBeDefined();
  const response = await server.request('GET', artifact.url, { token });
  expect(response.status, response.text).toBe(200);
  return response.text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line));
}

export type ImportMode = 'valid-rows-only' | 'all-or-nothing';

/** POST …/imports for a preview job; the table's current schema version unless told otherwise. */
export function requestImport(
  server: TestServer,
  token: string,
  table: TestTable,
  previewJobId: string,
  mode: ImportMode,
  options: { key?: string; expectedSchemaVersion?: number } = {},
): Promise<ApiResponse> {
  return server.request('POST', `${table.path}/imports`, {
    token,
    idempotencyKey: options.key ?? idempotencyKey(),
    body: { previewJobId, expectedSchemaVersion: options.expectedSchemaVersion ?? table.schemaVersion, mode },
  });
}

/** Imports a previewed file and waits for the import to finish; returns the terminal job. */
export async function importPreviewed(
  server: TestServer,
  token: string,
  table: TestTable,
  previewJobId: string,
  mode: ImportMode,
): Promise<any> {
  const accepted = await requestImport(server, token, table, previewJobId, mode);
  expect(accepted.status, accepted.text).toBe(202);
  return waitForJob(server, token, accepted.body.statusUrl);
}

/** POST …/jobs/{jobId}/cancel or /retry. */
export function controlJob(
  server: TestServer,
  token: string,
  orgId: string,
  jobId: string,
  action: 'cancel' | 'retry',
  key = idempotencyKey(),
): Promise<ApiResponse> {
  return server.request('POST', `/v1/orgs/${orgId}/jobs/${jobId}/${action}`, { token, idempotencyKey: key });
}

/** Every row of a table (pages of 100), in the API's order. */
export async function allRows(
  server: TestServer,
  token: string,
  table: TestTable,
): Promise<{ id: string; version: string; values: Record<string, unknown> }[]> {
  const rows = [];
  let cursor: string | null = null;
  do {
    const response: ApiResponse = await server.request(
      'GET',
      `${table.path}/rows?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      { token },
    );
    expect(response.status, response.text).toBe(200);
    rows.push(...response.body.data);
    cursor = response.body.nextCursor;
  } while (cursor);
  return rows;
}

/** The org's activity entries that match `filter` (query parameters), oldest first; at most 100, which a test's own resource never exceeds. */
export async function activityOf(
  server: TestServer,
  token: string,
  orgId: string,
  filter: Record<string, string>,
): Promise<any[]> {
  const query = new URLSearchParams({ ...filter, limit: '100' });
  const response = await server.request('GET', `/v1/orgs/${orgId}/activity?${query}`, { token });
  expect(response.status, response.text).toBe(200);
  expect(response.body.nextCursor).toBeNull();
  return [...response.body.data].reverse();
}

/** The activity entries of one table, oldest first. */
export function tableActivity(server: TestServer, token: string, table: TestTable): Promise<any[]> {
  return activityOf(server, token, table.orgId, { tableId: table.tableId });
}

/** A mapping of CSV header names (or JSONL properties) to the fields of the same name. */
export function mappingOf(table: TestTable, names: string[]): { source: string; fieldId: string }[] {
  return names.map((name) => ({ source: name, fieldId: table.fields[name]! }));
}
