import { describe, expect, it } from 'vitest';
import { openApiDocument } from '../src/http/openapi/document.ts';
import { routes } from '../src/http/rest/routes.ts';
import { JOB_KINDS } from '../src/jobs/engine/kinds.ts';
import { JOB_HANDLERS } from '../src/jobs/kinds/registry.ts';
import { JOB_RESULTS } from '../src/jobs/kinds/results.ts';
import { newId } from '../src/kernel/ids.ts';
import { contractProblem } from './helpers/contract.ts';

/*
 * Each job kind declares its result (src/jobs/kinds/results.ts) and the OpenAPI `Job` types `result` per kind and
 * `error.details` per code (issue 25). These tests hold the registers together and prove the contract check that
 * every other test's answers go through rejects a result or details that break the declaration.
 */

type Json = any;

const document = openApiDocument(routes) as Json;
const orgId = newId();
const jobId = newId();
const at = '2026-11-28T07:00:00.000Z';
const sha256 = 'a'.repeat(64);

function job(kind: string, result: Json, error: Json = null): Json {
  return {
    jobId,
    kind,
    state: error ? 'failed' : 'succeeded',
    progress: { done: 1, total: 1 },
    createdAt: at,
    updatedAt: at,
    startedAt: at,
    finishedAt: at,
    result,
    error,
    artifacts: [],
  };
}

/** What the contract check says of GET …/jobs/{jobId} answering this body. */
function problemOf(body: Json): string | null {
  return contractProblem({
    method: 'GET',
    url: `/v1/orgs/${orgId}/jobs/${jobId}`,
    status: 200,
    contentType: 'application/json',
    text: JSON.stringify(body),
  });
}

const exportRowsResult = {
  format: 'csv',
  fieldIds: [newId()],
  schemaVersion: 3,
  rowsDone: 10,
  rowsTotal: 10,
  artifact: { name: 'rows.csv', size: 120, sha256 },
};

describe('job results', () => {
  it('every registered kind answers the result schema its kind declares', () => {
    expect(JOB_HANDLERS.map((handler) => handler.kind).sort()).toEqual([...JOB_KINDS].sort());
    for (const handler of JOB_HANDLERS)
      expect(handler.result, handler.kind).toBe(JOB_RESULTS[handler.kind as keyof typeof JOB_RESULTS]);
  });

  it('the document’s Job is one variant per kind, discriminated by kind', () => {
    const { Job } = document.components.schemas;
    const variants = JOB_KINDS.map((kind) => `#/components/schemas/${kind[0]!.toUpperCase()}${kind.slice(1)}Job`);
    expect(Job.oneOf.map((variant: Json) => variant.$ref)).toEqual(variants);
    expect(Job.discriminator).toEqual({
      propertyName: 'kind',
      mapping: Object.fromEntries(JOB_KINDS.map((kind, index) => [kind, variants[index]])),
    });
    expect(document.components.schemas.ExportRowsJob.properties.kind).toEqual({ type: 'string', const: 'exportRows' });
    expect(document.components.schemas.ExportRowsJob.properties.result.anyOf).toContainEqual({
      $ref: '#/components/schemas/ExportRowsResult',
    });
  });

  it('a result that fits its kind keeps the contract; null does too', () => {
    expect(problemOf(job('exportRows', exportRowsResult))).toBeNull();
    expect(problemOf(job('exportRows', null))).toBeNull();
  });

  it('a result with a key its kind does not declare breaks the contract', () => {
    expect(problemOf(job('exportRows', { ...exportRowsResult, extra: 1 }))).toMatch(/breaks its schema/);
  });

  it('a result missing a declared key breaks the contract', () => {
    const { rowsTotal: _rowsTotal, ...rest } = exportRowsResult;
    expect(problemOf(job('exportRows', rest))).toMatch(/breaks its schema/);
  });

  it('another kind’s result breaks the contract', () => {
    expect(problemOf(job('createField', exportRowsResult))).toMatch(/breaks its schema/);
    expect(problemOf(job('createField', { fieldId: newId(), schemaVersion: 2 }))).toBeNull();
  });

  it('a kind the document does not know breaks the contract', () => {
    expect(problemOf(job('makeCoffee', null))).toMatch(/breaks its schema/);
  });
});

describe('error details', () => {
  const conflict = {
    code: 'UNIQUE_CONFLICT',
    message: 'Existing rows already share values in these fields; resolve the duplicates first.',
    details: { fieldIds: [newId()], duplicates: [{ rowIds: [newId(), newId()], values: {} }], truncated: false },
  };

  it('a failed job’s error with the details its code declares keeps the contract', () => {
    expect(problemOf(job('createUniqueRule', null, conflict))).toBeNull();
  });

  it('a failed job’s error whose details break its code’s declaration breaks the contract', () => {
    const broken = { ...conflict, details: { ...conflict.details, duplicates: 'two rows' } };
    expect(problemOf(job('createUniqueRule', null, broken))).toMatch(/breaks its schema/);
  });

  it('an error code the service does not have breaks the contract', () => {
    expect(problemOf(job('createUniqueRule', null, { ...conflict, code: 'TEAPOT' }))).toMatch(/breaks its schema/);
  });

  it('the envelope types details by code: 422 problems must be a list', () => {
    const answer = (details: Json) =>
      contractProblem({
        method: 'GET',
        url: `/v1/orgs/${orgId}/jobs/${jobId}`,
        status: 404,
        contentType: 'application/json',
        text: JSON.stringify({ error: { code: 'VALIDATION_FAILED', message: 'x', requestId: 'r', details } }),
      });
    expect(answer({ problems: [{ path: ['name'], message: 'required' }] })).toBeNull();
    expect(answer({ problems: 'name is required' })).toMatch(/breaks its schema/);
  });

  it('the document names each detailed code’s details component', () => {
    expect(document.components.schemas.UniqueConflictDetails.properties.duplicates.type).toBe('array');
    expect(document.components.schemas.ValidationFailedDetails.properties.problems.items).toEqual({
      $ref: '#/components/schemas/FieldProblem',
    });
  });
});
