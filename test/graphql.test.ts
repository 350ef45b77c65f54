import { readFileSync } from 'node:fs';
import { getIntrospectionQuery } from 'graphql';
import { describe, expect, it } from 'vitest';
import { printedSchema } from '../src/graph/schema.ts';
import { createOrg } from './helpers/factories.ts';
import { startTestServer } from './helpers/server.ts';
import { useServerWithOrg } from './helpers/suite.ts';

const suite = useServerWithOrg();

describe('schema.graphql', () => {
  it('is the current printed schema (run `npm run schema:print` after changing src/graph)', () => {
    expect(readFileSync(new URL('../schema.graphql', import.meta.url), 'utf8')).toBe(printedSchema());
  });
});

describe('/graphql', () => {
  it('answers introspection without a credential, so frontends can discover the schema', async () => {
    const response = await suite.server.graphql(getIntrospectionQuery());
    expect(response.status).toBe(200);
    const types = response.body.data.__schema.types.map((type: { name: string }) => type.name);
    expect(types).toEqual(expect.arrayContaining(['Preferences', 'PreferenceOptions', 'Org', 'Timestamp']));
  });

  it('requires a credential for data: 401 UNAUTHENTICATED with the challenge', async () => {
    const response = await suite.server.graphql('{ preferenceOptions { themes } }');
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer realm="workspace-data-service"');
    expect(response.body.errors[0].extensions.code).toBe('UNAUTHENTICATED');
  });

  it('returns the same codes as REST in extensions, with requestId', async () => {
    const response = await suite.server.graphql(
      'query($id: ID!) { org(orgId: $id) { name } }',
      { id: '01J00000000000000000000000' },
      { token: suite.org.adminKey },
    );
    expect(response.body.errors[0].extensions.code).toBe('RESOURCE_NOT_FOUND');
  });

  it('rejects documents deeper than the limit', async () => {
    const nest = (levels: number): string => (levels === 0 ? 'name' : `ofType { ${nest(levels - 1)} }`);
    const response = await suite.server.graphql(
      `{ __type(name: "Org") { fields { type { ${nest(12)} } } } }`,
      {},
      { token: suite.org.adminKey },
    );
    expect(response.body.data).toBeUndefined();
    expect(response.body.errors[0].message).toMatch(/depth limit of 12 exceeded/);
  });

  it('rejects too many aliases', async () => {
    const aliases = Array.from({ length: 30 }, (_, i) => `a${i}: preferenceOptions { themes }`).join(' ');
    const response = await suite.server.graphql(`{ ${aliases} }`, {}, { token: suite.org.adminKey });
    expect(response.body.data).toBeUndefined();
    expect(response.body.errors[0].message).toMatch(/alias/i);
  });

  it('rejects documents with too many tokens', async () => {
    const fields = Array.from({ length: 2500 }, () => 'themes').join(' ');
    const response = await suite.server.graphql(
      `{ preferenceOptions { ${fields} } }`,
      {},
      { token: suite.org.adminKey },
    );
    expect(response.body.errors[0].message).toMatch(/token/i);
  });

  it('does not accept batched requests', async () => {
    const response = await suite.server.request('POST', '/graphql', {
      token: suite.org.adminKey,
      body: [{ query: '{ preferenceOptions { themes } }' }, { query: '{ preferenceOptions { themes } }' }],
    });
    expect(response.status).toBeGreaterThanOrEqual(400);
    expect(response.status).toBeLessThan(500);
  });

  it('masks unexpected errors', async () => {
    const broken = await startTestServer();
    try {
      const brokenOrg = await createOrg(broken.prisma);
      await broken.prisma.$executeRawUnsafe('ALTER TABLE orgs RENAME COLUMN name TO name_gone');
      const response = await broken.graphql(
        'query($id: ID!) { org(orgId: $id) { name } }',
        { id: brokenOrg.orgId },
        { token: brokenOrg.adminKey },
      );
      expect(response.body.errors[0]).toMatchObject({
        message: 'Internal error.',
        extensions: { code: 'INTERNAL_ERROR' },
      });
      expect(JSON.stringify(response.body)).not.toMatch(/name_gone|prisma|column/i);
    } finally {
      await broken.close();
    }
  });
});
