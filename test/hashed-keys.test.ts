import { describe, expect, it } from 'vitest';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { waitForJob } from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { addForeignKey, addUniqueRule, createRow, createTable, type TestTable } from './helpers/workspace.ts';

/** Issue 13: a unique rule works on any text field; keys too wide for a btree entry are enforced through a hash. */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;
/** 1,000 characters, counted 4 bytes each: wider than a btree entry, so a rule on it is hashed. */
const WIDE = { maxLength: 1000 };

async function constraintsOf(table: TestTable): Promise<{ name: string; type: string; definition: string }[]> {
  return suite.server.prisma.$queryRaw`
    SELECT c.conname::text AS name, c.contype::text AS type, pg_get_constraintdef(c.oid) AS definition
      FROM pg_constraint c WHERE c.conrelid = to_regclass(${`d_${table.databaseId.toLowerCase()}.t_${table.tableId.toLowerCase()}`})
       AND starts_with(c.conname, 'u_')`;
}

async function ruleOn(table: TestTable, body: Record<string, unknown>) {
  const added = await addUniqueRule(suite.server, admin(), table, body);
  expect(added.job.state, JSON.stringify(added.job)).toBe('succeeded');
  return added;
}

describe('unique rules on ordinary text', () => {
  it('accepts a rule on a text field of maxLength 1000 and enforces it exactly, long values included', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'Name', type: 'text', options: WIDE },
      { name: 'Note', type: 'text' },
    ]);
    const { ruleId, table: current } = await ruleOn(table, { fieldIds: ['Name'] });
    expect(await constraintsOf(table)).toEqual([
      { name: `u_${ruleId.toLowerCase()}`, type: 'x', definition: expect.stringContaining('EXCLUDE USING hash') },
    ]);
    const long = 'é'.repeat(1000);
    expect((await createRow(suite.server, admin(), current, { Name: long })).status).toBe(201);
    expect((await createRow(suite.server, admin(), current, { Name: `${long.slice(1)}e` })).status).toBe(201);
    const clash = await createRow(suite.server, admin(), current, { Name: long, Note: 'again' });
    expectError(clash, 409, 'UNIQUE_CONFLICT');
    expect(clash.body.error.details).toEqual({ ruleId, fieldIds: [table.fields.Name], fieldNames: ['Name'] });
    // Empty keys take no part, as with a btree rule.
    expect((await createRow(suite.server, admin(), current, { Note: 'a' })).status).toBe(201);
    expect((await createRow(suite.server, admin(), current, { Note: 'b' })).status).toBe(201);
  });

  it('accepts two different values whose hash codes collide (the index finds candidates, = decides)', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text', options: WIDE }]);
    const { ruleId, table: current } = await ruleOn(table, { fieldIds: ['Name'] });
    const keyType = `d_${table.databaseId.toLowerCase()}.r_${ruleId.toLowerCase()}`;
    // 300,000 values in 2^32 hash codes: about ten colliding pairs are expected (birthday bound); take one.
    const [pair] = await suite.server.prisma.$queryRawUnsafe<{ a: string; b: string }[]>(`
      SELECT min(v) AS a, max(v) AS b FROM (SELECT 'key-' || g AS v FROM generate_series(1, 300000) g) s
       GROUP BY hash_record(ROW(v)::${keyType}) HAVING count(*) > 1 LIMIT 1`);
    expect(pair, 'a hash collision among 300,000 keys').toBeDefined();
    expect((await createRow(suite.server, admin(), current, { Name: pair!.a })).status).toBe(201);
    expect((await createRow(suite.server, admin(), current, { Name: pair!.b })).status).toBe(201);
    expectError(await createRow(suite.server, admin(), current, { Name: pair!.b }), 409, 'UNIQUE_CONFLICT');
  });

  it('lets exactly one of 8 parallel creates with the same wide value win; the others get 409', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text', options: WIDE }]);
    const { table: current } = await ruleOn(table, { fieldIds: ['Name'] });
    const responses = await Promise.all(
      Array.from({ length: 8 }, () => createRow(suite.server, admin(), current, { Name: 'contested' })),
    );
    const statuses = responses.map((response) => response.status).sort();
    expect(statuses, responses.map((response) => response.text).join('\n')).toEqual([
      201, 409, 409, 409, 409, 409, 409, 409,
    ]);
    for (const response of responses.filter((candidate) => candidate.status === 409))
      expectError(response, 409, 'UNIQUE_CONFLICT');
  });

  it('hashes a multi-field key as one composite value and honours a conditional rule', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'Name', type: 'text', options: WIDE },
      { name: 'Year', type: 'integer' },
      { name: 'Status', type: 'select', options: { choices: ['live', 'draft'] } },
    ]);
    const { table: current } = await ruleOn(table, {
      fieldIds: ['Name', 'Year'],
      where: { field: 'Status', op: 'eq', value: 'live' },
    });
    expect((await constraintsOf(table))[0]!.definition).toMatch(
      /EXCLUDE USING hash \(\(ROW\(.*\)::d_\w+\.r_\w+\) WITH =\) WHERE/,
    );
    const row = (values: Record<string, unknown>) => createRow(suite.server, admin(), current, values);
    expect((await row({ Name: 'x', Year: 2020, Status: 'live' })).status).toBe(201);
    expect((await row({ Name: 'x', Year: 2021, Status: 'live' })).status).toBe(201);
    expect((await row({ Name: 'x', Year: 2020, Status: 'draft' })).status).toBe(201);
    expectError(await row({ Name: 'x', Year: 2020, Status: 'live' }), 409, 'UNIQUE_CONFLICT');
  });

  it('fails the job with the duplicate groups when existing rows already share a wide value', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text', options: WIDE }]);
    const ids = [];
    for (let i = 0; i < 2; i += 1)
      ids.push((await createRow(suite.server, admin(), table, { Name: 'same' })).body.row.id);
    const added = await addUniqueRule(suite.server, admin(), table, { fieldIds: ['Name'] });
    expect(added.job.state).toBe('failed');
    expect(added.job.error).toMatchObject({
      code: 'UNIQUE_CONFLICT',
      details: { duplicates: [{ rowIds: ids.sort(), values: { [table.fields.Name!]: 'same' } }], truncated: false },
    });
    expect(await constraintsOf(table)).toEqual([]);
  });

  it('deletes a hashed rule: its constraint, key type and key lock go, and duplicates are accepted after', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text', options: WIDE }]);
    const { ruleId, table: current } = await ruleOn(table, { fieldIds: ['Name'] });
    expect((await createRow(suite.server, admin(), current, { Name: 'same' })).status).toBe(201);
    const accepted = await suite.server.request('DELETE', `${table.path}/unique-rules/${ruleId}`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
    });
    expect(accepted.status, accepted.text).toBe(202);
    const job = await waitForJob(suite.server, admin(), accepted.body.statusUrl);
    expect(job, JSON.stringify(job)).toMatchObject({
      kind: 'deleteUniqueRule',
      state: 'succeeded',
      result: { ruleId, deleted: true },
    });
    expect(await constraintsOf(table)).toEqual([]);
    const [left] = await suite.server.prisma.$queryRawUnsafe<{ types: number; functions: number; triggers: number }[]>(
      `
      SELECT (SELECT count(*)::int FROM pg_type WHERE typname = $1) AS types, (SELECT count(*)::int FROM pg_proc WHERE proname = $2) AS functions,
             (SELECT count(*)::int FROM pg_trigger WHERE tgname = $3) AS triggers`,
      `r_${ruleId.toLowerCase()}`,
      `l_${ruleId.toLowerCase()}`,
      `u_${ruleId.toLowerCase()}`,
    );
    expect(left).toEqual({ types: 0, functions: 0, triggers: 0 });
    expect(
      (
        await createRow(
          suite.server,
          admin(),
          { ...current, schemaVersion: job.result.schemaVersion },
          { Name: 'same' },
        )
      ).status,
    ).toBe(201);
  });

  it('keeps a plain btree index for keys that fit, and refuses a foreign key to a hashed rule with 422 saying why', async () => {
    const parent = await createTable(suite.server, suite.org, [
      { name: 'Code', type: 'text', options: { maxLength: 20 } },
      { name: 'Name', type: 'text', options: WIDE },
    ]);
    const narrow = await ruleOn(parent, { fieldIds: ['Code'] });
    const wide = await ruleOn(narrow.table, { fieldIds: ['Name'] });
    expect((await constraintsOf(parent)).map((c) => c.type).sort()).toEqual(['x']);
    const schema = await suite.server.request('GET', `${parent.path}/schema`, { token: admin() });
    expect(
      schema.body.uniqueRules
        .map((rule: { id: string; referenceable: boolean }) => [rule.id, rule.referenceable])
        .sort(),
    ).toEqual(
      [
        [narrow.ruleId, true],
        [wide.ruleId, false],
      ].sort(),
    );
    const child = await createTable(suite.server, suite.org, [{ name: 'Ref', type: 'text' }], {
      databaseId: parent.databaseId,
    });
    const refused = await suite.server.request('POST', `${child.path}/foreign-keys`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { fieldIds: ['Ref'], referencedTableId: parent.tableId, referencedRuleId: wide.ruleId },
    });
    expectError(refused, 422, 'VALIDATION_FAILED');
    expectProblemPaths(refused, [['referencedRuleId']]);
    const problem = refused.body.error.details.problems.find(
      (p: { path: string[] }) => p.path[0] === 'referencedRuleId',
    );
    expect(problem.message).toMatch(/4000 bytes.*hash.*btree/);
    const accepted = await suite.server.request('POST', `${child.path}/foreign-keys`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { fieldIds: ['Ref'], referencedTableId: parent.tableId, referencedRuleId: narrow.ruleId },
    });
    expect(accepted.status, accepted.text).toBe(202);
  });
});

/** Issue 26 §12: the first foreign key a user tries, Orders.Customer code → Customers.Code, on default text fields. */
describe('foreign keys to default text fields', () => {
  const rowsOf = async (table: TestTable) => {
    const response = await suite.server.request('GET', `${table.path}/rows?limit=100`, { token: admin() });
    expect(response.status, response.text).toBe(200);
    return response.body.data.map((row: { values: Record<string, unknown> }) => row.values);
  };

  async function customersAndOrders() {
    const customers = await createTable(suite.server, suite.org, [
      { name: 'Code', type: 'text' },
      { name: 'Name', type: 'text' },
    ]);
    const rule = await ruleOn(customers, { fieldIds: ['Code'] });
    const orders = await createTable(
      suite.server,
      suite.org,
      [
        { name: 'Customer code', type: 'text' },
        { name: 'Item', type: 'text' },
      ],
      { databaseId: customers.databaseId },
    );
    return { customers: rule.table, ruleId: rule.ruleId, orders };
  }

  it('gives a default text field maxLength 255, so a rule on it is a btree index that a foreign key references', async () => {
    const { customers, ruleId, orders } = await customersAndOrders();
    const schema = await suite.server.request('GET', `${customers.path}/schema`, { token: admin() });
    expect(schema.status, schema.text).toBe(200);
    const code = schema.body.fields.find((field: { name: string }) => field.name === 'Code');
    expect(code.options).toEqual({ maxLength: 255 });
    expect(schema.body.uniqueRules).toEqual([expect.objectContaining({ id: ruleId, referenceable: true })]);
    expect(await constraintsOf(customers)).toEqual([]);

    const linked = await addForeignKey(suite.server, admin(), orders, {
      fieldIds: ['Customer code'],
      referencedTableId: customers.tableId,
      referencedRuleId: ruleId,
    });
    expect(linked.job.state, JSON.stringify(linked.job)).toBe('succeeded');
    expect((await createRow(suite.server, admin(), customers, { Code: 'C-1', Name: 'Ada' })).status).toBe(201);
    expect((await createRow(suite.server, admin(), linked.table, { 'Customer code': 'C-1', Item: 'tea' })).status).toBe(
      201,
    );
    const orphan = await createRow(suite.server, admin(), linked.table, { 'Customer code': 'C-2', Item: 'jam' });
    expectError(orphan, 409, 'FOREIGN_KEY_CONFLICT');
    expect(orphan.body.error.details.foreignKeyId).toBe(linked.foreignKeyId);
    expect(await rowsOf(linked.table)).toEqual([
      { [orders.fields['Customer code']!]: 'C-1', [orders.fields.Item!]: 'tea' },
    ]);
  });

  it('refuses a value over the default 255 characters with 422 at that value, and writes nothing', async () => {
    const { customers } = await customersAndOrders();
    expect((await createRow(suite.server, admin(), customers, { Code: 'é'.repeat(255) })).status).toBe(201);
    const refused = await createRow(suite.server, admin(), customers, { Code: 'é'.repeat(256), Name: 'long' });
    expectError(refused, 422, 'VALIDATION_FAILED');
    expectProblemPaths(refused, [['values', 'Code']]);
    expect(refused.body.error.details.problems[0].message).toMatch(/at most 255 characters/);
    expect(await rowsOf(customers)).toEqual([
      { [customers.fields.Code!]: 'é'.repeat(255), [customers.fields.Name!]: null },
    ]);
  });

  it('still hashes a key of three default text fields (3,060 bytes), which a foreign key cannot reference', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'A', type: 'text' },
      { name: 'B', type: 'text' },
      { name: 'C', type: 'text' },
    ]);
    const pair = await ruleOn(table, { fieldIds: ['A', 'B'] });
    const triple = await ruleOn(pair.table, { fieldIds: ['A', 'B', 'C'] });
    const schema = await suite.server.request('GET', `${table.path}/schema`, { token: admin() });
    expect(
      schema.body.uniqueRules
        .map((rule: { id: string; referenceable: boolean }) => [rule.id, rule.referenceable])
        .sort(),
    ).toEqual(
      [
        [pair.ruleId, true],
        [triple.ruleId, false],
      ].sort(),
    );
  });
});
