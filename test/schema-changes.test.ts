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

describe('unique rules and foreign keys built online', () => {
  const suite = useServerWithOrg();

  it('builds a unique rule concurrently, and refuses one over duplicates with the duplicates listed', async () => {
    const { server, org } = suite;
    const short = { maxLength: 50 };
    let table = await createTable(server, org, [{ name: 'Code', type: 'text', options: short }, { name: 'Other', type: 'text', options: short }]);
    for (const [code, other] of [['a', 'x'], ['b', 'x']]) await createRow(server, org.adminKey, table, { Code: code, Other: other });
    const built = await applyChange(suite, table, { kind: 'add_unique_rule', fieldIds: ['Code'] });
    expect(built.status, built.text).toBe(202);
    const job = await waitForJob(server, org.adminKey, built.body.statusUrl);
    expect(job.state, JSON.stringify(job)).toBe('succeeded');
    table = await refreshSchemaVersion(server, org.adminKey, table);
    expect((await createRow(server, org.adminKey, table, { Code: 'a' })).status).toBe(409);
    const refused = await applyChange(suite, table, { kind: 'add_unique_rule', fieldIds: ['Other'] });
    const failed = await waitForJob(server, org.adminKey, refused.body.statusUrl);
    expect(failed.state).toBe('failed');
    expect(failed.error.code).toBe('UNIQUE_CONFLICT');
    const parent = await createTable(server, org, [{ name: 'Code', type: 'text', options: short }], { databaseId: table.databaseId });
    const ruleJob = await waitForJob(server, org.adminKey, (await applyChange(suite, parent, { kind: 'add_unique_rule', fieldIds: ['Code'] })).body.statusUrl);
    await createRow(server, org.adminKey, await refreshSchemaVersion(server, org.adminKey, parent), { Code: 'a' });
    table = await refreshSchemaVersion(server, org.adminKey, table);
    const orphaned = await waitForJob(server, org.adminKey, (await applyChange(suite, table, {
      kind: 'add_foreign_key', fieldIds: ['Code'], referencedTableId: parent.tableId, referencedRuleId: ruleJob.result.ruleId,
    })).body.statusUrl);
    expect(orphaned.state, JSON.stringify(orphaned)).toBe('failed');
    expect(orphaned.error.code).toBe('FOREIGN_KEY_CONFLICT');
  });
});
