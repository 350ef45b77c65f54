import { describe, expect, it } from 'vitest';
import { idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';

/** Targeted regressions for the 500s the route fuzzer (test/fuzz.test.ts) found, one per class. */
const suite = useServerWithOrg();

function expectEnvelope(response: { status: number; body: any; headers: Headers }, status: number, code: string): void {
  expect(response.status, JSON.stringify(response.body)).toBe(status);
  expect(response.body).toEqual({
    error: { code, message: expect.any(String), requestId: response.headers.get('x-request-id') },
  });
}

describe('bodies the fuzzer sent that answered 500', () => {
  it('a body that is not what its Content-Encoding says is 400 BAD_REQUEST and creates nothing', async () => {
    const { server, org } = suite;
    const response = await server.request('POST', `/v1/orgs/${org.orgId}/databases`, {
      token: org.adminKey,
      idempotencyKey: idempotencyKey(),
      rawBody: '{"name":"Not gzip"}',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    });
    expectEnvelope(response, 400, 'BAD_REQUEST');
    expect(await server.prisma.database.count({ where: { orgId: org.orgId } })).toBe(0);
  });
});

describe('answers the contract check found off the OpenAPI document (issue 17)', () => {
  it('/oauth/token: an unreadable body is 400 invalid_request in RFC 6749 §5.2’s shape, not the /v1 envelope', async () => {
    const response = await suite.server.request('POST', '/oauth/token', {
      rawBody: 'grant_type=refresh_token',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-encoding': 'gzip' },
    });
    expect(response.status, response.text).toBe(400);
    expect(response.body).toEqual({ error: 'invalid_request', error_description: expect.any(String) });
  });

  it('/oauth/token: a request line over 16 KiB is the documented 431 with the envelope', async () => {
    const response = await suite.server.request('POST', `/oauth/token?${'a'.repeat(17_000)}`, {
      rawBody: 'grant_type=x',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expectEnvelope(response, 431, 'HEADERS_TOO_LARGE');
  });
});
