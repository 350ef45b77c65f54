import { describe, expect, it } from 'vitest';
import { idempotencyKey } from './helpers/factories.ts';
import { waitForJob } from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, refreshSchemaVersion, type TestTable } from './helpers/workspace.ts';

function applyChange(suite: ReturnType<typeof useServerWithOrg>, table: TestTable, change: Record<string, unknown>, expectedSchemaVersion = table.schemaVersion) {
  return suite.server.request('POST', `${table.path}/schema/operations`, {
    token: suite.org.adminKey, idempotencyKey: idempotencyKey(), body: { expectedSchemaVersion, change },
  });
}

describe('schema changes', () => {
  const suite = useServerWithOrg();

  it('adds, renames and converts a field', async () => {
    const { server, org } = suite;
    let table = await createTable(server, org, [{ name: 'Name', type: 'text' }, { name: 'Code', type: 'text' }]);
    for (const code of ['1', '22', 'x']) expect((await createRow(server, org.adminKey, table, { [table.fields.Name!]: 'a', [table.fields.Code!]: code })).status).toBe(201);
    const added = await applyChange(suite, table, { kind: 'add_field', field: { name: 'Age', type: 'integer' } });
    expect(added.status, added.text).toBe(202);
    let job = await waitForJob(server, org.adminKey, added.body.statusUrl);
    expect(job.state, JSON.stringify(job)).toBe('succeeded');
    table = await refreshSchemaVersion(server, org.adminKey, table);
    const failing = await applyChange(suite, table, { kind: 'convert_field', fieldId: table.fields.Code, type: 'integer' });
    expect(failing.status, failing.text).toBe(202);
    job = await waitForJob(server, org.adminKey, failing.body.statusUrl);
    expect(job.state, JSON.stringify(job)).toBe('failed');
    const emptying = await applyChange(suite, table, { kind: 'convert_field', fieldId: table.fields.Code, type: 'integer', onUnconvertible: 'empty' });
    job = await waitForJob(server, org.adminKey, emptying.body.statusUrl);
    expect(job.state, JSON.stringify(job)).toBe('partially_completed');
    table = await refreshSchemaVersion(server, org.adminKey, table);
    const rows = await server.request('GET', `${table.path}/rows`, { token: org.adminKey });
    expect(rows.body.data.map((row: any) => row.values[table.fields.Code!]).sort()).toEqual([1, 22, null]);
  });
});
