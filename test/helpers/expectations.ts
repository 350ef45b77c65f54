import { expect } from 'vitest';
import { TIMESTAMP_PATTERN } from '../../src/kernel/formats.ts';
import { ErrorEnvelope } from '../../src/contracts/responses.ts';
import type { ApiResponse } from './server.ts';

/** The spec §7 envelope, exactly: status, code, requestId equal to X-Request-Id, and no other properties. */
export function expectError(response: ApiResponse, status: number, code: string): void {
  expect({ status: response.status, code: response.body?.error?.code }, response.text).toEqual({ status, code });
  expect(ErrorEnvelope.safeParse(response.body).success, response.text).toBe(true);
  expect(response.body.error.requestId).toBe(response.headers.get('x-request-id'));
  expect(response.body.error.message.length).toBeGreaterThan(0);
}

export function expectTimestamp(value: unknown): void {
  expect(value).toMatch(TIMESTAMP_PATTERN);
}

/** `details.problems` of a VALIDATION_FAILED error names these JSON paths (in any order). */
export function expectProblemPaths(response: ApiResponse, paths: (string | number)[][]): void {
  const reported = (response.body.error.details.problems as { path: (string | number)[] }[]).map(
    (problem) => problem.path,
  );
  expect(reported).toEqual(expect.arrayContaining(paths));
}
