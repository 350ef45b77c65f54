import { describe, expect, it } from 'vitest';
import { routes } from '../src/rest/routes.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';

const suite = useServerWithOrg();

describe('GET /v1/openapi.json', () => {
  it('is an OpenAPI 3.1 document listing every declared route with its parameters and schemas', async () => {
    const response = await suite.server.request('GET', '/v1/openapi.json');
    expect(response.status).toBe(200);
    const document = response.body;
    expect(document.openapi).toMatch(/^3\.1\./);
    for (const route of routes) {
      const operation = document.paths[route.path]?.[route.method.toLowerCase()];
      expect(operation, `${route.method} ${route.path}`).toBeDefined();
      expect(Object.keys(operation.responses)).toContain(String(route.successStatus));
      const headerNames = operation.parameters.filter((p: { in: string }) => p.in === 'header').map((p: { name: string }) => p.name);
      expect(headerNames.includes('Idempotency-Key')).toBe(route.idempotent);
    }
    expect(document.paths['/v1/orgs/{orgId}'].get.parameters[0]).toMatchObject({ name: 'orgId', in: 'path', required: true });
    expect(document.paths['/v1/me/preferences'].patch.requestBody.content['application/json'].schema.properties.theme.enum)
      .toEqual(['system', 'light', 'dark']);
    expect(Object.keys(document.components.securitySchemes.oauth.flows.authorizationCode.scopes)).toHaveLength(23);
  });
});

describe('real responses match the documented schemas', () => {
  const samples: Record<string, () => Promise<{ status: number; body: unknown }>> = {
    'GET /v1/me/preferences': () => suite.server.request('GET', '/v1/me/preferences', { token: suite.org.adminKey }),
    'PATCH /v1/me/preferences': () => suite.server.request('PATCH', '/v1/me/preferences', { token: suite.org.adminKey, idempotencyKey: idempotencyKey(), body: { theme: 'dark' } }),
    'GET /v1/preferences/options': () => suite.server.request('GET', '/v1/preferences/options', { token: suite.org.adminKey }),
    'GET /v1/orgs/{orgId}': () => suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: suite.org.adminKey }),
    'PATCH /v1/orgs/{orgId}': async () => {
      const version = (await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: suite.org.adminKey })).body.version;
      return suite.server.request('PATCH', `/v1/orgs/${suite.org.orgId}`, { token: suite.org.adminKey, idempotencyKey: idempotencyKey(), body: { expectedVersion: version, name: 'Checked' } });
    },
  };

  it('has a sample for every route', () => {
    expect(Object.keys(samples).sort()).toEqual(routes.map((route) => `${route.method} ${route.path}`).sort());
  });

  it.each(routes.map((route) => [`${route.method} ${route.path}`, route] as const))('%s', async (name, route) => {
    const response = await samples[name]!();
    expect(response.status).toBe(route.successStatus);
    const parsed = route.response.safeParse(response.body);
    expect(parsed.success, JSON.stringify(parsed.error?.issues)).toBe(true);
  });
});
