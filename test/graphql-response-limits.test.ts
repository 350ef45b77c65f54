import { describe, expect, it } from 'vitest';
import { exported } from './helpers/exports.ts';
import { expectError } from './helpers/expectations.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable } from './helpers/workspace.ts';

/**
 * Issue 26 §3: one GraphQL request cannot answer 120 MB. An artifact's content costs half the query budget (one per
 * operation), and every answer has an output budget (RESPONSE_LIMIT_BYTES, 4 KiB here) beyond which it is 413.
 */
const LIMIT = 4096;
const suite = useServerWithOrg({ RESPONSE_LIMIT_BYTES: String(LIMIT) });
const admin = () => suite.org.adminKey;

const contentAliases = (count: number) => `query($orgId: ID!, $jobId: ID!, $name: String!) {
  ${Array.from({ length: count }, (_, index) => `a${index}: jobArtifact(orgId: $orgId, jobId: $jobId, name: $name) { content }`).join('\n  ')}
}`;

async function smallExport() {
  const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
  expect((await createRow(suite.server, admin(), table, { [table.fields.Name!]: 'Ada' })).status).toBe(201);
  const job = await exported(suite.server, admin(), table, { format: 'csv' });
  return { table, variables: { orgId: suite.org.orgId, jobId: job.jobId, name: job.artifacts[0].name } };
}

describe('artifact content in the query cost', () => {
  it('answers one alias of jobArtifact { content }', async () => {
    const { variables } = await smallExport();
    const response = await suite.server.graphql(contentAliases(1), variables, { token: admin() });
    expect(response.status, response.text).toBe(200);
    expect(response.body.data.a0.content).toBe('Name\nAda\n');
  });

  it('refuses two or fifteen aliases of it with 400 QUERY_TOO_COMPLEX before anything runs', async () => {
    const { variables } = await smallExport();
    for (const count of [2, 15]) {
      const response = await suite.server.graphql(contentAliases(count), variables, { token: admin() });
      expect(response.status, response.text).toBe(400);
      expect(response.body.data).toBeUndefined();
      expect(response.body.errors).toEqual([
        {
          message: expect.stringMatching(/^Query Cost limit of 200000 exceeded, found \d+\.$/),
          extensions: { code: 'QUERY_TOO_COMPLEX', details: { limit: 'maxCost', max: 200_000 } },
        },
      ]);
    }
  });
});

describe('the output budget', () => {
  it('answers 413 PAYLOAD_TOO_LARGE, with no data, for a GraphQL answer over RESPONSE_LIMIT_BYTES', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'longText' }]);
    for (let index = 0; index < 3; index += 1) {
      expect((await createRow(suite.server, admin(), table, { [table.fields.Name!]: 'x'.repeat(1500) })).status).toBe(
        201,
      );
    }
    const query = `query($orgId: ID!, $databaseId: ID!, $tableId: ID!, $limit: Int) {
      rows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, limit: $limit) { data { id values } }
    }`;
    const address = { orgId: table.orgId, databaseId: table.databaseId, tableId: table.tableId };
    const small = await suite.server.graphql(query, { ...address, limit: 1 }, { token: admin() });
    expect(small.status, small.text).toBe(200);
    expect(small.body.data.rows.data).toHaveLength(1);
    const big = await suite.server.graphql(query, { ...address, limit: 3 }, { token: admin() });
    expect(big.status, big.text).toBe(413);
    expect(big.body.data).toBeUndefined();
    expect(big.body.errors).toEqual([
      {
        message: expect.stringContaining(`${LIMIT}-byte output budget`),
        extensions: { code: 'PAYLOAD_TOO_LARGE', details: { limit: LIMIT } },
      },
    ]);
  });

  it('answers the same over REST: 413 PAYLOAD_TOO_LARGE in the error envelope', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'longText' }]);
    for (let index = 0; index < 3; index += 1) {
      expect((await createRow(suite.server, admin(), table, { [table.fields.Name!]: 'y'.repeat(1500) })).status).toBe(
        201,
      );
    }
    expect((await suite.server.request('GET', `${table.path}/rows?limit=1`, { token: admin() })).status).toBe(200);
    const big = await suite.server.request('GET', `${table.path}/rows?limit=3`, { token: admin() });
    expectError(big, 413, 'PAYLOAD_TOO_LARGE');
    expect(big.body.error.details).toEqual({ limit: LIMIT });
  });
});
