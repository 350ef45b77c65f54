import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'vitest';
import { idempotencyKey } from './factories.ts';
import type { ApiResponse, TestServer } from './server.ts';
import type { TestTable } from './workspace.ts';

const TERMINAL = new Set(['succeeded', 'failed', 'partially_completed', 'cancelled']);

/** Polls a job's statusUrl until it is terminal (or `until` holds), with a deadline instead of a fixed sleep. */
export async function waitForJob(server: TestServer, token: string, statusUrl: string, until = (job: any) => TERMINAL.has(job.state), timeoutMs = 30_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const response = await server.request('GET', statusUrl, { token });
    expect(response.status, response.text).toBe(200);
    if (until(response.body)) return response.body;
    if (Date.now() > deadline) throw new Error(`job did not reach the expected state in time: ${response.text}`);
    await sleep(50);
  }
}

export interface PreviewRequest {
  format?: 'csv' | 'jsonl';
  content: string;
  mapping: { source: string | number; fieldId: string }[];
  fileName?: string;
  header?: boolean;
  expectedSchemaVersion?: number;
}

export function requestPreview(server: TestServer, token: string, table: TestTable, request: PreviewRequest, key = idempotencyKey()): Promise<ApiResponse> {
  return server.request('POST', `${table.path}/imports/preview`, {
    token, idempotencyKey: key,
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
export async function preview(server: TestServer, token: string, table: TestTable, request: PreviewRequest): Promise<any> {
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
  return response.text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line));
}
