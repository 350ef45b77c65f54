import { beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/kernel/ids.ts';
import { expectError } from './helpers/expectations.ts';
import { createTeamKey, idempotencyKey } from './helpers/factories.ts';
import type { RequestOptions } from './helpers/server.ts';
import { browser, signIn, withPassword } from './helpers/sessions.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { definitionOf, savedView, viewClient } from './helpers/views.ts';
import { createTable } from './helpers/workspace.ts';

/**
 * Issue 18 §5: the header and token rules, checked on every route the OpenAPI document declares rather than on a
 * few: a missing, malformed, unknown or revoked credential is 401 with a Bearer challenge before any input is read,
 * and a mutation's Idempotency-Key (8..255 characters) is checked before its body.
 */
const suite = useServerWithOrg();

interface DeclaredRoute {
  method: string;
  /** The path template as the document names it. */
  template: string;
  path: string;
  idempotent: boolean;
  hasBody: boolean;
  /** The document's `security` lists `{}`: the route works without a credential. */
  anonymous: boolean;
}

async function declaredRoutes(): Promise<DeclaredRoute[]> {
  const response = await suite.server.request('GET', '/v1/openapi.json');
  expect(response.status, response.text).toBe(200);
  const routes: DeclaredRoute[] = [];
  for (const [template, operations] of Object.entries(response.body.paths as Record<string, Record<string, any>>)) {
    for (const [method, operation] of Object.entries(operations)) {
      // Every path parameter is an ID in this API; the caller's own org, or an ID nothing has.
      const path = template.replace(/\{(\w+)\}/g, (_match, name: string) =>
        name === 'orgId' ? suite.org.orgId : newId(),
      );
      const idempotent = (operation.parameters ?? []).some(
        (parameter: { name: string; in: string }) => parameter.in === 'header' && parameter.name === 'Idempotency-Key',
      );
      const anonymous = (operation.security ?? []).some((requirement: object) => Object.keys(requirement).length === 0);
      routes.push({
        method: method.toUpperCase(),
        template,
        path,
        idempotent,
        hasBody: operation.requestBody !== undefined,
        anonymous,
      });
    }
  }
  return routes;
}

/** Routes that need a credential: all but the documented no-credential ones and the hand-written sign-in flows. */
async function credentialRoutes(): Promise<DeclaredRoute[]> {
  const routes = (await declaredRoutes()).filter(
    (route) => !route.anonymous && !route.template.startsWith('/v1/auth/') && !route.template.startsWith('/oauth/'),
  );
  expect(routes.length).toBeGreaterThan(30);
  return routes;
}

const revoked = { authorization: '' };
beforeAll(async () => {
  const token = await createTeamKey(suite.server.prisma, suite.org);
  // `wds_<prefix>_<secret>`: the prefix names the key.
  await suite.server.prisma.apiKey.update({ where: { prefix: token.split('_')[1]! }, data: { revokedAt: new Date() } });
  revoked.authorization = `Bearer ${token}`;
});

const CREDENTIALS: [string, Record<string, string>][] = [
  ['no Authorization', {}],
  ['a malformed Authorization', { authorization: 'Basic dXNlcjpwYXNz' }],
  ['a bare Bearer', { authorization: 'Bearer' }],
  ['an unknown key', { authorization: `Bearer wds_${'x'.repeat(40)}` }],
  ['a revoked key', revoked],
];

function challengeFailure(
  route: DeclaredRoute,
  response: { status: number; body: any; headers: Headers },
): string | null {
  const challenge = response.headers.get('www-authenticate') ?? '';
  if (
    response.status === 401 &&
    response.body?.error?.code === 'UNAUTHENTICATED' &&
    challenge.startsWith('Bearer realm="workspace-data-service"')
  )
    return null;
  return `${route.method} ${route.template}: ${response.status} ${response.body?.error?.code}`;
}

describe('every declared route', () => {
  it('is declared at all (the document lists the /v1 surface)', async () => {
    expect((await declaredRoutes()).length).toBeGreaterThan(30);
  });

  for (const [label, headers] of CREDENTIALS) {
    it(`answers ${label} with 401 UNAUTHENTICATED and a Bearer challenge, before reading a body that breaks every rule`, async () => {
      const failures: string[] = [];
      // No Idempotency-Key, no required query parameter and a body no route accepts: the credential answers first.
      for (const route of await credentialRoutes()) {
        const response = await suite.server.request(route.method, route.path, {
          headers,
          ...(route.hasBody ? { body: { notAMember: ['\u0000'] } } : {}),
        });
        const failure = challengeFailure(route, response);
        if (failure) failures.push(failure);
        else expectError(response, 401, 'UNAUTHENTICATED');
      }
      expect(failures).toEqual([]);
    });
  }

  it('answers 401 before a malformed path ID, a body that is not JSON, and JSON that does not parse', async () => {
    const failures: string[] = [];
    for (const route of await credentialRoutes()) {
      const badPath = route.template.replace(/\{(\w+)\}/g, 'not-an-id');
      for (const [what, options] of [
        ['malformed path ID', {}],
        ...(route.hasBody
          ? [
              ['text/plain body', { rawBody: 'hello', headers: { 'content-type': 'text/plain' } }],
              ['unparsable JSON', { rawBody: '{"a":' }],
            ]
          : []),
      ] as [string, { rawBody?: string; headers?: Record<string, string> }][]) {
        const response = await suite.server.request(
          route.method,
          what === 'malformed path ID' ? badPath : route.path,
          options,
        );
        const failure = challengeFailure(route, response);
        if (failure) failures.push(`${failure} (${what})`);
      }
    }
    expect(failures).toEqual([]);
  });

  it('still lets the documented no-credential routes validate their input (accept an invitation without one)', async () => {
    const anonymous = (await declaredRoutes()).filter(
      (route) => route.anonymous && route.template.startsWith('/v1/') && !route.template.startsWith('/v1/auth/'),
    );
    expect(anonymous.map((route) => `${route.method} ${route.template}`)).toContain('POST /v1/invitations/accept');
    const response = await suite.server.request('POST', '/v1/invitations/accept', {
      idempotencyKey: idempotencyKey(),
      body: { notAMember: true },
    });
    expectError(response, 422, 'VALIDATION_FAILED');
  });
});

/**
 * Every table's content, hashed: a refused mutation must leave all of it as it was. (The admin key's last_used_at
 * is written at most once a minute, so a warm-up request comes first.)
 */
async function catalogFingerprint(): Promise<Record<string, string>> {
  const tables = await suite.server.prisma.$queryRawUnsafe<{ name: string }[]>(`
    SELECT format('%I.%I', table_schema, table_name) AS name FROM information_schema.tables
     WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1`);
  const fingerprint: Record<string, string> = {};
  for (const { name } of tables) {
    const [row] = await suite.server.prisma.$queryRawUnsafe<{ digest: string | null }[]>(
      `SELECT md5(string_agg(t::text, '|' ORDER BY t::text)) AS digest FROM ${name} t`,
    );
    fingerprint[name] = row?.digest ?? 'empty';
  }
  return fingerprint;
}

const BAD_KEYS: [string, string | undefined][] = [
  ['no Idempotency-Key', undefined],
  ['a 7-character Idempotency-Key', 'k'.repeat(7)],
  ['a 256-character Idempotency-Key', 'k'.repeat(256)],
];

function expectKeyRefused(response: { status: number; body: any; text: string; headers: Headers }): void {
  expectError(response as never, 400, 'BAD_REQUEST');
  expect(response.body.error.details.problems.map((problem: { path: string[] }) => problem.path)).toEqual([
    ['Idempotency-Key'],
  ]);
}

describe('the Idempotency-Key rules (spec 4.1, §8: 8..255 characters on every mutation)', () => {
  it('is declared on the mutations and on no read', async () => {
    const routes = (await credentialRoutes()).filter((route) => route.template.startsWith('/v1/'));
    expect(routes.filter((route) => route.method === 'GET' && route.idempotent)).toEqual([]);
    // Spec 4.1: every mutating endpoint needs the key, except the backup schedule preview (endpoint 7) and reads
    // sent as POST for their size (POST …/rows/query, …/rows/aggregate, …/rows/lookup, …/rows/similar).
    const unkeyed = routes
      .filter((route) => route.method !== 'GET' && !route.idempotent)
      .map((route) => `${route.method} ${route.template}`);
    expect(unkeyed.sort()).toEqual([
      'POST /v1/orgs/{orgId}/databases/{databaseId}/backup-schedule/preview',
      'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows/aggregate',
      'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows/lookup',
      'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows/query',
      'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows/similar',
    ]);
  });

  for (const [label, key] of BAD_KEYS) {
    it(`refuses ${label} with 400 BAD_REQUEST on every declared mutation, before its body, and changes nothing`, async () => {
      await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: suite.org.adminKey });
      const before = await catalogFingerprint();
      const failures: string[] = [];
      for (const route of (await declaredRoutes()).filter((declared) => declared.idempotent)) {
        const response = await suite.server.request(route.method, route.path, {
          token: suite.org.adminKey,
          ...(key === undefined ? {} : { idempotencyKey: key }),
          ...(route.hasBody ? { body: { notAMember: true } } : {}),
        });
        if (response.status !== 400 || response.body?.error?.code !== 'BAD_REQUEST')
          failures.push(`${route.method} ${route.template}: ${response.status} ${response.body?.error?.code}`);
        else expectKeyRefused(response);
      }
      expect(failures).toEqual([]);
      expect(await catalogFingerprint()).toEqual(before);
    });
  }
});

describe('8- and 255-character Idempotency-Keys are accepted (spec endpoints 1, 2, 8, 9 and 10)', () => {
  const views = viewClient(suite);
  // A ULID starts with its timestamp: reversed, its random part comes first, so even 8 characters are unique.
  const keyOf = (length: number) => `${[...newId()].reverse().join('')}${'k'.repeat(255)}`.slice(0, length);

  for (const length of [8, 255]) {
    it(`takes a ${length}-character key on each endpoint, after refusing 7 and 256 there with nothing changed`, async () => {
      const admin = { token: suite.org.adminKey };
      const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
      const viewBody = {
        expectedSchemaVersion: table.schemaVersion,
        name: 'Keyed',
        visibility: 'personal',
        definition: definitionOf(),
      };
      const view = savedView(await views.postView(table));
      const invitation = await suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/invitations`, {
        ...admin,
        idempotencyKey: idempotencyKey(),
        body: { email: `keyed-${newId().toLowerCase()}@example.com`, role: 'member' },
      });
      expect(invitation.status, invitation.text).toBe(201);
      const teamKey = await createTeamKey(suite.server.prisma, suite.org);
      const { id: teamKeyId } = await suite.server.prisma.apiKey.findUniqueOrThrow({
        where: { prefix: teamKey.split('_')[1]! },
      });
      const email = await withPassword(suite.server, suite.org.adminUserId);
      // Sessions are revoked from a browser session (an API key may not change security settings): one revokes another.
      const [actor, target] = [await signIn(suite.server, email), await signIn(suite.server, email)];

      const endpoints: [string, string, string, unknown, number, RequestOptions][] = [
        ['1 create view', 'POST', `${table.path}/views`, viewBody, 201, admin],
        ['2 delete view', 'DELETE', `${table.path}/views/${view.id}`, { expectedVersion: view.version }, 200, admin],
        [
          '8 cancel invitation',
          'DELETE',
          `/v1/orgs/${suite.org.orgId}/invitations/${invitation.body.invitation.id}`,
          undefined,
          200,
          admin,
        ],
        ['9 revoke team key', 'DELETE', `/v1/orgs/${suite.org.orgId}/keys/${teamKeyId}`, undefined, 200, admin],
        ['10 revoke session', 'DELETE', `/v1/me/sessions/${target.id}`, undefined, 200, { headers: browser(actor) }],
      ];
      for (const [name, method, path, body, status, auth] of endpoints) {
        const before = await catalogFingerprint();
        for (const refused of [7, 256]) {
          const response = await suite.server.request(method, path, {
            ...auth,
            idempotencyKey: keyOf(refused),
            ...(body === undefined ? {} : { body }),
          });
          expectKeyRefused(response);
        }
        expect(await catalogFingerprint(), name).toEqual(before);
        const response = await suite.server.request(method, path, {
          ...auth,
          idempotencyKey: keyOf(length),
          ...(body === undefined ? {} : { body }),
        });
        expect(response.status, `${name}: ${response.text}`).toBe(status);
      }
    });
  }
});
