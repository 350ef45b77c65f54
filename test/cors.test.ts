import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, type TestOrg } from './helpers/factories.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { checkedFetch } from './helpers/contract.ts';

const ALLOWED = 'https://app.example';
const ATTACKER = 'https://attacker.example';
let open: TestServer;
let listed: TestServer;
let org: TestOrg;

beforeAll(async () => {
  [open, listed] = await Promise.all([
    startTestServer(),
    startTestServer({ CORS_ORIGINS: `${ALLOWED}, https://other.example` }),
  ]);
  org = await createOrg(listed.prisma);
});
afterAll(() => Promise.all([open.close(), listed.close()]));

// A preflight is the browser's CORS protocol, not an operation of the API: outside the OpenAPI document on purpose.
const preflight = (server: TestServer, path: string, origin: string) =>
  fetch(`${server.url}${path}`, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
  });

describe('CORS (issue 19 §3)', () => {
  it('by default no origin gets CORS headers on /graphql or /v1, preflight or not', async () => {
    for (const path of ['/graphql', '/v1/me/preferences']) {
      const answer = await preflight(open, path, ATTACKER);
      expect(answer.headers.get('access-control-allow-origin'), path).toBeNull();
      expect(answer.headers.get('access-control-allow-credentials'), path).toBeNull();
    }
    const query = await checkedFetch(`${open.url}/graphql`, {
      method: 'POST',
      headers: { origin: ATTACKER, 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ __typename }' }),
    });
    expect(query.status).toBe(200);
    expect(query.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('CORS_ORIGINS allows exactly the listed origins, with credentials', async () => {
    const allowed = await preflight(listed, '/graphql', ALLOWED);
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get('access-control-allow-origin')).toBe(ALLOWED);
    expect(allowed.headers.get('access-control-allow-credentials')).toBe('true');
    expect(allowed.headers.get('access-control-allow-headers')).toContain('X-CSRF-Token');
    const read = await checkedFetch(`${listed.url}/v1/orgs/${org.orgId}`, {
      headers: { origin: ALLOWED, authorization: `Bearer ${org.adminKey}` },
    });
    expect([read.status, read.headers.get('access-control-allow-origin')]).toEqual([200, ALLOWED]);
    const refused = await preflight(listed, '/v1/me/preferences', ATTACKER);
    expect(refused.headers.get('access-control-allow-origin')).toBeNull();
  });
});
