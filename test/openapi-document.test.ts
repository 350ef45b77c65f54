import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { rootFieldOf } from '../src/http/openapi/security.ts';
import { routes } from '../src/http/rest/routes.ts';
import { ISSUE_5_SCOPES, SCOPE_OF_FIELD } from './helpers/scope-table.ts';
import { useServerWithOrg } from './helpers/suite.ts';

const suite = useServerWithOrg();

type Json = any;

async function servedDocument(): Promise<Json> {
  // A fresh connection: the type-check test blocks the process for longer than the server's keep-alive timeout, and
  // a pooled socket the server closes as the block ends would reset the next request (ECONNRESET).
  const response = await suite.server.request('GET', '/v1/openapi.json', { headers: { connection: 'close' } });
  expect(response.status).toBe(200);
  return response.body;
}

/** RFC 6901 pointer lookup for a local `$ref` (`#/components/schemas/X`); undefined when it leads nowhere. */
function resolve(document: Json, ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined;
  let node: Json = document;
  for (const token of ref
    .slice(2)
    .split('/')
    .map((part) => decodeURIComponent(part).replace(/~1/g, '/').replace(/~0/g, '~'))) {
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, token)) return undefined;
    node = node[token];
  }
  return node;
}

function refsIn(node: unknown, found: string[] = []): string[] {
  if (Array.isArray(node)) node.forEach((item) => refsIn(item, found));
  else if (node !== null && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string') found.push(value);
      else refsIn(value, found);
    }
  }
  return found;
}

const operationOf = (document: Json, method: string, path: string) => document.paths[path][method.toLowerCase()];
const deref = (document: Json, node: Json) => (node?.$ref ? resolve(document, node.$ref) : node) as Json;

describe('GET /v1/openapi.json for client generators', () => {
  it('validates against the OpenAPI 3.1 schema', async () => {
    const validator = new Validator();
    const result = await validator.validate(await servedDocument());
    expect(result.errors ?? [], JSON.stringify(result.errors ?? []).slice(0, 2000)).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('has every $ref resolve inside the document, the recursive filter and JSON value schemas as named components', async () => {
    const document = await servedDocument();
    const refs = refsIn(document);
    expect(refs.length).toBeGreaterThan(100);
    expect(refs.filter((ref) => resolve(document, ref) === undefined)).toEqual([]);
    expect(JSON.stringify(document.paths)).not.toContain('$defs');
    expect(document.components.schemas.FilterExpression.anyOf).toHaveLength(3);
    expect(document.components.schemas.JsonValue).toEqual({ description: expect.stringContaining('Any JSON value') });
    expect(refs).toContain('#/components/schemas/FilterExpression');
  });

  it('generates a TypeScript client with openapi-typescript that type-checks', async () => {
    const document = await servedDocument();
    const source = astToString(await openapiTS(document));
    const directory = mkdtempSync(join(tmpdir(), 'openapi-client-'));
    try {
      const schemaFile = join(directory, 'schema.ts');
      const useFile = join(directory, 'use.ts');
      writeFileSync(schemaFile, source);
      // A client's view: the create-view body takes a recursive filter, errors carry the envelope, a job's result
      // narrows by its kind and an error's details by its code (issue 25).
      writeFileSync(
        useFile,
        [
          "import type { components, operations } from './schema.ts';",
          "type Body = operations['CreateView']['requestBody'];",
          "type Filter = components['schemas']['FilterExpression'];",
          "const filter: Filter = { and: [{ field: 'Code', op: 'prefix', value: 'A' }, { or: [{ field: 'n', op: 'gt', value: 1 }] }] };",
          "const error: operations['CreateView']['responses'][409]['content']['application/json'] = { error: { code: 'IDEMPOTENCY_CONFLICT', message: 'm', requestId: 'r' } };",
          'export const used: [Filter, typeof error, Body | undefined] = [filter, error, undefined];',
          "type Job = operations['GetJob']['responses'][200]['content']['application/json'];",
          "export const exported = (job: Job): string | undefined => (job.kind === 'exportRows' ? job.result?.artifact.sha256 : undefined);",
          "export const converted = (job: Job): number | undefined => (job.kind === 'applySchemaChange' && job.result && 'emptied' in job.result ? job.result.emptied : undefined);",
          "type Failure = operations['GetJob']['responses'][404]['content']['application/json']['error'];",
          "export const groups = (error: Failure): number | undefined => (error.code === 'UNIQUE_CONFLICT' ? error.details?.duplicates?.length : undefined);",
          '',
        ].join('\n'),
      );
      const program = ts.createProgram([schemaFile, useFile], {
        strict: true,
        noEmit: true,
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        allowImportingTsExtensions: true,
        skipLibCheck: true,
        types: [],
      });
      const diagnostics = ts
        .getPreEmitDiagnostics(program)
        .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      expect(diagnostics).toEqual([]);
      expect(source).toContain('"/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/views"');
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it('describes the messages webhook endpoints receive: a change, a batch and a test, with their signature headers', async () => {
    const document = await servedDocument();
    expect(Object.keys(document.webhooks)).toEqual(['change', 'changes', 'webhook.test']);
    for (const [name, operationId] of [
      ['change', 'receiveChange'],
      ['changes', 'receiveChanges'],
      ['webhook.test', 'receiveTestMessage'],
    ]) {
      const post = document.webhooks[name!].post;
      expect(post.operationId).toBe(operationId);
      expect(post.parameters.map((parameter: Json) => `${parameter.in}:${parameter.name}`)).toEqual([
        'header:webhook-id',
        'header:webhook-timestamp',
        'header:webhook-signature',
      ]);
      expect(Object.keys(post.responses)).toEqual(['2XX']);
    }
    const schemaOf = (name: string) => document.webhooks[name].post.requestBody.content['application/json'].schema;
    expect(schemaOf('change').properties.type.enum).toContain('row.created');
    expect(schemaOf('changes').properties.type).toMatchObject({ const: 'changes' });
    expect(schemaOf('changes').properties.data.properties.changes).toMatchObject({ minItems: 1, maxItems: 1000 });
    expect(schemaOf('webhook.test').properties.data.required).toEqual(['webhookId', 'message']);
  });

  it('gives every operation a unique operationId and the service as its server', async () => {
    const document = await servedDocument();
    const ids = Object.values(document.paths).flatMap((item: Json) =>
      Object.values(item).map((operation: Json) => operation.operationId),
    );
    expect(ids.length).toBeGreaterThan(routes.length);
    expect(new Set(ids).size).toBe(ids.length);
    expect(document.servers).toEqual([expect.objectContaining({ url: '/' })]);
  });
});

describe('error statuses in the document', () => {
  it('lists 401 with WWW-Authenticate, 413, 429 with Retry-After, 500 and 503 on every operation, all with the envelope', async () => {
    const document = await servedDocument();
    for (const route of routes) {
      const { responses } = operationOf(document, route.method, route.path);
      const name = `${route.method} ${route.path}`;
      expect(Object.keys(responses), name).not.toContain('default');
      for (const status of ['401', '413', '429', '431', '500', '503'])
        expect(Object.keys(responses), `${name} ${status}`).toContain(status);
      expect(deref(document, responses['401']).headers['WWW-Authenticate']).toMatchObject({ required: true });
      expect(deref(document, responses['429']).headers['Retry-After']).toMatchObject({ required: true });
      for (const [status, response] of Object.entries(responses)) {
        if (Number(status) < 400) continue;
        expect(deref(document, response).content['application/json'].schema, `${name} ${status}`).toEqual({
          $ref: '#/components/schemas/Error',
        });
      }
    }
    expect(document.components.schemas.Error.required).toEqual(['error']);
  });

  it('lists the statuses each kind of operation can answer with', async () => {
    const document = await servedDocument();
    const statuses = (method: string, path: string) => Object.keys(operationOf(document, method, path).responses);
    const tablePath = '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}';
    expect(statuses('POST', `${tablePath}/views`).sort()).toEqual([
      '201',
      '400',
      '401',
      '403',
      '404',
      '408',
      '409',
      '413',
      '415',
      '422',
      '429',
      '431',
      '500',
      '503',
    ]);
    expect(statuses('GET', `${tablePath}/rows/{rowId}/history`).sort()).toEqual([
      '200',
      '400',
      '401',
      '403',
      '404',
      '413',
      '422',
      '429',
      '431',
      '500',
      '503',
    ]);
    expect(statuses('DELETE', '/v1/me/keys/{id}').sort()).toEqual([
      '200',
      '400',
      '401',
      '403',
      '404',
      '409',
      '413',
      '422',
      '429',
      '431',
      '500',
      '503',
    ]);
    // Its query takes no parameters: any is a 422.
    expect(statuses('GET', '/v1/preferences/options').sort()).toEqual([
      '200',
      '401',
      '413',
      '422',
      '429',
      '431',
      '500',
      '503',
    ]);
    expect(statuses('GET', '/v1/me/keys').sort()).toEqual([
      '200',
      '400',
      '401',
      '403',
      '413',
      '422',
      '429',
      '431',
      '500',
      '503',
    ]);
    expect(statuses('GET', '/v1/orgs/{orgId}/jobs/{jobId}/artifacts/{name}')).toEqual(
      expect.arrayContaining(['409', '410']),
    );
    expect(statuses('POST', '/v1/invitations/accept')).toEqual(expect.arrayContaining(['404', '409', '422']));
    // Only the operations that send a token through the delivery hook can answer 502.
    expect(statuses('POST', '/v1/orgs/{orgId}/invitations')).toContain('502');
    expect(statuses('POST', '/v1/me/email-verification')).toContain('502');
    expect(statuses('POST', `${tablePath}/views`)).not.toContain('502');
  });

  it('matches a real 401: the envelope and the WWW-Authenticate challenge it documents', async () => {
    const document = await servedDocument();
    const response = await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`);
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toMatch(/^Bearer realm=/);
    expect(response.headers.get('x-request-id')).toBe(response.body.error.requestId);
    expect(Object.keys(response.body)).toEqual(['error']);
    expect(Object.keys(operationOf(document, 'GET', '/v1/orgs/{orgId}').responses)).toContain('401');
  });
});

describe('security requirements', () => {
  /** The OAuth requirements (alternatives, each a list of scopes all needed) of a field's routes. */
  const expectedRequirements = (field: string): string[][] => {
    if (field === 'updateMember') return [['members:manage'], ['profile:manage']];
    const scope = Object.hasOwn(SCOPE_OF_FIELD, field) ? SCOPE_OF_FIELD[field] : ISSUE_5_SCOPES[field];
    expect(scope, `${field} is in test/helpers/scope-table.ts`).not.toBeUndefined();
    return [scope ? [scope].flat() : []];
  };

  it('name the OAuth scope of the GraphQL field each route runs', async () => {
    const document = await servedDocument();
    for (const route of routes) {
      const { security } = operationOf(document, route.method, route.path);
      const oauth = security
        .filter((requirement: Json) => requirement.oauth)
        .map((requirement: Json) => requirement.oauth);
      expect(oauth, `${route.method} ${route.path}`).toEqual(expectedRequirements(rootFieldOf(route)));
      expect(security, `${route.method} ${route.path}`).toEqual(
        expect.arrayContaining([{ apiKey: [] }, { session: [] }]),
      );
    }
    expect(
      operationOf(document, 'POST', '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/views').security,
    ).toContainEqual({ oauth: ['rows:read'] });
    // Accepting an invitation needs no credential: an empty requirement says so.
    expect(operationOf(document, 'POST', '/v1/invitations/accept').security).toContainEqual({});
  });

  it('declares the API key, session cookie and OAuth authorization-code flow with all 23 scopes', async () => {
    const { components } = await servedDocument();
    expect(components.securitySchemes.apiKey).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(components.securitySchemes.session).toMatchObject({
      type: 'apiKey',
      in: 'cookie',
      name: '__Host-wds_session',
    });
    const flow = components.securitySchemes.oauth.flows.authorizationCode;
    expect(flow).toMatchObject({ authorizationUrl: '/oauth/authorize', tokenUrl: '/oauth/token' });
    expect(Object.keys(flow.scopes)).toHaveLength(23);
  });
});

describe('the hand-written session and OAuth routes', () => {
  it('describes sign-in, step-up and the OAuth endpoints with their bodies and error shapes', async () => {
    const document = await servedDocument();
    const login = operationOf(document, 'POST', '/v1/auth/login');
    expect(login.security).toEqual([{}]);
    expect(login.requestBody.content['application/json'].schema.required).toEqual(['email', 'password']);
    expect(login.responses['201'].headers['Set-Cookie']).toMatchObject({ required: true });
    expect(Object.keys(login.responses)).toEqual(expect.arrayContaining(['401', '422', '429']));
    expect(operationOf(document, 'POST', '/v1/auth/step-up').security).toEqual([{ session: [] }]);
    const token = operationOf(document, 'POST', '/oauth/token');
    expect(token.requestBody.content['application/x-www-form-urlencoded'].schema.properties.grant_type.enum).toEqual([
      'authorization_code',
      'refresh_token',
    ]);
    expect(token.responses['400'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/OAuthError',
    });
    expect(operationOf(document, 'GET', '/oauth/authorize').parameters.map((p: Json) => p.name)).toContain(
      'code_challenge',
    );
    expect(operationOf(document, 'POST', '/oauth/authorize').responses['303'].headers.Location).toMatchObject({
      required: true,
    });
    expect(document.paths['/oauth/revoke'].post.security).toContainEqual({ clientBasic: [] });
  });

  it('matches what sign-in really answers: 401 with the envelope for a wrong password, 422 for a bad body', async () => {
    const document = await servedDocument();
    const refused = await suite.server.request('POST', '/v1/auth/login', {
      body: { email: 'nobody@example.com', password: 'wrong password' },
    });
    expect(refused.status).toBe(401);
    expect(Object.keys(refused.body.error).sort()).toEqual(expect.arrayContaining(['code', 'message', 'requestId']));
    const invalid = await suite.server.request('POST', '/v1/auth/login', { body: { email: 'nobody@example.com' } });
    expect(invalid.status).toBe(422);
    const documented = Object.keys(operationOf(document, 'POST', '/v1/auth/login').responses);
    expect(documented).toEqual(expect.arrayContaining([String(refused.status), String(invalid.status)]));
    const token = await suite.server.request('POST', '/oauth/token', {
      rawBody: 'grant_type=password',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    // No client credentials: RFC 6749's invalid_client, in its own shape rather than the envelope.
    expect(token.status).toBe(401);
    expect(token.headers.get('www-authenticate')).toMatch(/^Basic /);
    expect(Object.keys(token.body).sort()).toEqual(['error', 'error_description']);
    expect(operationOf(document, 'POST', '/oauth/token').responses['401'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/OAuthError',
    });
  });
});
