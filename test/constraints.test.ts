import { describe, expect, it } from 'vitest';
import { newId } from '../src/kernel/ids.ts';
import { RowMutationResponse } from '../src/contracts/rows.ts';
import { JobHandleResponse } from '../src/contracts/jobs.ts';
import { ForeignKeyResponse, TableSchemaResponse, UniqueRuleResponse } from '../src/contracts/tables.ts';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { addMember, createOrg, idempotencyKey } from './helpers/factories.ts';
import { waitForJob } from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import {
  addForeignKey,
  addUniqueRule,
  createRow,
  createTable,
  refreshSchemaVersion,
  type FieldSpec,
  type TestTable,
} from './helpers/workspace.ts';

const suite = useServerWithOrg();

const admin = () => suite.org.adminKey;
const post = (path: string, body: unknown, token = admin()) =>
  suite.server.request('POST', path, { token, idempotencyKey: idempotencyKey(), body });
/** The raw requests, for the refusals that still happen at request time (422, 409, 403). */
const postRule = (table: TestTable, body: unknown, token = admin()) => post(`${table.path}/unique-rules`, body, token);
const postForeignKey = (table: TestTable, body: unknown, token = admin()) =>
  post(`${table.path}/foreign-keys`, body, token);
/** Rule and key creation are jobs (202 + handle); these wait for the terminal job. */
const addRule = (table: TestTable, body: Record<string, unknown>) => addUniqueRule(suite.server, admin(), table, body);
const addKey = (table: TestTable, body: Record<string, unknown>) => addForeignKey(suite.server, admin(), table, body);

/** The spec 2.7 job handle, exactly: queued, with the org's status URL for the job. */
function expectJobHandle(response: { status: number; text: string; body: any }) {
  expect(response.status, response.text).toBe(202);
  const handle = JobHandleResponse.parse(response.body);
  expect(handle).toEqual({
    jobId: handle.jobId,
    state: 'queued',
    statusUrl: `/v1/orgs/${suite.org.orgId}/jobs/${handle.jobId}`,
  });
  return handle;
}

async function readSchema(table: TestTable) {
  const response = await suite.server.request('GET', `${table.path}/schema`, { token: admin() });
  expect(response.status, response.text).toBe(200);
  return TableSchemaResponse.parse(response.body);
}

async function rowCount(table: TestTable): Promise<number> {
  const response = await suite.server.request('GET', `${table.path}/rows?limit=100`, { token: admin() });
  expect(response.status, response.text).toBe(200);
  return response.body.data.length;
}

/** Unique indexes that exist on the table's physical table (`u_<rule id>`). */
async function uniqueIndexes(table: TestTable): Promise<{ name: string; definition: string }[]> {
  return suite.server.prisma.$queryRaw`
    SELECT indexname::text AS name, indexdef AS definition FROM pg_indexes
     WHERE schemaname = ${`d_${table.databaseId.toLowerCase()}`} AND tablename = ${`t_${table.tableId.toLowerCase()}`}
       AND starts_with(indexname, 'u_')`;
}

const events = (event: string, tableId: string) =>
  suite.server.prisma.activityEvent.findMany({ where: { orgId: suite.org.orgId, event, tableId } });

/** A table with a unique rule on `ruleFields`, its schema version already past the rule. */
async function tableWithRule(
  fields: FieldSpec[],
  ruleFields: string[],
  options: { databaseId?: string; where?: unknown } = {},
) {
  const table = await createTable(
    suite.server,
    suite.org,
    fields,
    options.databaseId ? { databaseId: options.databaseId } : {},
  );
  const rule = await addRule(table, { fieldIds: ruleFields, ...(options.where ? { where: options.where } : {}) });
  expect(rule.job.state, JSON.stringify(rule.job)).toBe('succeeded');
  return { table: await refreshSchemaVersion(suite.server, admin(), table), ruleId: rule.ruleId };
}

const CODE: FieldSpec = { name: 'Code', type: 'text', options: { maxLength: 20 } };

describe('POST …/unique-rules', () => {
  it('creates the rule as a job (202), bumps schemaVersion by one, records rule.create, and refuses duplicates with 409', async () => {
    const table = await createTable(suite.server, suite.org, [CODE, { name: 'Label', type: 'text' }]);
    const handle = expectJobHandle(await postRule(table, { fieldIds: ['Code'] }));
    expect((await events('job.createUniqueRule.queued', table.tableId)).map((event) => event.category)).toEqual([
      'schema',
    ]);
    const job = await waitForJob(suite.server, admin(), handle.statusUrl);
    expect(job).toMatchObject({
      jobId: handle.jobId,
      kind: 'createUniqueRule',
      state: 'succeeded',
      result: { ruleId: expect.any(String), schemaVersion: table.schemaVersion + 1 },
    });
    const schema = await readSchema(table);
    expect(schema.schemaVersion).toBe(table.schemaVersion + 1);
    expect(schema.uniqueRules).toHaveLength(1);
    const rule = UniqueRuleResponse.parse(schema.uniqueRules[0]);
    expect(rule).toMatchObject({
      id: job.result.ruleId,
      tableId: table.tableId,
      fieldIds: [table.fields.Code],
      where: null,
      state: 'active',
    });
    expect((await events('rule.create', table.tableId)).map((event) => event.category)).toEqual(['schema']);
    expect((await uniqueIndexes(table)).map((index) => index.name)).toEqual([`u_${rule.id.toLowerCase()}`]);

    const current = { ...table, schemaVersion: schema.schemaVersion };
    expect((await createRow(suite.server, admin(), current, { Code: 'A-1', Label: 'first' })).status).toBe(201);
    const duplicate = await createRow(suite.server, admin(), current, { Code: 'A-1', Label: 'second' });
    expectError(duplicate, 409, 'UNIQUE_CONFLICT');
    expect(duplicate.body.error.details).toEqual({
      ruleId: rule.id,
      fieldIds: [table.fields.Code],
      fieldNames: ['Code'],
    });
    expect(await rowCount(table)).toBe(1);
  });

  it('exempts rows whose field is empty', async () => {
    const { table } = await tableWithRule([CODE, { name: 'Label', type: 'text' }], ['Code']);
    for (const values of [{ Label: 'a' }, { Label: 'b' }, { Code: null, Label: 'c' }]) {
      expect((await createRow(suite.server, admin(), table, values)).status).toBe(201);
    }
    expect(await rowCount(table)).toBe(3);
  });

  it('enforces a composite rule (by field ids) on the combination only', async () => {
    const fields: FieldSpec[] = [
      { name: 'First', type: 'text', options: { maxLength: 50 } },
      { name: 'Born', type: 'date' },
    ];
    const created = await createTable(suite.server, suite.org, fields);
    const rule = await addRule(created, { fieldIds: [created.fields.First!, created.fields.Born!] });
    expect(rule.job.state, JSON.stringify(rule.job)).toBe('succeeded');
    const [table, ruleId] = [await refreshSchemaVersion(suite.server, admin(), created), rule.ruleId];
    const row = (First: string, Born: string) => createRow(suite.server, admin(), table, { First, Born });
    expect((await row('Ada', '1815-12-10')).status).toBe(201);
    expect((await row('Ada', '1816-01-01')).status).toBe(201);
    expect((await row('Alan', '1815-12-10')).status).toBe(201);
    const clash = await row('Ada', '1815-12-10');
    expectError(clash, 409, 'UNIQUE_CONFLICT');
    expect(clash.body.error.details).toEqual({
      ruleId,
      fieldIds: [table.fields.First, table.fields.Born],
      fieldNames: ['First', 'Born'],
    });
  });

  it('fails the job over existing duplicates with UNIQUE_CONFLICT listing them, and creates nothing', async () => {
    const table = await createTable(suite.server, suite.org, [CODE]);
    const ids: Record<string, string[]> = {};
    for (const code of ['X', 'Y', 'X', 'Z', 'Z', 'X']) {
      const created = await createRow(suite.server, admin(), table, { Code: code });
      (ids[code] ??= []).push(created.body.row.id);
    }
    const before = await readSchema(table);
    const { job } = await addRule(table, { fieldIds: ['Code'] });
    expect(job).toMatchObject({
      kind: 'createUniqueRule',
      state: 'failed',
      error: { code: 'UNIQUE_CONFLICT', message: expect.any(String) },
    });
    expect(job.result ?? null).toBeNull();
    const codeId = table.fields.Code!;
    expect(job.error.details).toEqual({
      fieldIds: [codeId],
      duplicates: [
        { rowIds: ids.X, values: { [codeId]: 'X' } },
        { rowIds: ids.Z, values: { [codeId]: 'Z' } },
      ],
      truncated: false,
    });
    expect(await readSchema(table)).toEqual(before);
    expect(await uniqueIndexes(table)).toEqual([]);
    expect(await events('rule.create', table.tableId)).toEqual([]);
    expect(await events('job.createUniqueRule.failed', table.tableId)).toHaveLength(1);
  });

  it('enforces a conditional rule only among rows matching its where, as a partial index', async () => {
    const fields: FieldSpec[] = [
      CODE,
      { name: 'Status', type: 'select', options: { choices: ['active', 'inactive'] } },
    ];
    const where = { field: 'Status', op: 'eq', value: 'active' };
    const { table, ruleId } = await tableWithRule(fields, ['Code'], { where });
    expect((await readSchema(table)).uniqueRules[0]!.where).toEqual(where);
    expect((await uniqueIndexes(table))[0]!.definition).toMatch(/ WHERE /);

    const row = (Status: string) => createRow(suite.server, admin(), table, { Code: 'C-7', Status });
    expect((await row('inactive')).status).toBe(201);
    expect((await row('inactive')).status).toBe(201);
    expect((await row('active')).status).toBe(201);
    const clash = await row('active');
    expectError(clash, 409, 'UNIQUE_CONFLICT');
    expect(clash.body.error.details.ruleId).toBe(ruleId);
    expect(await rowCount(table)).toBe(3);
  });

  it.each([
    ['an unknown field', { fieldIds: ['Nope'] }, ['fieldIds', 0]],
    ['the same field twice', { fieldIds: ['Code', 'Code'] }, ['fieldIds', 1]],
    ['a longText field', { fieldIds: ['Notes'] }, ['fieldIds', 0]],
    ['a json field', { fieldIds: ['Data'] }, ['fieldIds', 0]],
    ['a multiSelect field', { fieldIds: ['Tags'] }, ['fieldIds', 0]],
    [
      'a where on an unknown field',
      { fieldIds: ['Code'], where: { field: 'Nope', op: 'eq', value: 'x' } },
      ['where', 'field'],
    ],
    [
      'a where using iContains (collation dependent, not indexable)',
      { fieldIds: ['Code'], where: { field: 'Wide', op: 'iContains', value: 'x' } },
      ['where'],
    ],
    ['an extra property', { fieldIds: ['Code'], unique: true }, ['body']],
  ])('rejects %s with 422 and changes nothing', async (_case, body, path) => {
    const table = await createTable(suite.server, suite.org, [
      CODE,
      { name: 'Notes', type: 'longText' },
      { name: 'Data', type: 'json' },
      { name: 'Tags', type: 'multiSelect', options: { choices: ['a'] } },
      { name: 'Wide', type: 'text' },
      { name: 'Half', type: 'text', options: { maxLength: 400 } },
      { name: 'Other half', type: 'text', options: { maxLength: 400 } },
    ]);
    const response = await postRule(table, body);
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [path]);
    expect(await readSchema(table)).toMatchObject({ schemaVersion: 1, uniqueRules: [] });
    expect(await events('job.createUniqueRule.queued', table.tableId)).toEqual([]);
  });

  it('accepts text fields that fill the 2600-byte budget exactly, but not the identical rule twice', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'Edge', type: 'text', options: { maxLength: 650 } },
    ]);
    expect((await addRule(table, { fieldIds: ['Edge'] })).job.state).toBe('succeeded');
    const again = await postRule(table, { fieldIds: [table.fields.Edge] });
    expectError(again, 422, 'VALIDATION_FAILED');
    expectProblemPaths(again, [['fieldIds']]);
    expect((await readSchema(table)).uniqueRules).toHaveLength(1);
  });

  it('checks expectedSchemaVersion: stale → 409 SCHEMA_VERSION_CONFLICT, current → 202 and a job that succeeds', async () => {
    const { table } = await tableWithRule([CODE, { name: 'Other', type: 'integer' }], ['Code']);
    const stale = await postRule(table, { fieldIds: ['Other'], expectedSchemaVersion: 1 });
    expectError(stale, 409, 'SCHEMA_VERSION_CONFLICT');
    expect(stale.body.error.details).toEqual({ expectedSchemaVersion: 1, currentSchemaVersion: 2 });
    const current = await addRule(table, { fieldIds: ['Other'], expectedSchemaVersion: 2 });
    expect(current.job).toMatchObject({ state: 'succeeded', result: { ruleId: expect.any(String), schemaVersion: 3 } });
  });

  it('is refused to a viewer with 403 FORBIDDEN', async () => {
    const table = await createTable(suite.server, suite.org, [CODE]);
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    expectError(await postRule(table, { fieldIds: ['Code'] }, viewer.apiKey), 403, 'FORBIDDEN');
    expect((await readSchema(table)).uniqueRules).toEqual([]);
  });

  it('lets exactly one of 8 parallel creates with the same value win', async () => {
    const { table } = await tableWithRule([CODE], ['Code']);
    const responses = await Promise.all(
      Array.from({ length: 8 }, () => createRow(suite.server, admin(), table, { Code: 'RACE' })),
    );
    const winners = responses.filter((response) => response.status === 201);
    expect(winners).toHaveLength(1);
    RowMutationResponse.parse(winners[0]!.body);
    for (const loser of responses.filter((response) => response.status !== 201))
      expectError(loser, 409, 'UNIQUE_CONFLICT');
    expect(await rowCount(table)).toBe(1);
  });
});

/** A parent table with a unique Code and a child table whose "Parent code" may reference it, in one database. */
async function parentAndChild(
  childFields: FieldSpec[] = [{ name: 'Parent code', type: 'text', options: { maxLength: 20 } }],
) {
  const { table: parent, ruleId } = await tableWithRule([CODE], ['Code']);
  const child = await createTable(suite.server, suite.org, childFields, { databaseId: parent.databaseId });
  return { parent, child, ruleId };
}

const link = (child: TestTable, parent: TestTable, ruleId: string, fieldIds = ['Parent code']) =>
  addKey(child, { fieldIds, referencedTableId: parent.tableId, referencedRuleId: ruleId });

/** Links and expects the job to succeed; the key as GET …/foreign-keys lists it. */
async function linked(child: TestTable, parent: TestTable, ruleId: string, fieldIds = ['Parent code']) {
  const { job, foreignKeyId } = await link(child, parent, ruleId, fieldIds);
  expect(job.state, JSON.stringify(job)).toBe('succeeded');
  const keys = await suite.server.request('GET', `${child.path}/foreign-keys?limit=100`, { token: admin() });
  expect(keys.status, keys.text).toBe(200);
  const key = keys.body.data.find((item: { id: string }) => item.id === foreignKeyId);
  expect(key, keys.text).toBeDefined();
  return ForeignKeyResponse.parse(key);
}

const listForeignKeys = (table: TestTable, query = '') =>
  suite.server.request('GET', `${table.path}/foreign-keys${query}`, { token: admin() });

describe('foreign keys', () => {
  it('links a field to a unique rule (a job, 202), then refuses orphans and protects referenced rows', async () => {
    const { parent, child, ruleId } = await parentAndChild();
    const parentRow = await createRow(suite.server, admin(), parent, { Code: 'P-1' });
    const handle = expectJobHandle(
      await postForeignKey(child, {
        fieldIds: ['Parent code'],
        referencedTableId: parent.tableId,
        referencedRuleId: ruleId,
      }),
    );
    expect((await events('job.createForeignKey.queued', child.tableId)).map((event) => event.category)).toEqual([
      'schema',
    ]);
    const job = await waitForJob(suite.server, admin(), handle.statusUrl);
    expect(job).toMatchObject({
      jobId: handle.jobId,
      kind: 'createForeignKey',
      state: 'succeeded',
      result: { foreignKeyId: expect.any(String), schemaVersion: child.schemaVersion + 1 },
    });
    const listed = await listForeignKeys(child);
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.data).toHaveLength(1);
    const key = ForeignKeyResponse.parse(listed.body.data[0]);
    expect(key.id).toBe(job.result.foreignKeyId);
    const parentName = (await suite.server.request('GET', parent.path, { token: admin() })).body.name;
    expect(key).toEqual({
      id: key.id,
      tableId: child.tableId,
      fieldIds: [child.fields['Parent code']],
      referencedTableId: parent.tableId,
      referencedTableName: parentName,
      referencedRuleId: ruleId,
      referencedFieldIds: [parent.fields.Code],
      referencedFieldNames: ['Code'],
      state: 'active',
    });
    const schema = await readSchema(child);
    expect(schema.schemaVersion).toBe(child.schemaVersion + 1);
    expect(schema.foreignKeys).toEqual([key]);
    expect((await events('foreign-key.create', child.tableId)).map((event) => event.category)).toEqual(['schema']);

    const current = { ...child, schemaVersion: schema.schemaVersion };
    const orphan = await createRow(suite.server, admin(), current, { 'Parent code': 'NOPE' });
    expectError(orphan, 409, 'FOREIGN_KEY_CONFLICT');
    expect(orphan.body.error.details.foreignKeyId).toBe(key.id);
    expect((await createRow(suite.server, admin(), current, { 'Parent code': 'P-1' })).status).toBe(201);
    expect((await createRow(suite.server, admin(), current, { 'Parent code': null })).status).toBe(201);
    expect(await rowCount(child)).toBe(2);

    const rowPath = `${parent.path}/rows/${parentRow.body.row.id}`;
    const { version } = parentRow.body.row;
    const deleted = await suite.server.request('DELETE', rowPath, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: version },
    });
    expectError(deleted, 409, 'FOREIGN_KEY_CONFLICT');
    expect(deleted.body.error.details.foreignKeyId).toBe(key.id);
    const renamed = await suite.server.request('PATCH', rowPath, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: version, values: { Code: 'P-2' } },
    });
    expectError(renamed, 409, 'FOREIGN_KEY_CONFLICT');
    const kept = await suite.server.request('GET', rowPath, { token: admin() });
    expect(kept.body.values).toEqual({ [parent.fields.Code!]: 'P-1' });
  });

  it('lists keys (endpoint 14) and pages them with limit=1', async () => {
    const { parent, child, ruleId } = await parentAndChild([
      { name: 'Parent code', type: 'text', options: { maxLength: 20 } },
      { name: 'Backup code', type: 'text', options: { maxLength: 20 } },
    ]);
    const first = await linked(child, parent, ruleId);
    expect(await listForeignKeys(child).then((response) => response.body)).toEqual({
      data: [first],
      nextCursor: null,
      hasMore: false,
    });
    const second = await linked(child, parent, ruleId, ['Backup code']);

    const page1 = await listForeignKeys(child, '?limit=1');
    expect(page1.status).toBe(200);
    expect(page1.body).toEqual({ data: [first], nextCursor: expect.any(String), hasMore: true });
    const page2 = await listForeignKeys(child, `?limit=1&cursor=${encodeURIComponent(page1.body.nextCursor)}`);
    expect(page2.body).toEqual({ data: [second], nextCursor: null, hasMore: false });
    expect(await listForeignKeys(parent).then((response) => response.body)).toEqual({
      data: [],
      nextCursor: null,
      hasMore: false,
    });
  });

  it('deletes a key: 200 with a mutationId, foreign-key.delete, orphans allowed again; a second delete is 404', async () => {
    const { parent, child, ruleId } = await parentAndChild();
    const key = await linked(child, parent, ruleId);
    const path = `${child.path}/foreign-keys/${key.id}`;
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    expectError(
      await suite.server.request('DELETE', path, { token: viewer.apiKey, idempotencyKey: idempotencyKey() }),
      403,
      'FORBIDDEN',
    );

    const response = await suite.server.request('DELETE', path, { token: admin(), idempotencyKey: idempotencyKey() });
    expect(response.status, response.text).toBe(200);
    expect(response.body).toEqual({
      id: key.id,
      deleted: true,
      mutationId: expect.stringMatching(/^[0-7][0-9A-HJKMNP-TV-Z]{25}$/),
    });
    expect((await events('foreign-key.delete', child.tableId)).map((event) => event.mutationId)).toEqual([
      response.body.mutationId,
    ]);
    const schema = await readSchema(child);
    expect(schema).toMatchObject({ schemaVersion: 3, foreignKeys: [] });

    expect(
      (await createRow(suite.server, admin(), { ...child, schemaVersion: 3 }, { 'Parent code': 'NOPE' })).status,
    ).toBe(201);
    expectError(
      await suite.server.request('DELETE', path, { token: admin(), idempotencyKey: idempotencyKey() }),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });

  it('fails the job over existing orphans with FOREIGN_KEY_CONFLICT listing them, and creates nothing', async () => {
    const { parent, child, ruleId } = await parentAndChild();
    await createRow(suite.server, admin(), parent, { Code: 'P-1' });
    await createRow(suite.server, admin(), child, { 'Parent code': 'P-1' });
    await createRow(suite.server, admin(), child, {});
    const orphan = (await createRow(suite.server, admin(), child, { 'Parent code': 'GONE' })).body.row.id;
    const { job } = await link(child, parent, ruleId);
    expect(job).toMatchObject({
      kind: 'createForeignKey',
      state: 'failed',
      error: { code: 'FOREIGN_KEY_CONFLICT', message: expect.any(String) },
    });
    expect(job.result ?? null).toBeNull();
    const fieldId = child.fields['Parent code']!;
    expect(job.error.details).toEqual({
      fieldIds: [fieldId],
      orphans: [{ rowId: orphan, values: { [fieldId]: 'GONE' } }],
      truncated: false,
    });
    expect(await readSchema(child)).toMatchObject({ schemaVersion: 1, foreignKeys: [] });
    expect(await events('foreign-key.create', child.tableId)).toEqual([]);
    expect(await events('job.createForeignKey.failed', child.tableId)).toHaveLength(1);
  });

  describe('refuses keys that do not fit with 422', () => {
    type Refusal = (
      setup: Awaited<ReturnType<typeof parentAndChild>>,
    ) => Promise<{ body: unknown; path: (string | number)[] }>;
    const refusals: [string, Refusal][] = [
      [
        'a referenced table in another database of the same org',
        async ({ ruleId }) => {
          const { table: elsewhere } = await tableWithRule([CODE], ['Code']);
          return {
            body: { fieldIds: ['Parent code'], referencedTableId: elsewhere.tableId, referencedRuleId: ruleId },
            path: ['referencedTableId'],
          };
        },
      ],
      [
        'a referenced table of another org',
        async ({ ruleId }) => {
          const other = await createOrg(suite.server.prisma);
          const foreign = await createTable(suite.server, other, [CODE]);
          return {
            body: { fieldIds: ['Parent code'], referencedTableId: foreign.tableId, referencedRuleId: ruleId },
            path: ['referencedTableId'],
          };
        },
      ],
      [
        'an unknown referenced table',
        async ({ ruleId }) => ({
          body: { fieldIds: ['Parent code'], referencedTableId: newId(), referencedRuleId: ruleId },
          path: ['referencedTableId'],
        }),
      ],
      [
        'a conditional referenced rule',
        async ({ parent }) => {
          const table = await createTable(suite.server, suite.org, [CODE, { name: 'Live', type: 'boolean' }], {
            databaseId: parent.databaseId,
          });
          const rule = await addRule(table, { fieldIds: ['Code'], where: { field: 'Live', op: 'eq', value: true } });
          expect(rule.job.state, JSON.stringify(rule.job)).toBe('succeeded');
          return {
            body: { fieldIds: ['Parent code'], referencedTableId: table.tableId, referencedRuleId: rule.ruleId },
            path: ['referencedRuleId'],
          };
        },
      ],
      [
        'a rule of another table',
        async ({ parent }) => {
          const { ruleId: otherRule } = await tableWithRule([CODE], ['Code'], { databaseId: parent.databaseId });
          return {
            body: { fieldIds: ['Parent code'], referencedTableId: parent.tableId, referencedRuleId: otherRule },
            path: ['referencedRuleId'],
          };
        },
      ],
      [
        'more fields than the rule has',
        async ({ parent, ruleId }) => ({
          body: { fieldIds: ['Parent code', 'Amount'], referencedTableId: parent.tableId, referencedRuleId: ruleId },
          path: ['fieldIds'],
        }),
      ],
      [
        'a field of another type (integer → text)',
        async ({ parent, ruleId }) => ({
          body: { fieldIds: ['Amount'], referencedTableId: parent.tableId, referencedRuleId: ruleId },
          path: ['fieldIds', 0],
        }),
      ],
    ];

    it.each(refusals)('%s', async (_case, refusal) => {
      const setup = await parentAndChild([
        { name: 'Parent code', type: 'text', options: { maxLength: 20 } },
        { name: 'Amount', type: 'integer' },
      ]);
      const { body, path } = await refusal(setup);
      const response = await postForeignKey(setup.child, body);
      expectError(response, 422, 'VALIDATION_FAILED');
      expectProblemPaths(response, [path]);
      expect(await readSchema(setup.child)).toMatchObject({ schemaVersion: 1, foreignKeys: [] });
    });
  });

  it('lets a table reference its own unique rule', async () => {
    const fields: FieldSpec[] = [CODE, { name: 'Manager', type: 'text', options: { maxLength: 20 } }];
    const { table, ruleId } = await tableWithRule(fields, ['Code']);
    const key = await linked(table, table, ruleId, ['Manager']);
    expect(key).toMatchObject({
      tableId: table.tableId,
      referencedTableId: table.tableId,
      referencedFieldNames: ['Code'],
    });
    const current = await refreshSchemaVersion(suite.server, admin(), table);
    expect((await createRow(suite.server, admin(), current, { Code: 'boss' })).status).toBe(201);
    expect((await createRow(suite.server, admin(), current, { Code: 'ada', Manager: 'boss' })).status).toBe(201);
    expect((await createRow(suite.server, admin(), current, { Code: 'self', Manager: 'self' })).status).toBe(201);
    expectError(
      await createRow(suite.server, admin(), current, { Code: 'lost', Manager: 'nobody' }),
      409,
      'FOREIGN_KEY_CONFLICT',
    );
  });
});
