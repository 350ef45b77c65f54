import { expect } from 'vitest';
import { idempotencyKey } from './factories.ts';
import { waitForJob } from './jobs.ts';
import type { ApiResponse, TestServer } from './server.ts';
import type { TestTable } from './workspace.ts';

/** Export calls shared by the export test files. */
export function requestExport(
  server: TestServer,
  token: string,
  table: TestTable,
  body: Record<string, unknown>,
  key = idempotencyKey(),
): Promise<ApiResponse> {
  return server.request('POST', `${table.path}/exports`, { token, idempotencyKey: key, body });
}

/** Asks for an export and waits for its job to end; returns the terminal job. */
export async function exported(
  server: TestServer,
  token: string,
  table: TestTable,
  body: Record<string, unknown>,
): Promise<any> {
  const accepted = await requestExport(server, token, table, body);
  expect(accepted.status, accepted.text).toBe(202);
  return waitForJob(server, token, accepted.body.statusUrl);
}

export interface Download {
  status: number;
  headers: Headers;
  bytes: Buffer;
  text: string;
}

/** Downloads a job's (only) artifact as bytes. */
export async function download(server: TestServer, token: string, job: any): Promise<Download> {
  expect(job.state, JSON.stringify(job.error)).toBe('succeeded');
  expect(job.artifacts).toHaveLength(1);
  const response = await fetch(`${server.url}${job.artifacts[0].url}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  return { status: response.status, headers: response.headers, bytes, text: bytes.toString('utf8') };
}

/** The file of a succeeded export, as text. */
export async function exportedText(
  server: TestServer,
  token: string,
  table: TestTable,
  body: Record<string, unknown>,
): Promise<string> {
  const file = await download(server, token, await exported(server, token, table, body));
  expect(file.status).toBe(200);
  return file.text;
}
