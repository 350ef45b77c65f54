import { describe, expect, it } from 'vitest';
import { openApiDocument } from '../src/http/openapi/document.ts';
import { routes } from '../src/http/rest/routes.ts';
import { exported } from './helpers/exports.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createTable } from './helpers/workspace.ts';

/** Issue 25: the OpenAPI document types what generated clients need most, and the answers carry what it promises. */
type Json = Record<string, any>;
const document = openApiDocument(routes) as Json;
const suite = useServerWithOrg();
const ROWS = '/v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows';

describe('OpenAPI for generated clients', () => {
  it('describes `where` and `orderBy` as JSON content with their schemas, not as bare strings', () => {
    const parameters: Json[] = document.paths[ROWS].get.parameters;
    const where = parameters.find((parameter) => parameter.name === 'where')!;
    expect(where).toMatchObject({
      in: 'query',
      required: false,
      content: { 'application/json': { schema: { $ref: '#/components/schemas/FilterExpression' } } },
    });
    expect(where.schema).toBeUndefined();
    const orderBy = parameters.find((parameter) => parameter.name === 'orderBy')!;
    expect(Object.keys(orderBy.content)).toEqual(['application/json']);
    expect(JSON.stringify(orderBy.content['application/json'].schema)).not.toBe('{"type":"string"}');
  });

  it('types downloads by media type: CSV, NDJSON, XLSX and ZIP, never */*', () => {
    const path = routes.find((route) => route.file)!.path;
    const download = document.paths[path].get;
    expect(Object.keys(download.responses['200'].content).sort()).toEqual([
      'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
      'application/x-ndjson',
      'application/zip',
      'text/csv',
    ]);
  });

  it('declares Location on every 202 that accepts a job', () => {
    const accepted = Object.values(document.paths as Json)
      .flatMap((item: Json) => Object.values(item))
      .filter(
        (operation: Json) =>
          operation.responses?.['202']?.content?.['application/json']?.schema?.$ref?.endsWith('/JobHandleResponse') ||
          operation.responses?.['202']?.content?.['application/json']?.schema?.properties?.statusUrl,
      );
    expect(accepted.length).toBeGreaterThanOrEqual(10);
    for (const operation of accepted)
      expect(operation.responses['202'].headers.Location, operation.operationId).toMatchObject({ required: true });
  });

  it('answers a 202 with Location equal to the job’s statusUrl', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    const answer = await suite.server.request('POST', `${table.path}/exports`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { format: 'csv' },
    });
    expect(answer.status).toBe(202);
    expect(answer.headers.get('location')).toBe(answer.body.statusUrl);
    const job = await exported(suite.server, suite.org.adminKey, table, { format: 'jsonl' });
    const file = await fetch(`${suite.server.url}${job.artifacts[0].url}`, {
      headers: { authorization: `Bearer ${suite.org.adminKey}` },
    });
    expect(file.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
  });
});
