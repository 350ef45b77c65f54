import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, UNSTORABLE_TEXT_MESSAGE } from '../src/kernel/input-hygiene.ts';
import { newId } from '../src/kernel/ids.ts';
import { expectError } from './helpers/expectations.ts';
import { idempotencyKey } from './helpers/factories.ts';
import type { ApiResponse } from './helpers/server.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { definitionOf } from './helpers/views.ts';
import { createDatabase, createTable } from './helpers/workspace.ts';

/** Issue 18 §4: text PostgreSQL cannot store, bodies too deep to walk and URLs too long are 4xx envelopes, and change nothing. */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;
const org = () => `/v1/orgs/${suite.org.orgId}`;
const NUL = '\u0000';

/** 422 VALIDATION_FAILED naming exactly these paths as unstorable text. */
function expectUnstorable(response: ApiResponse, paths: (string | number)[][]): void {
  expectError(response, 422, 'VALIDATION_FAILED');
  expect(response.body.error.details).toEqual({
    problems: paths.map((path) => ({ path, message: UNSTORABLE_TEXT_MESSAGE })),
  });
}

const databaseNames = async () =>
  (await suite.server.prisma.database.findMany({ where: { orgId: suite.org.orgId }, select: { name: true } })).map(
    (row) => row.name,
  );

describe('U+0000 in any text: 422, nothing changed', () => {
  it('database, table and view names', async () => {
    const before = await databaseNames();
    expectUnstorable(
      await suite.server.request('POST', `${org()}/databases`, {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { name: `a${NUL}b` },
      }),
      [['name']],
    );
    expect(await databaseNames()).toEqual(before);

    const databaseId = await createDatabase(suite.server, suite.org);
    const tables = `${org()}/databases/${databaseId}/tables`;
    expectUnstorable(
      await suite.server.request('POST', tables, {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { name: `T${NUL}`, fields: [{ name: 'Name', type: 'text' }] },
      }),
      [['name']],
    );
    const field = await suite.server.request('POST', tables, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { name: 'T', fields: [{ name: `Na${NUL}me`, type: 'text' }] },
    });
    expectError(field, 422, 'VALIDATION_FAILED'); // field names refuse every control character already
    expect((await suite.server.request('GET', tables, { token: admin() })).body.data).toEqual([]);

    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }], { databaseId });
    expectUnstorable(
      await suite.server.request('POST', `${table.path}/views`, {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: {
          expectedSchemaVersion: table.schemaVersion,
          name: `V${NUL}`,
          visibility: 'personal',
          definition: definitionOf(),
        },
      }),
      [['name']],
    );
    expect((await suite.server.request('GET', `${table.path}/views`, { token: admin() })).body.data).toEqual([]);
  });

  it('org, key and member names', async () => {
    const current = await suite.server.request('GET', org(), { token: admin() });
    expectUnstorable(
      await suite.server.request('PATCH', org(), {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { expectedVersion: current.body.version, name: `Org${NUL}` },
      }),
      [['name']],
    );
    expect((await suite.server.request('GET', org(), { token: admin() })).body).toEqual(current.body);

    expectUnstorable(
      await suite.server.request('POST', '/v1/me/keys', {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { name: `Key${NUL}`, orgId: suite.org.orgId, access: 'read' },
      }),
      [['name']],
    );
    expect(await suite.server.prisma.apiKey.count({ where: { userId: suite.org.adminUserId } })).toBe(1);

    const members = await suite.server.request('GET', `${org()}/members`, { token: admin() });
    const [me] = members.body.data;
    expectUnstorable(
      await suite.server.request('PATCH', `${org()}/members/${me.id}`, {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { expectedVersion: me.version, name: `Ada${NUL}` },
      }),
      [['name']],
    );
    expect((await suite.server.request('GET', `${org()}/members`, { token: admin() })).body).toEqual(members.body);
  });

  it('the name of a new user accepting an invitation', async () => {
    const created = await suite.server.request('POST', `${org()}/invitations`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { email: `nul-${Date.now()}@example.com`, role: 'viewer' },
    });
    expect(created.status, created.text).toBe(201);
    const body = { token: created.body.token, name: `Eve${NUL}`, password: 'a long enough passphrase' };
    expectUnstorable(
      await suite.server.request('POST', '/v1/invitations/accept', { idempotencyKey: idempotencyKey(), body }),
      [['name']],
    );
    const accepted = await suite.server.request('POST', '/v1/invitations/accept', {
      idempotencyKey: idempotencyKey(),
      body: { ...body, name: 'Eve' },
    });
    expect(accepted.status, accepted.text).toBe(200);
  });

  it('activity q, filter options q and artifact names', async () => {
    expectUnstorable(await suite.server.request('GET', `${org()}/activity?q=a%00b`, { token: admin() }), [['q']]);
    expectUnstorable(
      await suite.server.request('GET', `${org()}/activity/filters?type=actors&q=%00`, { token: admin() }),
      [['q']],
    );
    expectUnstorable(await suite.server.request('GET', `${org()}/jobs/${newId()}/artifacts/%00`, { token: admin() }), [
      ['name'],
    ]);
  });

  it('a GraphQL literal or variable', async () => {
    const mutation = (name: string) =>
      `mutation { createDatabase(idempotencyKey: "${idempotencyKey()}", orgId: "${suite.org.orgId}", input: {name: "${name}"}) { id } }`;
    const literal = await suite.server.graphql(mutation('a\\u0000b'), {}, { token: admin() });
    expect(literal.body.errors[0].extensions).toMatchObject({
      code: 'VALIDATION_FAILED',
      details: { problems: [{ path: ['name'], message: UNSTORABLE_TEXT_MESSAGE }] },
    });
    const variable = await suite.server.graphql(
      `query ($q: String) { activity(orgId: "${suite.org.orgId}", q: $q) { hasMore } }`,
      { q: `x${NUL}` },
      { token: admin() },
    );
    expect(variable.body.errors[0].extensions).toMatchObject({
      code: 'VALIDATION_FAILED',
      details: { problems: [{ path: ['q'], message: UNSTORABLE_TEXT_MESSAGE }] },
    });
  });
});

describe('unpaired surrogates', () => {
  it('a database name holding one is refused, not stored as U+FFFD', async () => {
    const before = await databaseNames();
    const response = await suite.server.request('POST', `${org()}/databases`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      rawBody: '{"name":"dup\\ud800x"}',
    });
    expectUnstorable(response, [['name']]);
    expect(await databaseNames()).toEqual(before);
  });

  it('a refusal that echoes a bad cell key or field name is recorded, and its replay is the same answer', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    for (const key of ['a\\ud800b', 'k\\u0000']) {
      const request = {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        rawBody: `{"expectedSchemaVersion":${table.schemaVersion},"values":{"${key}":1}}`,
      };
      const first = await suite.server.request('POST', `${table.path}/rows`, request);
      expectError(first, 422, 'VALIDATION_FAILED');
      const replay = await suite.server.request('POST', `${table.path}/rows`, request);
      expect({ status: replay.status, error: { ...replay.body.error, requestId: undefined } }).toEqual({
        status: 422,
        error: { ...first.body.error, requestId: undefined },
      });
    }
    const rows = await suite.server.request('GET', `${table.path}/rows`, { token: admin() });
    expect(rows.body.data).toEqual([]);
  });
});

describe('nesting', () => {
  const deep = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;

  it(`a /v1 body nested deeper than ${MAX_JSON_DEPTH} levels: 400 before anything walks it`, async () => {
    const before = await databaseNames();
    const response = await suite.server.request('POST', `${org()}/databases`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      rawBody: `{"name":"Deep","extra":${deep(5_000)}}`,
    });
    expectError(response, 400, 'BAD_REQUEST');
    expect(response.body.error.details).toEqual({ maxDepth: MAX_JSON_DEPTH });
    expect(await databaseNames()).toEqual(before);
  });

  it('a row whose json cell nests 5,000 levels: 400, no row', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Data', type: 'json' }]);
    const response = await suite.server.request('POST', `${table.path}/rows`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      rawBody: `{"expectedSchemaVersion":${table.schemaVersion},"values":{"Data":${deep(5_000)}}}`,
    });
    expectError(response, 400, 'BAD_REQUEST');
    expect((await suite.server.request('GET', `${table.path}/rows`, { token: admin() })).body.data).toEqual([]);
  });

  it('a /graphql body nested too deep: 400 with the code in a GraphQL-shaped body', async () => {
    const response = await suite.server.request('POST', '/graphql', {
      token: admin(),
      rawBody: `{"query":"{ preferenceOptions { timezones } }","variables":{"x":${deep(5_000)}}}`,
    });
    expect(response.status).toBe(400);
    expect(response.body.errors[0].extensions).toMatchObject({
      code: 'BAD_REQUEST',
      details: { maxDepth: MAX_JSON_DEPTH },
    });
  });

  it('a JSON query parameter nested too deep: 422 naming it', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    const response = await suite.server.request('GET', `${table.path}/rows?where=${encodeURIComponent(deep(200))}`, {
      token: admin(),
    });
    expectError(response, 422, 'VALIDATION_FAILED');
    expect(response.body.error.details.problems).toEqual([
      { path: ['query', 'where'], message: `must not nest deeper than ${MAX_JSON_DEPTH} levels` },
    ]);
  });
});

describe('a URL over 16 KiB', () => {
  it('answers 431 HEADERS_TOO_LARGE with the envelope and X-Request-Id', async () => {
    const response = await suite.server.request('GET', `${org()}/databases?pad=${'x'.repeat(20_000)}`, {
      token: admin(),
    });
    expectError(response, 431, 'HEADERS_TOO_LARGE');
  });
});
