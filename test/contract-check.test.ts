import { describe, expect, it } from 'vitest';
import { contractProblem, describesRequest } from './helpers/contract.ts';

/** The checker every test's answers go through (test/helpers/contract.ts) catches each kind of mismatch. */
const ORG = '01J00000000000000000000000';
const answer = (
  method: string,
  path: string,
  status: number,
  body: unknown,
  contentType: string | null = 'application/json; charset=utf-8',
) => ({
  method,
  url: `http://127.0.0.1:1${path}`,
  status,
  contentType,
  text: body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body),
});
const envelope = { error: { code: 'RESOURCE_NOT_FOUND', message: 'No.', requestId: 'r' } };

describe('the OpenAPI contract check', () => {
  it('passes a documented answer and ignores paths outside /v1 and /oauth', () => {
    expect(contractProblem(answer('GET', `/v1/orgs/${ORG}`, 404, envelope))).toBeNull();
    expect(contractProblem(answer('GET', '/healthz', 200, { status: 'ok' }))).toBeNull();
    expect(contractProblem(answer('POST', '/graphql', 200, { data: null }))).toBeNull();
  });

  it('names an undeclared method or path, an unlisted status, an undocumented media type and a body off its schema', () => {
    expect(contractProblem(answer('DELETE', '/v1/me/preferences', 405, envelope))).toMatch(/is not an operation/);
    expect(contractProblem(answer('GET', '/v1/nothing', 404, envelope))).toMatch(/is not an operation/);
    expect(contractProblem(answer('GET', `/v1/orgs/${ORG}`, 418, envelope))).toMatch(/status 418 is not listed/);
    expect(contractProblem(answer('GET', `/v1/orgs/${ORG}`, 404, 'oops', 'text/plain'))).toMatch(
      /answered text\/plain/,
    );
    expect(contractProblem(answer('GET', `/v1/orgs/${ORG}`, 404, { error: { code: 'RESOURCE_NOT_FOUND' } }))).toMatch(
      /body breaks its schema/,
    );
    expect(contractProblem(answer('GET', `/v1/orgs/${ORG}`, 404, 'not json'))).toMatch(/not JSON/);
  });

  it('tells which requests the document describes (the fuzzer sends the others unchecked)', () => {
    expect(describesRequest('GET', '/v1/me/keys')).toBe(true);
    expect(describesRequest('PATCH', '/v1/me/keys')).toBe(false);
    expect(describesRequest('OPTIONS', '/v1/me/preferences')).toBe(false);
    expect(describesRequest('GET', '/healthz')).toBe(true);
  });
});
