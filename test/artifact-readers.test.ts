import { describe, expect, it } from 'vitest';
import { expectError } from './helpers/expectations.ts';
import { exported } from './helpers/exports.ts';
import { addMember, idempotencyKey } from './helpers/factories.ts';
import { waitForJob } from './helpers/jobs.ts';
import { oauthTokens } from './helpers/oauth.ts';
import type { ApiResponse } from './helpers/server.ts';
import { signIn, withPassword } from './helpers/sessions.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { viewClient } from './helpers/views.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Issue 26 §9: who may read a job artifact's bytes. An export's file is its creator's alone (it holds their
 * personal views, or what their personal view shows); every artifact's content needs `rows:read` beside `jobs:read`.
 */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;
const views = viewClient(suite);

async function fetchArtifact(token: string, url: string): Promise<ApiResponse> {
  const response = await fetch(`${suite.server.url}${url}`, { headers: { authorization: `Bearer ${token}` } });
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: response.status, headers: response.headers, text, body } as ApiResponse;
}

const ARTIFACT_QUERY =
  'query($orgId: ID!, $jobId: ID!, $name: String!) { jobArtifact(orgId: $orgId, jobId: $jobId, name: $name) { size content } }';

async function tableWithRow(): Promise<TestTable> {
  const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
  expect((await createRow(suite.server, admin(), table, { [table.fields.Name!]: 'Ada' })).status).toBe(201);
  return table;
}

async function databaseExport(table: TestTable, token = admin()): Promise<any> {
  const accepted = await suite.server.request('POST', `/v1/orgs/${table.orgId}/databases/${table.databaseId}/exports`, {
    token,
    idempotencyKey: idempotencyKey(),
    body: { format: 'csv' },
  });
  expect(accepted.status, accepted.text).toBe(202);
  const job = await waitForJob(suite.server, token, accepted.body.statusUrl);
  expect(job.state, JSON.stringify(job.error)).toBe('succeeded');
  return job;
}

describe('an export’s file is its creator’s', () => {
  it('a viewer cannot download an admin’s database archive holding the admin’s personal views: 403, REST and GraphQL', async () => {
    const table = await tableWithRow();
    const personal = await views.postView(table, { name: 'Admin only', visibility: 'personal' });
    expect(personal.status, personal.text).toBe(201);
    const job = await databaseExport(table);
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    const refused = await fetchArtifact(viewer.apiKey, job.artifacts[0].url);
    expectError(refused, 403, 'FORBIDDEN');
    expect(refused.body.error.details).toEqual({ reason: 'export_creator_only' });
    const graph = await suite.server.graphql(
      ARTIFACT_QUERY,
      { orgId: table.orgId, jobId: job.jobId, name: job.artifacts[0].name },
      { token: viewer.apiKey },
    );
    expect(graph.body.errors?.[0]?.extensions).toMatchObject({
      code: 'FORBIDDEN',
      details: { reason: 'export_creator_only' },
    });
    expect(graph.body.data).toBeNull();
    // The job itself stays visible to readers of the org; only the bytes are the creator's.
    expect(
      (await suite.server.request('GET', `/v1/orgs/${table.orgId}/jobs/${job.jobId}`, { token: viewer.apiKey })).status,
    ).toBe(200);
    expect((await fetchArtifact(admin(), job.artifacts[0].url)).status).toBe(200);
  });

  it('another admin cannot download it either, and a member’s export of their own table rows is theirs too', async () => {
    const table = await tableWithRow();
    const job = await databaseExport(table);
    const otherAdmin = await addMember(suite.server.prisma, suite.org.orgId, 'admin');
    expectError(await fetchArtifact(otherAdmin.apiKey, job.artifacts[0].url), 403, 'FORBIDDEN');
    const member = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    const rows = await exported(suite.server, member.apiKey, table, { format: 'csv' });
    expect((await fetchArtifact(member.apiKey, rows.artifacts[0].url)).status).toBe(200);
    expectError(await fetchArtifact(admin(), rows.artifacts[0].url), 403, 'FORBIDDEN');
  });
});

describe('an artifact’s bytes need the scope reading its content needs', () => {
  it('a token with only jobs:read is refused 403 INSUFFICIENT_SCOPE rows:read; with rows:read it downloads a table export', async () => {
    const table = await tableWithRow();
    const job = await exported(suite.server, admin(), table, { format: 'csv' });
    const session = await signIn(suite.server, await withPassword(suite.server, suite.org.adminUserId));
    const jobsOnly = await oauthTokens(suite.server, session, 'jobs:read');
    expect(
      (await suite.server.request('GET', `/v1/orgs/${table.orgId}/jobs/${job.jobId}`, { token: jobsOnly.access_token }))
        .status,
    ).toBe(200);
    const refused = await fetchArtifact(jobsOnly.access_token, job.artifacts[0].url);
    expectError(refused, 403, 'INSUFFICIENT_SCOPE');
    expect(refused.body.error.details).toEqual({ requiredScope: 'rows:read' });
    const withRows = await oauthTokens(suite.server, session, 'jobs:read rows:read');
    const allowed = await fetchArtifact(withRows.access_token, job.artifacts[0].url);
    expect(allowed.status, allowed.text).toBe(200);
    expect(allowed.text).toBe('Name\nAda\n');

    const archive = await databaseExport(table);
    const noSchema = await fetchArtifact(withRows.access_token, archive.artifacts[0].url);
    expectError(noSchema, 403, 'INSUFFICIENT_SCOPE');
    expect(noSchema.body.error.details).toEqual({ requiredScope: 'schema:read' });
    const full = await oauthTokens(suite.server, session, 'jobs:read rows:read schema:read');
    expect((await fetchArtifact(full.access_token, archive.artifacts[0].url)).status).toBe(200);
  });
});
