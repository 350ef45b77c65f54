import { describe, expect, it } from 'vitest';
import { LookupRowsResponse } from '../src/contracts/rows-lookup.ts';
import { RowResponse } from '../src/contracts/rows.ts';
import { RowBatchResponse } from '../src/contracts/rows-batch.ts';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { addMember, createOrg, idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { addUniqueRule, createRow, createTable, refreshSchemaVersion, type TestTable } from './helpers/workspace.ts';
import { waitForJob } from './helpers/jobs.ts';

/** Issue 28: POST …/rows/lookup and batch update/delete by `matchOn`. */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;

type Row = ReturnType<typeof RowResponse.parse>;

/** A table with a two-field rule (SKU, Warehouse) and a one-field rule on a wide text (Code: a hashed rule). */
async function stockTable() {
  const table = await createTable(suite.server, suite.org, [
    { name: 'Sku', type: 'text', options: { maxLength: 50 } },
    { name: 'Warehouse', type: 'select', options: { choices: ['North', 'South'] } },
    { name: 'Code', type: 'text' },
    { name: 'Qty', type: 'integer' },
  ]);
  const pair = await addUniqueRule(suite.server, admin(), table, { fieldIds: ['Sku', 'Warehouse'] });
  expect(pair.job.state).toBe('succeeded');
  const code = await addUniqueRule(suite.server, admin(), pair.table, { fieldIds: ['Code'] });
  expect(code.job.state).toBe('succeeded');
  const conditional = await addUniqueRule(suite.server, admin(), code.table, {
    fieldIds: ['Qty'],
    where: { field: 'Qty', op: 'gt', value: 100 },
  });
  expect(conditional.job.state).toBe('succeeded');
  const rows: Row[] = [];
  for (const values of [
    { Sku: 'A-1', Warehouse: 'North', Code: 'alpha', Qty: 1 },
    { Sku: 'A-1', Warehouse: 'South', Code: 'beta', Qty: 2 },
    { Sku: 'B-2', Warehouse: 'North', Qty: 3 },
  ]) {
    const created = await createRow(suite.server, admin(), conditional.table, values);
    expect(created.status, created.text).toBe(201);
    rows.push(created.body.row);
  }
  return {
    table: conditional.table,
    pairRule: pair.ruleId,
    codeRule: code.ruleId,
    conditionalRule: conditional.ruleId,
    rows,
  };
}

function lookup(table: TestTable, body: unknown, token = admin()) {
  return suite.server.request('POST', `${table.path}/rows/lookup`, { token, body });
}

describe('POST …/rows/lookup', () => {
  it('answers one entry per key in key order, null where no row holds the key', async () => {
    const { table, pairRule, rows } = await stockTable();
    const response = await lookup(table, {
      ruleId: pairRule,
      keys: [
        ['B-2', 'North'],
        ['Z-9', 'North'],
        ['A-1', 'South'],
        ['A-1', 'North'],
        ['A-1', null],
      ],
    });
    expect(response.status, response.text).toBe(200);
    const { data } = LookupRowsResponse(RowResponse).parse(response.body);
    expect(data.map((row) => row?.id ?? null)).toEqual([rows[2]!.id, null, rows[1]!.id, rows[0]!.id, null]);
    expect(data[0]).toEqual(rows[2]);
  });

  it('looks up through a hashed rule, and answers a repeated key twice', async () => {
    const { table, codeRule, rows } = await stockTable();
    const response = await lookup(table, { ruleId: codeRule, keys: [['beta'], ['alpha'], ['beta']] });
    expect(response.body.data.map((row: Row | null) => row?.id ?? null)).toEqual([
      rows[1]!.id,
      rows[0]!.id,
      rows[1]!.id,
    ]);
  });

  it('refuses a conditional rule, an unknown rule, a key of the wrong length or type, and more than 1,000 keys with 422', async () => {
    const { table, pairRule, conditionalRule } = await stockTable();
    const conditional = await lookup(table, { ruleId: conditionalRule, keys: [[101]] });
    expectError(conditional, 422, 'VALIDATION_FAILED');
    expectProblemPaths(conditional, [['ruleId']]);
    expectError(await lookup(table, { ruleId: '01ARZ3NDEKTSV4RRFFQ69G5FAV', keys: [['x']] }), 422, 'VALIDATION_FAILED');
    const shapes = await lookup(table, { ruleId: pairRule, keys: [['A-1'], ['A-1', 'East'], [1, 'North']] });
    expectError(shapes, 422, 'VALIDATION_FAILED');
    expectProblemPaths(shapes, [
      ['keys', 0],
      ['keys', 1, 1],
      ['keys', 2, 0],
    ]);
    const many = await lookup(table, {
      ruleId: pairRule,
      keys: Array.from({ length: 1001 }, (_key, index) => [`S${index}`, 'North']),
    });
    expectError(many, 422, 'VALIDATION_FAILED');
  });

  it('accepts 1,000 keys', async () => {
    const { table, pairRule, rows } = await stockTable();
    const keys = Array.from({ length: 1000 }, (_key, index) =>
      index === 999 ? ['A-1', 'North'] : [`S${index}`, 'South'],
    );
    const response = await lookup(table, { ruleId: pairRule, keys });
    expect(response.status, response.text).toBe(200);
    expect(response.body.data.filter((row: Row | null) => row !== null).map((row: Row) => row.id)).toEqual([
      rows[0]!.id,
    ]);
    expect(response.body.data[999].id).toBe(rows[0]!.id);
  });

  it('is a read for a viewer; another org’s caller gets 404; GraphQL lookupRows answers the same', async () => {
    const { table, pairRule } = await stockTable();
    const body = {
      ruleId: pairRule,
      keys: [
        ['A-1', 'North'],
        ['nope', 'North'],
      ],
    };
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    const rest = await lookup(table, body, viewer.apiKey);
    expect(rest.status).toBe(200);
    const stranger = await createOrg(suite.server.prisma);
    expectError(await lookup(table, body, stranger.adminKey), 404, 'RESOURCE_NOT_FOUND');
    const graph = await suite.server.graphql(
      `query($orgId: ID!, $databaseId: ID!, $tableId: ID!, $input: LookupRowsInput!) {
      lookupRows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, input: $input) { data { id version createdAt updatedAt values } } }`,
      { orgId: table.orgId, databaseId: table.databaseId, tableId: table.tableId, input: body },
      { token: admin() },
    );
    expect(graph.body).toEqual({ data: { lookupRows: rest.body } });
  });
});

describe('POST …/rows/lookup from a cached table definition', () => {
  it('answers 422 for a rule dropped after a lookup, and 404 once the table is deleted', async () => {
    const { table, pairRule, codeRule } = await stockTable();
    const key = { ruleId: codeRule, keys: [['alpha']] };
    expect((await lookup(table, key)).body.data[0].values).toMatchObject({ [table.fields.Code!]: 'alpha' });
    const current = await refreshSchemaVersion(suite.server, admin(), table);
    const dropped = await suite.server.request('DELETE', `${table.path}/unique-rules/${codeRule}`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedSchemaVersion: current.schemaVersion },
    });
    expect([200, 202], dropped.text).toContain(dropped.status);
    if (dropped.status === 202) await waitForJob(suite.server, admin(), dropped.body.statusUrl);
    const refused = await lookup(table, key);
    expect(refused.status, refused.text).toBe(422);
    expectProblemPaths(refused, [['ruleId']]);

    expect((await lookup(table, { ruleId: pairRule, keys: [['A-1', 'North']] })).status).toBe(200);
    const head = await suite.server.request('GET', table.path, { token: admin() });
    const deleted = await suite.server.request('DELETE', table.path, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: head.body.version },
    });
    expect(deleted.status, deleted.text).toBe(200);
    expectError(await lookup(table, { ruleId: pairRule, keys: [['A-1', 'North']] }), 404, 'RESOURCE_NOT_FOUND');
  });
});

function batch(table: TestTable, operations: unknown[]) {
  return suite.server.request('POST', `${table.path}/rows/batch`, {
    token: admin(),
    idempotencyKey: idempotencyKey(),
    body: { expectedSchemaVersion: table.schemaVersion, operations },
  });
}

describe('POST …/rows/batch by key (matchOn)', () => {
  it('updates and deletes rows named by key, with or without expectedVersion', async () => {
    const { table, pairRule, codeRule, rows } = await stockTable();
    const response = await batch(table, [
      { op: 'update', matchOn: pairRule, key: ['A-1', 'North'], values: { Qty: 10 } },
      { op: 'update', matchOn: codeRule, key: ['beta'], expectedVersion: '1', values: { Qty: 20 } },
      { op: 'delete', matchOn: pairRule, key: ['B-2', 'North'] },
    ]);
    expect(response.status, response.text).toBe(200);
    const body = RowBatchResponse.parse(response.body);
    expect(body.results.map((result) => [result.row.id, result.outcome, result.row.version])).toEqual([
      [rows[0]!.id, 'updated', '2'],
      [rows[1]!.id, 'updated', '2'],
      [rows[2]!.id, 'deleted', '2'],
    ]);
    const after = await lookup(table, {
      ruleId: pairRule,
      keys: [
        ['A-1', 'North'],
        ['B-2', 'North'],
      ],
    });
    expect(after.body.data[0].values[table.fields.Qty!]).toBe(10);
    expect(after.body.data[1]).toBeNull();
  });

  it('answers 409 ROW_VERSION_CONFLICT for a key no row holds and for a stale expectedVersion, and writes nothing', async () => {
    const { table, pairRule, rows } = await stockTable();
    const response = await batch(table, [
      { op: 'update', matchOn: pairRule, key: ['A-1', 'North'], values: { Qty: 10 } },
      { op: 'update', matchOn: pairRule, key: ['Z-9', 'North'], values: { Qty: 10 } },
      { op: 'delete', matchOn: pairRule, key: ['A-1', 'South'], expectedVersion: '7' },
    ]);
    expectError(response, 409, 'ROW_VERSION_CONFLICT');
    expect(response.body.error.details.failures).toEqual([
      {
        index: 1,
        code: 'ROW_VERSION_CONFLICT',
        message: 'No row holds this key.',
        details: { expectedVersion: null, currentVersion: null, matchOn: pairRule, key: ['Z-9', 'North'] },
      },
      {
        index: 2,
        code: 'ROW_VERSION_CONFLICT',
        message: expect.any(String),
        details: { expectedVersion: '7', currentVersion: '1' },
      },
    ]);
    const unchanged = await lookup(table, { ruleId: pairRule, keys: [['A-1', 'North']] });
    expect(unchanged.body.data[0]).toEqual(rows[0]);
  });

  it('answers 422 for a conditional rule, a malformed key, a key with an empty value and a row named twice', async () => {
    const { table, pairRule, conditionalRule, rows } = await stockTable();
    const response = await batch(table, [
      { op: 'update', matchOn: conditionalRule, key: [150], values: { Qty: 1 } },
      { op: 'delete', matchOn: pairRule, key: ['A-1'] },
      { op: 'delete', matchOn: pairRule, key: ['A-1', null] },
      { op: 'update', rowId: rows[0]!.id, expectedVersion: '1', values: { Qty: 5 } },
      { op: 'delete', matchOn: pairRule, key: ['A-1', 'North'] },
    ]);
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [
      ['operations', 0, 'matchOn'],
      ['operations', 1, 'key'],
      ['operations', 2, 'key', 1],
      ['operations', 4, 'key'],
    ]);
    expect(response.body.error.details.failures.map((failure: { index: number }) => failure.index)).toEqual([
      0, 1, 2, 4,
    ]);
  });

  it('refuses matchOn beside rowId, and rowId without expectedVersion, before reading the schema', async () => {
    const { table, pairRule, rows } = await stockTable();
    const response = await batch(table, [
      { op: 'update', rowId: rows[0]!.id, matchOn: pairRule, key: ['A-1', 'North'], expectedVersion: '1', values: {} },
      { op: 'delete', rowId: rows[1]!.id },
      { op: 'delete', matchOn: pairRule },
    ]);
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [
      ['body', 'operations', 0, 'matchOn'],
      ['body', 'operations', 1, 'expectedVersion'],
      ['body', 'operations', 2, 'key'],
    ]);
  });
});
