import { describe, expect, it } from 'vitest';
import { columnOf, historyTableOf } from '../src/data/identifiers.ts';
import { newId } from '../src/kernel/ids.ts';
import { JobHandleResponse } from '../src/contracts/jobs.ts';
import { JobResponse } from '../src/contracts/job-results.ts';
import { TableSchemaResponse } from '../src/contracts/tables.ts';
import { expectError } from './helpers/expectations.ts';
import { addMember, createOrg, idempotencyKey } from './helpers/factories.ts';
import { allRows, controlJob, tableActivity, waitForJob } from './helpers/jobs.ts';
import type { ApiResponse } from './helpers/server.ts';
import { useServerWithOrg, type Suite } from './helpers/suite.ts';
import {
  addUniqueRule,
  createRow,
  createTable,
  refreshSchemaVersion,
  type FieldSpec,
  type TestTable,
} from './helpers/workspace.ts';

/**
 * Endpoint 5 (spec 4.7): every change kind end to end through its job, the refusals made before any job exists, and
 * the activity events of each job (spec §6). Conversions: test/schema-conversions.test.ts; killed workers and
 * cancellation: test/schema-recovery.test.ts.
 */
type Body = Record<string, unknown>;
type Path = (string | number)[];

function client(suite: Suite) {
  const admin = () => suite.org.adminKey;
  const server = () => suite.server;
  const api = {
    apply(
      table: TestTable,
      change: Body,
      options: { token?: string; key?: string; expectedSchemaVersion?: number } = {},
    ): Promise<ApiResponse> {
      return server().request('POST', `${table.path}/schema/operations`, {
        token: options.token ?? admin(),
        idempotencyKey: options.key ?? idempotencyKey(),
        body: { expectedSchemaVersion: options.expectedSchemaVersion ?? table.schemaVersion, change },
      });
    },
    /** 202 with exactly the spec 2.7 handle. */
    accepted(response: ApiResponse): { jobId: string; statusUrl: string } {
      expect(response.status, response.text).toBe(202);
      const handle = JobHandleResponse.parse(response.body);
      expect(handle).toEqual({
        jobId: handle.jobId,
        state: 'queued',
        statusUrl: `/v1/orgs/${suite.org.orgId}/jobs/${handle.jobId}`,
      });
      return handle;
    },
    /** Applies a change and waits for its terminal job (parsed as the job status shape). */
    async run(table: TestTable, change: Body, options: { expectedSchemaVersion?: number } = {}) {
      const handle = api.accepted(await api.apply(table, change, options));
      return JobResponse.parse(await waitForJob(server(), admin(), handle.statusUrl));
    },
    /** Runs a change that must succeed; returns the job and the table at its new schema version. */
    async succeed(table: TestTable, change: Body) {
      const job = await api.run(table, change);
      expect(job.state, JSON.stringify(job)).toBe('succeeded');
      const schemaVersion = (job.result as { schemaVersion: number }).schemaVersion;
      expect(schemaVersion).toBe(table.schemaVersion + 1);
      expect(job.error).toBeNull();
      expect(job.progress.done).toBe(job.progress.total);
      return { job, table: { ...table, schemaVersion } };
    },
    async schema(table: TestTable) {
      const response = await server().request('GET', `${table.path}/schema`, { token: admin() });
      expect(response.status, response.text).toBe(200);
      return TableSchemaResponse.parse(response.body);
    },
    async rows(table: TestTable) {
      return allRows(server(), admin(), table);
    },
    async row(table: TestTable, values: Body): Promise<string> {
      const response = await createRow(server(), admin(), table, values);
      expect(response.status, response.text).toBe(201);
      return response.body.row.id;
    },
    create: (fields: FieldSpec[]) => createTable(server(), suite.org, fields),
  };
  return api;
}

/**
 * 422 VALIDATION_FAILED naming exactly these problem paths under `change`. Problems found by the body's zod schema
 * come as `["body", "change", …]` (docs/decisions/schema-changes.md), those found against the table as `["change", …]`; both are
 * compared without the leading "body".
 */
async function expectRefused(_suite: Suite, response: ApiResponse, paths: Path[]): Promise<void> {
  expectError(response, 422, 'VALIDATION_FAILED');
  const reported = (response.body.error.details.problems as { path: Path }[]).map((problem) =>
    problem.path[0] === 'body' ? problem.path.slice(1) : problem.path,
  );
  expect(reported.map((path) => JSON.stringify(path)).sort(), response.text).toEqual(
    paths.map((path) => JSON.stringify(path)).sort(),
  );
}

const jobsOfTable = (suite: Suite, table: TestTable) =>
  suite.server.prisma.job.count({ where: { tableId: table.tableId } });

const valuesOf = (rows: { values: Record<string, unknown> }[], fieldId: string) =>
  rows.map((row) => row.values[fieldId]);

const TEXT = (name: string, maxLength = 100): FieldSpec => ({ name, type: 'text', options: { maxLength } });

describe('each change kind end to end', () => {
  const suite = useServerWithOrg();
  const api = client(suite);

  it('add_field: an optional field appears last with its defaults; existing rows read it as null', async () => {
    const created = await api.create([TEXT('Name')]);
    const rowId = await api.row(created, { Name: 'Ada' });
    const { job, table } = await api.succeed(created, { kind: 'add_field', field: { name: 'Score', type: 'number' } });
    expect(job.kind).toBe('createField');
    const fieldId = (job.result as { fieldId: string }).fieldId;
    expect(job.result).toEqual({ fieldId, schemaVersion: table.schemaVersion });
    const schema = await api.schema(table);
    expect(schema.schemaVersion).toBe(table.schemaVersion);
    expect(
      schema.fields.map(({ name, type, required, options, position }) => ({ name, type, required, options, position })),
    ).toEqual([
      { name: 'Name', type: 'text', required: false, options: { maxLength: 100 }, position: 0 },
      { name: 'Score', type: 'number', required: false, options: { precision: 15, scale: 2 }, position: 1 },
    ]);
    expect(schema.fields[1]!.id).toBe(fieldId);
    expect(await api.rows(table)).toEqual([
      expect.objectContaining({ id: rowId, values: { [created.fields.Name!]: 'Ada', [fieldId]: null } }),
    ]);
    const written = await createRow(suite.server, suite.org.adminKey, table, { Name: 'Bea', Score: 12.5 });
    expect(written.status, written.text).toBe(201);
    expect(written.body.row.values[fieldId]).toBe(12.5);
  });

  it('add_field: a required field on an empty table succeeds and is enforced on writes', async () => {
    const created = await api.create([TEXT('Name')]);
    const { job, table } = await api.succeed(created, {
      kind: 'add_field',
      field: { name: 'Email', type: 'email', required: true },
    });
    const fieldId = (job.result as { fieldId: string }).fieldId;
    expect((await api.schema(table)).fields[1]).toEqual({
      id: fieldId,
      name: 'Email',
      type: 'email',
      required: true,
      options: {},
      position: 1,
    });
    expectError(await createRow(suite.server, suite.org.adminKey, table, { Name: 'Ada' }), 422, 'VALIDATION_FAILED');
    expect(
      (await createRow(suite.server, suite.org.adminKey, table, { Name: 'Ada', Email: 'ada@example.com' })).status,
    ).toBe(201);
  });

  it('add_field: a required field on a table with rows fails the job with VALIDATION_FAILED and changes nothing', async () => {
    const table = await api.create([TEXT('Name')]);
    await api.row(table, { Name: 'Ada' });
    const before = await api.schema(table);
    const job = await api.run(table, { kind: 'add_field', field: { name: 'Email', type: 'email', required: true } });
    expect(job.state).toBe('failed');
    expect(job.error).toMatchObject({ code: 'VALIDATION_FAILED', message: expect.stringContaining('empty table') });
    expect(job.result).toBeNull();
    expect(await api.schema(table)).toEqual(before);
    expect(await physicalColumns(suite, table)).toEqual([columnOf(table.fields.Name!).replaceAll('"', '')]);
  });

  it('add_field: an autoNumber added to a table with rows numbers every existing row, and continues after them', async () => {
    const table0 = await api.create([TEXT('Name')]);
    for (const name of ['a', 'b', 'c']) await api.row(table0, { Name: name });
    const { job, table } = await api.succeed(table0, {
      kind: 'add_field',
      field: { name: 'No', type: 'autoNumber', options: { start: 100 } },
    });
    const fieldId = (job.result as { fieldId: string }).fieldId;
    expect((await api.schema(table)).fields[1]).toMatchObject({
      id: fieldId,
      type: 'autoNumber',
      required: false,
      options: { start: 100, max: Number.MAX_SAFE_INTEGER },
    });
    expect(valuesOf(await api.rows(table), fieldId).sort()).toEqual([100, 101, 102]);
    const next = await createRow(suite.server, suite.org.adminKey, table, { Name: 'd' });
    expect(next.status, next.text).toBe(201);
    expect(next.body.row.values[fieldId]).toBe(103);
    // Deleted, it takes its sequence with it.
    const sequence = `d_${table.databaseId.toLowerCase()}.s_${fieldId.toLowerCase()}`;
    const exists = async () =>
      (
        await suite.server.prisma.$queryRaw<{ found: boolean }[]>`SELECT to_regclass(${sequence}) IS NOT NULL AS found`
      )[0]!.found;
    expect(await exists()).toBe(true);
    await api.succeed(table, { kind: 'delete_field', fieldId });
    expect(await exists()).toBe(false);
  });

  it('rename_field: the new name shows in the schema, rows keep their values under the same field id', async () => {
    const table0 = await api.create([TEXT('Name'), TEXT('Code')]);
    await api.row(table0, { Name: 'Ada', Code: 'A1' });
    const { job, table } = await api.succeed(table0, {
      kind: 'rename_field',
      fieldId: table0.fields.Code,
      name: 'Reference',
    });
    expect(job.kind).toBe('updateField');
    expect(job.result).toEqual({ fieldId: table0.fields.Code, schemaVersion: table.schemaVersion });
    expect((await api.schema(table)).fields.map((field) => [field.id, field.name, field.position])).toEqual([
      [table0.fields.Name, 'Name', 0],
      [table0.fields.Code, 'Reference', 1],
    ]);
    expect(valuesOf(await api.rows(table), table0.fields.Code!)).toEqual(['A1']);
    // The new name is usable at once in writes; the old one is not.
    expect((await createRow(suite.server, suite.org.adminKey, table, { Reference: 'B2' })).status).toBe(201);
    expectError(await createRow(suite.server, suite.org.adminKey, table, { Code: 'C3' }), 422, 'VALIDATION_FAILED');
  });

  it('rename_field: a change of case of the field’s own name is allowed', async () => {
    const table = await api.create([TEXT('Name')]);
    const { table: after } = await api.succeed(table, {
      kind: 'rename_field',
      fieldId: table.fields.Name,
      name: 'NAME',
    });
    expect((await api.schema(after)).fields[0]!.name).toBe('NAME');
  });

  it('update_field: text maxLength raised, lowered to fit, and lowered below a value (failed, violations listed)', async () => {
    const table0 = await api.create([TEXT('Name', 10)]);
    const long = await api.row(table0, { Name: 'abcdefgh' });
    await api.row(table0, { Name: 'abc' });
    let { table } = await api.succeed(table0, {
      kind: 'update_field',
      fieldId: table0.fields.Name,
      options: { maxLength: 50 },
    });
    expect((await api.schema(table)).fields[0]!.options).toEqual({ maxLength: 50 });
    expect((await createRow(suite.server, suite.org.adminKey, table, { Name: 'x'.repeat(50) })).status).toBe(201);
    expect((await createRow(suite.server, suite.org.adminKey, table, { Name: 'x'.repeat(51) })).status).toBe(422);

    const tooShort = await api.run(table, {
      kind: 'update_field',
      fieldId: table0.fields.Name,
      options: { maxLength: 8 },
    });
    expect(tooShort.state).toBe('failed');
    expect(tooShort.error?.code).toBe('VALIDATION_FAILED');
    const fifty = (await api.rows(table)).find((row) => row.values[table0.fields.Name!] === 'x'.repeat(50))!.id;
    expect(tooShort.error?.details).toEqual({ violations: 1, rowIds: [fifty] });
    expect((await api.schema(table)).schemaVersion).toBe(table.schemaVersion);

    const tighter = await api.run(table, {
      kind: 'update_field',
      fieldId: table0.fields.Name,
      options: { maxLength: 5 },
    });
    expect(tighter.state).toBe('failed');
    expect(tighter.error?.details).toEqual({ violations: 2, rowIds: [long, fifty].sort() });

    // With the long values gone, lowering succeeds and is enforced.
    await deleteRow(suite, table, fifty);
    await deleteRow(suite, table, long);
    ({ table } = await api.succeed(table, {
      kind: 'update_field',
      fieldId: table0.fields.Name,
      options: { maxLength: 3 },
    }));
    expect((await api.schema(table)).fields[0]!.options).toEqual({ maxLength: 3 });
    expect(valuesOf(await api.rows(table), table0.fields.Name!)).toEqual(['abc']);
    expectError(await createRow(suite.server, suite.org.adminKey, table, { Name: 'abcd' }), 422, 'VALIDATION_FAILED');
  });

  it('update_field: required true over empty cells fails with the rows listed; once filled it succeeds', async () => {
    const table0 = await api.create([TEXT('Name'), TEXT('Code')]);
    const empty = await api.row(table0, { Name: 'a' });
    await api.row(table0, { Name: 'b', Code: 'B' });
    const failed = await api.run(table0, { kind: 'update_field', fieldId: table0.fields.Code, required: true });
    expect(failed.state).toBe('failed');
    expect(failed.error).toMatchObject({ code: 'VALIDATION_FAILED', details: { violations: 1, rowIds: [empty] } });
    expect((await api.schema(table0)).fields[1]!.required).toBe(false);

    const patched = await suite.server.request('PATCH', `${table0.path}/rows/${empty}`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1', values: { Code: 'A' } },
    });
    expect(patched.status, patched.text).toBe(200);
    const { table } = await api.succeed(table0, { kind: 'update_field', fieldId: table0.fields.Code, required: true });
    expect((await api.schema(table)).fields[1]).toMatchObject({ required: true, options: { maxLength: 100 } });
    expectError(await createRow(suite.server, suite.org.adminKey, table, { Name: 'c' }), 422, 'VALIDATION_FAILED');
    const { table: relaxed } = await api.succeed(table, {
      kind: 'update_field',
      fieldId: table0.fields.Code,
      required: false,
    });
    expect((await createRow(suite.server, suite.org.adminKey, relaxed, { Name: 'c' })).status).toBe(201);
  });

  it('update_field: select choices narrowed (fails while a row holds a dropped choice) and widened', async () => {
    const table0 = await api.create([
      { name: 'Status', type: 'select', options: { choices: ['new', 'open', 'closed'] } },
    ]);
    const open = await api.row(table0, { Status: 'open' });
    await api.row(table0, { Status: 'new' });
    const { table } = await api.succeed(table0, {
      kind: 'update_field',
      fieldId: table0.fields.Status,
      options: { choices: ['new', 'open'] },
    });
    expect((await api.schema(table)).fields[0]!.options).toEqual({ choices: ['new', 'open'] });
    expectError(
      await createRow(suite.server, suite.org.adminKey, table, { Status: 'closed' }),
      422,
      'VALIDATION_FAILED',
    );
    const narrowed = await api.run(table, {
      kind: 'update_field',
      fieldId: table0.fields.Status,
      options: { choices: ['new'] },
    });
    expect(narrowed.state).toBe('failed');
    expect(narrowed.error).toMatchObject({ code: 'VALIDATION_FAILED', details: { violations: 1, rowIds: [open] } });
    expect((await api.schema(table)).fields[0]!.options).toEqual({ choices: ['new', 'open'] });
  });

  it('update_field: json maxBytes is measured as row writes measure it (compact JSON), so a value that fits stays', async () => {
    const table0 = await api.create([{ name: 'Doc', type: 'json' }]);
    const row = await api.row(table0, { Doc: { a: 1, b: [1, 2] } }); // {"a":1,"b":[1,2]}: 17 bytes compact, 20 as jsonb prints it
    const tooSmall = await api.run(table0, {
      kind: 'update_field',
      fieldId: table0.fields.Doc,
      options: { maxBytes: 16 },
    });
    expect(tooSmall.error).toMatchObject({ code: 'VALIDATION_FAILED', details: { violations: 1, rowIds: [row] } });
    const { table } = await api.succeed(table0, {
      kind: 'update_field',
      fieldId: table0.fields.Doc,
      options: { maxBytes: 17 },
    });
    expect((await api.schema(table)).fields[0]!.options).toMatchObject({ maxBytes: 17 });
  });

  it('update_field: multiSelect choices narrowed fail while a row holds a dropped choice', async () => {
    const table = await api.create([{ name: 'Tags', type: 'multiSelect', options: { choices: ['a', 'b', 'c'] } }]);
    const both = await api.row(table, { Tags: ['a', 'c'] });
    await api.row(table, { Tags: ['a'] });
    const job = await api.run(table, {
      kind: 'update_field',
      fieldId: table.fields.Tags,
      options: { choices: ['a', 'b'] },
    });
    expect(job.error).toMatchObject({ code: 'VALIDATION_FAILED', details: { violations: 1, rowIds: [both] } });
  });

  it('update_field: integer min/max narrowed over existing values fails; within them succeeds', async () => {
    const table0 = await api.create([{ name: 'Qty', type: 'integer' }]);
    const low = await api.row(table0, { Qty: -5 });
    await api.row(table0, { Qty: 7 });
    const failed = await api.run(table0, { kind: 'update_field', fieldId: table0.fields.Qty, options: { min: 0 } });
    expect(failed.error).toMatchObject({ code: 'VALIDATION_FAILED', details: { violations: 1, rowIds: [low] } });
    const { table } = await api.succeed(table0, {
      kind: 'update_field',
      fieldId: table0.fields.Qty,
      options: { min: -5, max: 7 },
    });
    expect((await api.schema(table)).fields[0]!.options).toEqual({ min: -5, max: 7 });
  });

  it('delete_field: the column, its values and its position go; its cell history stays', async () => {
    const table0 = await api.create([TEXT('Name'), TEXT('Code'), TEXT('Note')]);
    const rowId = await api.row(table0, { Name: 'Ada', Code: 'A1', Note: 'n' });
    const { job, table } = await api.succeed(table0, { kind: 'delete_field', fieldId: table0.fields.Code });
    expect(job.kind).toBe('deleteField');
    expect(job.result).toEqual({ fieldId: table0.fields.Code, schemaVersion: table.schemaVersion });
    expect((await api.schema(table)).fields.map((field) => [field.name, field.position])).toEqual([
      ['Name', 0],
      ['Note', 1],
    ]);
    const [row] = await api.rows(table);
    expect(row!.values).toEqual({ [table0.fields.Name!]: 'Ada', [table0.fields.Note!]: 'n' });
    expect(await physicalColumns(suite, table)).not.toContain(columnOf(table0.fields.Code!).replaceAll('"', ''));
    const history = await suite.server.prisma.$queryRawUnsafe<{ value: unknown }[]>(
      `SELECT value FROM ${historyTableOf(table.databaseId, table.tableId)} WHERE row_id = $1 AND field_id = $2`,
      rowId,
      table0.fields.Code,
    );
    expect(history).toHaveLength(1);
    // A new field may take the deleted one's name.
    const { table: again } = await api.succeed(table, { kind: 'add_field', field: { name: 'code', type: 'integer' } });
    expect((await api.schema(again)).fields.map((field) => field.name)).toEqual(['Name', 'Note', 'code']);
  });

  it('reorder_fields: positions follow the given order; rows are unchanged', async () => {
    const table0 = await api.create([TEXT('A'), TEXT('B'), TEXT('C')]);
    await api.row(table0, { A: 'a', B: 'b', C: 'c' });
    const order = [table0.fields.C, table0.fields.A, table0.fields.B];
    const { job, table } = await api.succeed(table0, { kind: 'reorder_fields', fieldIds: order });
    expect(job.kind).toBe('reorderFields');
    expect(job.result).toEqual({ fieldIds: order, schemaVersion: table.schemaVersion });
    expect((await api.schema(table)).fields.map((field) => [field.id, field.position])).toEqual([
      [order[0], 0],
      [order[1], 1],
      [order[2], 2],
    ]);
    expect((await api.rows(table))[0]!.values).toEqual({
      [table0.fields.A!]: 'a',
      [table0.fields.B!]: 'b',
      [table0.fields.C!]: 'c',
    });
  });

  it('one change after another: each needs the version the previous one produced', async () => {
    let table = await api.create([TEXT('A')]);
    for (const name of ['B', 'C', 'D'])
      ({ table } = await api.succeed(table, { kind: 'add_field', field: { name, type: 'text' } }));
    const schema = await api.schema(table);
    expect(schema.fields.map((field) => [field.name, field.position])).toEqual([
      ['A', 0],
      ['B', 1],
      ['C', 2],
      ['D', 3],
    ]);
    expect(schema.schemaVersion).toBe(table.schemaVersion);
  });
});

/** Column names of the table's physical table, in attribute order (dropped columns excluded). */
async function physicalColumns(suite: Suite, table: TestTable): Promise<string[]> {
  const rows = await suite.server.prisma.$queryRaw<{ name: string }[]>`
    SELECT column_name::text AS name FROM information_schema.columns
     WHERE table_schema = ${`d_${table.databaseId.toLowerCase()}`} AND table_name = ${`t_${table.tableId.toLowerCase()}`}
       AND column_name NOT IN ('id', 'version', 'created_at', 'updated_at')
     ORDER BY ordinal_position`;
  return rows.map((row) => row.name);
}

async function deleteRow(suite: Suite, table: TestTable, rowId: string): Promise<void> {
  const current = await suite.server.request('GET', `${table.path}/rows/${rowId}`, { token: suite.org.adminKey });
  expect(current.status, current.text).toBe(200);
  const response = await suite.server.request('DELETE', `${table.path}/rows/${rowId}`, {
    token: suite.org.adminKey,
    idempotencyKey: idempotencyKey(),
    body: { expectedVersion: current.body.version },
  });
  expect(response.status, response.text).toBe(200);
}

describe('refusals before any job', () => {
  const suite = useServerWithOrg();
  const api = client(suite);

  it('422 for an unknown kind, and for a change that does not match its kind’s shape', async () => {
    const table = await api.create([TEXT('Name')]);
    await expectRefused(suite, await api.apply(table, { kind: 'drop_table' }), [['change', 'kind']]);
    await expectRefused(suite, await api.apply(table, { kind: 'rename_field', fieldId: table.fields.Name }), [
      ['change', 'name'],
    ]);
    await expectRefused(suite, await api.apply(table, { kind: 'delete_field', fieldId: table.fields.Name, extra: 1 }), [
      ['change'],
    ]);
    await expectRefused(suite, await api.apply(table, { kind: 'update_field', fieldId: table.fields.Name }), [
      ['change'],
    ]);
    expect(await jobsOfTable(suite, table)).toBe(0);
  });

  it('422 for a field that is not the table’s, in every kind that names one', async () => {
    const table = await api.create([TEXT('Name')]);
    const other = await api.create([TEXT('Name')]);
    const unknown = newId();
    for (const fieldId of [unknown, other.fields.Name]) {
      await expectRefused(suite, await api.apply(table, { kind: 'rename_field', fieldId, name: 'X' }), [
        ['change', 'fieldId'],
      ]);
      await expectRefused(suite, await api.apply(table, { kind: 'update_field', fieldId, required: true }), [
        ['change', 'fieldId'],
      ]);
      await expectRefused(suite, await api.apply(table, { kind: 'convert_field', fieldId, type: 'integer' }), [
        ['change', 'fieldId'],
      ]);
      await expectRefused(suite, await api.apply(table, { kind: 'delete_field', fieldId }), [['change', 'fieldId']]);
    }
    expect(await jobsOfTable(suite, table)).toBe(0);
  });

  it('422 for a name another field has, ignoring case (add and rename)', async () => {
    const table = await api.create([TEXT('Name'), TEXT('Code')]);
    await expectRefused(suite, await api.apply(table, { kind: 'add_field', field: { name: 'nAME', type: 'text' } }), [
      ['change', 'field', 'name'],
    ]);
    await expectRefused(
      suite,
      await api.apply(table, { kind: 'rename_field', fieldId: table.fields.Code, name: 'NAME' }),
      [['change', 'name']],
    );
    expect(await jobsOfTable(suite, table)).toBe(0);
  });

  it('422 for bad options: add_field, update_field and convert_field', async () => {
    const table = await api.create([
      TEXT('Name'),
      { name: 'Amount', type: 'number', options: { precision: 10, scale: 2 } },
    ]);
    await expectRefused(
      suite,
      await api.apply(table, { kind: 'add_field', field: { name: 'X', type: 'text', options: { maxLength: 0 } } }),
      [['change', 'field', 'options', 'maxLength']],
    );
    await expectRefused(suite, await api.apply(table, { kind: 'add_field', field: { name: 'X', type: 'select' } }), [
      ['change', 'field', 'options'],
    ]);
    await expectRefused(
      suite,
      await api.apply(table, { kind: 'update_field', fieldId: table.fields.Name, options: { maxLength: 'long' } }),
      [['change', 'options', 'maxLength']],
    );
    await expectRefused(
      suite,
      await api.apply(table, { kind: 'update_field', fieldId: table.fields.Name, options: { colour: 'red' } }),
      [['change', 'options']],
    );
    await expectRefused(
      suite,
      await api.apply(table, {
        kind: 'convert_field',
        fieldId: table.fields.Name,
        type: 'select',
        options: { choices: [] },
      }),
      [['change', 'options', 'choices']],
    );
    expect(await jobsOfTable(suite, table)).toBe(0);
  });

  it('422 for a number precision or scale change through update_field (it is a conversion)', async () => {
    const table = await api.create([{ name: 'Amount', type: 'number', options: { precision: 10, scale: 2 } }]);
    await expectRefused(
      suite,
      await api.apply(table, { kind: 'update_field', fieldId: table.fields.Amount, options: { precision: 12 } }),
      [['change', 'options', 'precision']],
    );
    await expectRefused(
      suite,
      await api.apply(table, { kind: 'update_field', fieldId: table.fields.Amount, options: { scale: 3 } }),
      [['change', 'options', 'scale']],
    );
    expect(await jobsOfTable(suite, table)).toBe(0);
  });

  it('422 for a reorder that is not a permutation of the fields', async () => {
    const table = await api.create([TEXT('A'), TEXT('B'), TEXT('C')]);
    const [a, b, c] = [table.fields.A!, table.fields.B!, table.fields.C!];
    for (const fieldIds of [
      [a, b],
      [a, b, c, newId()],
      [a, b, b],
      [a, b, newId()],
    ]) {
      const response = await api.apply(table, { kind: 'reorder_fields', fieldIds });
      expectError(response, 422, 'VALIDATION_FAILED');
      expect(
        new Set((response.body.error.details.problems as { path: Path }[]).map((problem) => problem.path.join('.'))),
        response.text,
      ).toEqual(new Set(['change.fieldIds']));
    }
    await expectRefused(suite, await api.apply(table, { kind: 'reorder_fields', fieldIds: [] }), [
      ['change', 'fieldIds'],
    ]);
    expect(await jobsOfTable(suite, table)).toBe(0);
  });

  it('422 for deleting or converting a field used by a unique rule, and for deleting the last field', async () => {
    const table0 = await api.create([TEXT('Code'), TEXT('Name')]);
    const rule = await addUniqueRule(suite.server, suite.org.adminKey, table0, { fieldIds: ['Code'] });
    expect(rule.job.state, JSON.stringify(rule.job)).toBe('succeeded');
    const table = await refreshSchemaVersion(suite.server, suite.org.adminKey, table0);
    const deleting = await api.apply(table, { kind: 'delete_field', fieldId: table.fields.Code });
    await expectRefused(suite, deleting, [['change', 'fieldId']]);
    expect(deleting.body.error.details.problems[0].message).toContain(rule.ruleId);
    await expectRefused(
      suite,
      await api.apply(table, { kind: 'convert_field', fieldId: table.fields.Code, type: 'integer' }),
      [['change', 'fieldId']],
    );

    const single = await api.create([TEXT('Only')]);
    await expectRefused(suite, await api.apply(single, { kind: 'delete_field', fieldId: single.fields.Only }), [
      ['change', 'fieldId'],
    ]);
    // The rule's own createUniqueRule job, and none for the refusals.
    expect(await jobsOfTable(suite, table)).toBe(1);
    expect(await jobsOfTable(suite, single)).toBe(0);
  });

  it('422 for an unsupported conversion pair and for onUnconvertible empty on a required field', async () => {
    const table = await api.create([
      { name: 'Flag', type: 'boolean' },
      { name: 'Day', type: 'date' },
      { name: 'Name', type: 'text', required: true },
    ]);
    await expectRefused(
      suite,
      await api.apply(table, { kind: 'convert_field', fieldId: table.fields.Flag, type: 'date' }),
      [['change', 'type']],
    );
    await expectRefused(
      suite,
      await api.apply(table, { kind: 'convert_field', fieldId: table.fields.Day, type: 'integer' }),
      [['change', 'type']],
    );
    await expectRefused(
      suite,
      await api.apply(table, {
        kind: 'convert_field',
        fieldId: table.fields.Name,
        type: 'integer',
        onUnconvertible: 'empty',
      }),
      [['change', 'onUnconvertible']],
    );
    await expectRefused(
      suite,
      await api.apply(table, {
        kind: 'convert_field',
        fieldId: table.fields.Name,
        type: 'integer',
        onUnconvertible: 'skip',
      }),
      [['change', 'onUnconvertible']],
    );
    expect(await jobsOfTable(suite, table)).toBe(0);
  });

  it('409 SCHEMA_VERSION_CONFLICT for a stale expectedSchemaVersion', async () => {
    const table0 = await api.create([TEXT('Name')]);
    const { table } = await api.succeed(table0, { kind: 'rename_field', fieldId: table0.fields.Name, name: 'Title' });
    const stale = await api.apply(
      table,
      { kind: 'add_field', field: { name: 'X', type: 'text' } },
      { expectedSchemaVersion: table0.schemaVersion },
    );
    expectError(stale, 409, 'SCHEMA_VERSION_CONFLICT');
    expect(stale.body.error.details).toEqual({
      expectedSchemaVersion: table0.schemaVersion,
      currentSchemaVersion: table.schemaVersion,
    });
    const ahead = await api.apply(
      table,
      { kind: 'add_field', field: { name: 'X', type: 'text' } },
      { expectedSchemaVersion: table.schemaVersion + 1 },
    );
    expectError(ahead, 409, 'SCHEMA_VERSION_CONFLICT');
    expect(await jobsOfTable(suite, table)).toBe(1);
  });

  it('403 for a viewer; 404 for another org’s admin and for an unknown table; 202 for a member', async () => {
    const table = await api.create([TEXT('Name')]);
    const change = { kind: 'add_field', field: { name: 'X', type: 'text' } };
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    expectError(await api.apply(table, change, { token: viewer.apiKey }), 403, 'FORBIDDEN');
    const other = await createOrg(suite.server.prisma);
    expectError(await api.apply(table, change, { token: other.adminKey }), 404, 'RESOURCE_NOT_FOUND');
    const otherTable = await createTable(suite.server, other, [TEXT('Name')]);
    expectError(await api.apply({ ...otherTable }, change), 404, 'RESOURCE_NOT_FOUND');
    expectError(
      await api.apply({ ...table, path: table.path.replace(table.tableId, newId()) }, change),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expect(await jobsOfTable(suite, table)).toBe(0);
    // Schema is the `manage` capability: members have it (docs/decisions/data-plane.md, Authority).
    const member = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    api.accepted(await api.apply(table, change, { token: member.apiKey }));
  });

  it('400 without an Idempotency-Key; a replayed key returns the same handle and creates one job; changed input is 409', async () => {
    const table = await api.create([TEXT('Name')]);
    const change = { kind: 'add_field', field: { name: 'X', type: 'text' } };
    const missing = await suite.server.request('POST', `${table.path}/schema/operations`, {
      token: suite.org.adminKey,
      body: { expectedSchemaVersion: table.schemaVersion, change },
    });
    expect(missing.status, missing.text).toBe(400);
    const key = idempotencyKey();
    const first = api.accepted(await api.apply(table, change, { key }));
    const replay = await api.apply(table, change, { key });
    expect(replay.status, replay.text).toBe(202);
    expect(replay.body).toEqual(first);
    expectError(
      await api.apply(table, { ...change, field: { name: 'Y', type: 'text' } }, { key }),
      409,
      'IDEMPOTENCY_CONFLICT',
    );
    const job = await waitForJob(suite.server, suite.org.adminKey, first.statusUrl);
    expect(job.state).toBe('succeeded');
    // Replayed after the job finished (and the schema version moved on): still the same handle.
    expect((await api.apply(table, change, { key })).body).toEqual(first);
    expect(await jobsOfTable(suite, table)).toBe(1);
    expect((await api.schema(table)).fields.map((field) => field.name)).toEqual(['Name', 'X']);
  });
});

describe('one change per table at a time (no worker: jobs stay queued)', () => {
  const suite = useServerWithOrg({ RUN_WORKER: 'false' });
  const api = client(suite);

  it('409 SCHEMA_MAINTENANCE while another change of the table is queued; accepted once it is cancelled; other tables unaffected', async () => {
    const table = await api.create([TEXT('Name'), TEXT('Code')]);
    const first = api.accepted(
      await api.apply(table, { kind: 'rename_field', fieldId: table.fields.Name, name: 'Title' }),
    );
    const secondKey = idempotencyKey();
    const second = await api.apply(table, { kind: 'delete_field', fieldId: table.fields.Code }, { key: secondKey });
    expectError(second, 409, 'SCHEMA_MAINTENANCE');
    expect(second.headers.get('retry-after')).toBe('1');
    // Unique rules and foreign keys share the table's turn, through endpoint 5 and their own endpoint alike.
    expectError(await api.apply(table, { kind: 'add_unique_rule', fieldIds: ['Code'] }), 409, 'SCHEMA_MAINTENANCE');
    expectError(
      await suite.server.request('POST', `${table.path}/unique-rules`, {
        token: suite.org.adminKey,
        idempotencyKey: idempotencyKey(),
        body: { fieldIds: ['Code'] },
      }),
      409,
      'SCHEMA_MAINTENANCE',
    );
    // Row writes go on meanwhile.
    expect((await createRow(suite.server, suite.org.adminKey, table, { Name: 'a' })).status).toBe(201);

    const elsewhere = await api.create([TEXT('Name')]);
    api.accepted(await api.apply(elsewhere, { kind: 'add_field', field: { name: 'X', type: 'text' } }));

    const cancelled = await controlJob(suite.server, suite.org.adminKey, suite.org.orgId, first.jobId, 'cancel');
    expect(cancelled.status, cancelled.text).toBe(200);
    expect(cancelled.body.state).toBe('cancelled');
    // The refusal was transient, so it was not recorded under its Idempotency-Key: the same request now goes through.
    const accepted = api.accepted(
      await api.apply(table, { kind: 'delete_field', fieldId: table.fields.Code }, { key: secondKey }),
    );
    expect((await suite.server.request('GET', accepted.statusUrl, { token: suite.org.adminKey })).body.state).toBe(
      'queued',
    );
    // A retry of the cancelled change would interleave with the queued one: refused too.
    expectError(
      await controlJob(suite.server, suite.org.adminKey, suite.org.orgId, first.jobId, 'retry'),
      409,
      'SCHEMA_MAINTENANCE',
    );

    const events = (await tableActivity(suite.server, suite.org.adminKey, table)).map((entry) => entry.event);
    expect(events).toEqual([
      'table.create',
      'job.updateField.queued',
      'records.changed',
      'job.updateField.cancelled',
      'job.deleteField.queued',
    ]);
  });

  it('the job of a cancelled queued change never runs: the table is as before', async () => {
    const table = await api.create([TEXT('Name'), TEXT('Code')]);
    const before = await api.schema(table);
    const handle = api.accepted(await api.apply(table, { kind: 'delete_field', fieldId: table.fields.Code }));
    expect((await controlJob(suite.server, suite.org.adminKey, suite.org.orgId, handle.jobId, 'cancel')).status).toBe(
      200,
    );
    expect(await api.schema(table)).toEqual(before);
  });
});

describe('activity events of each kind', () => {
  const suite = useServerWithOrg();
  const api = client(suite);

  /** The table's job events (oldest first) as `event jobId`, after the table.create entry. */
  async function jobEvents(
    table: TestTable,
  ): Promise<{ event: string; jobId: string | null; table: string | null; category: string }[]> {
    const entries = await tableActivity(suite.server, suite.org.adminKey, table);
    return entries
      .filter((entry) => entry.event !== 'table.create' && entry.event !== 'records.changed')
      .map((entry) => ({
        event: entry.event,
        jobId: entry.jobId,
        table: entry.table?.id ?? null,
        category: entry.category,
      }));
  }

  it('queued on accept, the plain success event on finish, with the job and table ids', async () => {
    let table = await api.create([TEXT('Name'), TEXT('Code'), TEXT('Other')]);
    const parent = await createTable(suite.server, suite.org, [TEXT('Code')], { databaseId: table.databaseId });
    const kinds: [Body, string, string][] = [
      [{ kind: 'add_field', field: { name: 'Extra', type: 'text' } }, 'createField', 'field.create'],
      [{ kind: 'rename_field', fieldId: table.fields.Name, name: 'Title' }, 'updateField', 'field.update'],
      [
        { kind: 'update_field', fieldId: table.fields.Name, required: false, options: { maxLength: 20 } },
        'updateField',
        'field.update',
      ],
      [{ kind: 'convert_field', fieldId: table.fields.Other, type: 'integer' }, 'applySchemaChange', 'field.convert'],
      [{ kind: 'delete_field', fieldId: table.fields.Other }, 'deleteField', 'field.delete'],
      [{ kind: 'reorder_fields', fieldIds: [table.fields.Code, table.fields.Name] }, 'reorderFields', 'fields.reorder'],
      [{ kind: 'add_unique_rule', fieldIds: ['Code'] }, 'createUniqueRule', 'rule.create'],
    ];
    const expected: Body[] = [];
    for (const [change, jobKind, success] of kinds) {
      if (change.kind === 'reorder_fields') {
        const fields = (await api.schema(table)).fields.map((field) => field.id);
        change.fieldIds = [...fields].reverse();
      }
      const { job, table: next } = await api.succeed(table, change);
      expect(job.kind).toBe(jobKind);
      table = next;
      expected.push({ event: `job.${jobKind}.queued`, jobId: job.jobId, table: table.tableId, category: 'schema' });
      expect(await jobEvents(table)).toContainEqual({
        event: success,
        jobId: job.jobId,
        table: table.tableId,
        category: 'schema',
      });
      expected.push({ event: success, jobId: job.jobId, table: table.tableId, category: 'schema' });
    }
    const rule = await api.schema(table);
    const parentRule = await api.succeed(parent, { kind: 'add_unique_rule', fieldIds: ['Code'] });
    const key = await api.succeed(table, {
      kind: 'add_foreign_key',
      fieldIds: ['Code'],
      referencedTableId: parent.tableId,
      referencedRuleId: (parentRule.job.result as { ruleId: string }).ruleId,
    });
    expect(key.job.kind).toBe('createForeignKey');
    expected.push({
      event: 'job.createForeignKey.queued',
      jobId: key.job.jobId,
      table: table.tableId,
      category: 'schema',
    });
    expected.push({ event: 'foreign-key.create', jobId: key.job.jobId, table: table.tableId, category: 'schema' });
    expect(rule.uniqueRules).toHaveLength(1);
    expect(await jobEvents(table)).toEqual(expected);
  });

  it('job.<kind>.failed when a change fails, and no success event', async () => {
    const table = await api.create([TEXT('Name'), TEXT('Code')]);
    await api.row(table, { Name: 'a long name', Code: 'x' });
    await api.row(table, { Name: 'b', Code: 'x' });
    const parent = await createTable(suite.server, suite.org, [TEXT('Code')], { databaseId: table.databaseId });
    const parentRule = await api.succeed(parent, { kind: 'add_unique_rule', fieldIds: ['Code'] });
    const failures: [Body, string, string][] = [
      [
        { kind: 'add_field', field: { name: 'Must', type: 'text', required: true } },
        'createField',
        'VALIDATION_FAILED',
      ],
      [
        { kind: 'update_field', fieldId: table.fields.Name, options: { maxLength: 3 } },
        'updateField',
        'VALIDATION_FAILED',
      ],
      [
        { kind: 'convert_field', fieldId: table.fields.Code, type: 'integer' },
        'applySchemaChange',
        'VALIDATION_FAILED',
      ],
      [{ kind: 'add_unique_rule', fieldIds: ['Code'] }, 'createUniqueRule', 'UNIQUE_CONFLICT'],
      [
        {
          kind: 'add_foreign_key',
          fieldIds: ['Code'],
          referencedTableId: parent.tableId,
          referencedRuleId: (parentRule.job.result as { ruleId: string }).ruleId,
        },
        'createForeignKey',
        'FOREIGN_KEY_CONFLICT',
      ],
    ];
    const expected: Body[] = [];
    for (const [change, jobKind, code] of failures) {
      const job = await api.run(table, change);
      expect({ kind: job.kind, state: job.state, code: job.error?.code }, JSON.stringify(job)).toEqual({
        kind: jobKind,
        state: 'failed',
        code,
      });
      expected.push({ event: `job.${jobKind}.queued`, jobId: job.jobId, table: table.tableId, category: 'schema' });
      expected.push({ event: `job.${jobKind}.failed`, jobId: job.jobId, table: table.tableId, category: 'schema' });
    }
    expect(await jobEvents(table)).toEqual(expected);
    expect((await api.schema(table)).schemaVersion).toBe(table.schemaVersion);
  });
});

describe('unique rules and foreign keys built online (add_unique_rule, add_foreign_key)', () => {
  const suite = useServerWithOrg();
  const api = client(suite);
  const CODE = TEXT('Code', 20);

  /** Unique indexes `u_…` on the table's physical table, with their validity. */
  async function uniqueIndexes(table: TestTable): Promise<{ name: string; valid: boolean; definition: string }[]> {
    return suite.server.prisma.$queryRaw`
      SELECT c.relname::text AS name, i.indisvalid AS valid, pg_get_indexdef(i.indexrelid) AS definition
        FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace
       WHERE n.nspname = ${`d_${table.databaseId.toLowerCase()}`} AND t.relname = ${`t_${table.tableId.toLowerCase()}`} AND starts_with(c.relname, 'u_')`;
  }

  async function foreignKeyConstraints(table: TestTable): Promise<{ name: string; validated: boolean }[]> {
    return suite.server.prisma.$queryRaw`
      SELECT conname::text AS name, convalidated AS validated FROM pg_constraint
       WHERE conrelid = to_regclass(${`"d_${table.databaseId.toLowerCase()}"."t_${table.tableId.toLowerCase()}"`}) AND contype = 'f'`;
  }

  it('add_unique_rule: the rule shows in the schema, its index is valid, and writes that collide are refused', async () => {
    const table0 = await api.create([CODE, TEXT('Label')]);
    for (const code of ['a', 'b']) await api.row(table0, { Code: code, Label: 'x' });
    const { job, table } = await api.succeed(table0, { kind: 'add_unique_rule', fieldIds: ['Code'] });
    expect(job.kind).toBe('createUniqueRule');
    const ruleId = (job.result as { ruleId: string }).ruleId;
    expect(job.result).toEqual({ ruleId, schemaVersion: table.schemaVersion });
    expect((await api.schema(table)).uniqueRules).toEqual([
      {
        id: ruleId,
        tableId: table.tableId,
        fieldIds: [table.fields.Code],
        where: null,
        state: 'active',
        referenceable: true,
        createdAt: expect.any(String),
      },
    ]);
    expect(await uniqueIndexes(table)).toEqual([
      { name: `u_${ruleId.toLowerCase()}`, valid: true, definition: expect.not.stringContaining('WHERE') },
    ]);
    const clash = await createRow(suite.server, suite.org.adminKey, table, { Code: 'a' });
    expectError(clash, 409, 'UNIQUE_CONFLICT');
    expect(clash.body.error.details).toEqual({ ruleId, fieldIds: [table.fields.Code], fieldNames: ['Code'] });
    expect((await createRow(suite.server, suite.org.adminKey, table, { Code: 'c' })).status).toBe(201);
  });

  it('add_unique_rule over duplicates: the job fails with UNIQUE_CONFLICT listing them; no rule, no index', async () => {
    const table = await api.create([CODE]);
    const ids: Record<string, string[]> = {};
    for (const code of ['X', 'Y', 'X', 'Z', 'Z', 'X']) (ids[code] ??= []).push(await api.row(table, { Code: code }));
    const before = await api.schema(table);
    const job = await api.run(table, { kind: 'add_unique_rule', fieldIds: [table.fields.Code] });
    expect(job.state).toBe('failed');
    expect(job.error).toEqual({
      code: 'UNIQUE_CONFLICT',
      message: expect.any(String),
      details: {
        fieldIds: [table.fields.Code],
        duplicates: [
          { rowIds: ids.X, values: { [table.fields.Code!]: 'X' } },
          { rowIds: ids.Z, values: { [table.fields.Code!]: 'Z' } },
        ],
        truncated: false,
      },
    });
    expect(await api.schema(table)).toEqual(before);
    expect(await uniqueIndexes(table)).toEqual([]);
  });

  it('add_unique_rule with where: a conditional rule (partial index), enforced only among matching rows', async () => {
    const table0 = await api.create([
      CODE,
      { name: 'Status', type: 'select', options: { choices: ['active', 'inactive'] } },
    ]);
    // Duplicates outside the condition do not stop the build.
    await api.row(table0, { Code: 'A', Status: 'inactive' });
    await api.row(table0, { Code: 'A', Status: 'inactive' });
    await api.row(table0, { Code: 'A', Status: 'active' });
    const where = { field: 'Status', op: 'eq', value: 'active' };
    const { job, table } = await api.succeed(table0, { kind: 'add_unique_rule', fieldIds: ['Code'], where });
    const ruleId = (job.result as { ruleId: string }).ruleId;
    expect((await api.schema(table)).uniqueRules).toEqual([expect.objectContaining({ id: ruleId, where })]);
    expect((await uniqueIndexes(table))[0]).toMatchObject({
      valid: true,
      definition: expect.stringContaining(' WHERE '),
    });
    expectError(
      await createRow(suite.server, suite.org.adminKey, table, { Code: 'A', Status: 'active' }),
      409,
      'UNIQUE_CONFLICT',
    );
    expect((await createRow(suite.server, suite.org.adminKey, table, { Code: 'A', Status: 'inactive' })).status).toBe(
      201,
    );
    // Duplicates inside the condition do.
    const other = await api.create([
      CODE,
      { name: 'Status', type: 'select', options: { choices: ['active', 'inactive'] } },
    ]);
    const first = await api.row(other, { Code: 'B', Status: 'active' });
    const second = await api.row(other, { Code: 'B', Status: 'active' });
    await api.row(other, { Code: 'C', Status: 'active' });
    const refused = await api.run(other, { kind: 'add_unique_rule', fieldIds: ['Code'], where });
    expect(refused.error).toMatchObject({
      code: 'UNIQUE_CONFLICT',
      details: { duplicates: [{ rowIds: [first, second], values: { [other.fields.Code!]: 'B' } }] },
    });
  });

  it('a field named only in a conditional rule’s where cannot be deleted or converted; a rename carries the where along', async () => {
    const fields: FieldSpec[] = [
      CODE,
      { name: 'Status', type: 'select', options: { choices: ['active', 'inactive'] } },
      TEXT('Other'),
    ];
    const table0 = await api.create(fields);
    const { table } = await api.succeed(table0, {
      kind: 'add_unique_rule',
      fieldIds: ['Code'],
      where: { field: 'Status', op: 'eq', value: 'active' },
    });
    const status = table.fields.Status!;
    await expectRefused(suite, await api.apply(table, { kind: 'delete_field', fieldId: status }), [
      ['change', 'fieldId'],
    ]);
    await expectRefused(suite, await api.apply(table, { kind: 'convert_field', fieldId: status, type: 'text' }), [
      ['change', 'fieldId'],
    ]);
    expect(await uniqueIndexes(table)).toHaveLength(1);

    // A rename: the rule's where follows it (it named the field by its old name), and the rule still holds.
    const { table: renamed } = await api.succeed(table, { kind: 'rename_field', fieldId: status, name: 'State' });
    expect((await api.schema(renamed)).uniqueRules[0]!.where).toEqual({ field: 'State', op: 'eq', value: 'active' });
    expect((await createRow(suite.server, suite.org.adminKey, renamed, { Code: 'A', State: 'active' })).status).toBe(
      201,
    );
    expectError(
      await createRow(suite.server, suite.org.adminKey, renamed, { Code: 'A', State: 'active' }),
      409,
      'UNIQUE_CONFLICT',
    );
    // Other changes still check the rule's where against the fields (an import preview compiles it).
    const preview = await suite.server.request('POST', `${renamed.path}/imports/preview`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: {
        expectedSchemaVersion: renamed.schemaVersion,
        format: 'csv',
        content: 'Code,State\nA,active\nB,active\n',
        fileName: 'a.csv',
        mapping: [
          { source: 'Code', fieldId: renamed.fields.Code },
          { source: 'State', fieldId: status },
        ],
      },
    });
    const previewed = JobResponse.parse(
      await waitForJob(suite.server, suite.org.adminKey, api.accepted(preview).statusUrl),
    );
    expect(previewed.state, JSON.stringify(previewed)).toBe('succeeded');
    expect(previewed.result).toMatchObject({ totalRows: 2, validRows: 1, invalidRows: 1 });
    // A where naming the field by id needs no rewrite.
    const byId = await api.create(fields);
    const { table: byIdTable } = await api.succeed(byId, {
      kind: 'add_unique_rule',
      fieldIds: ['Code'],
      where: { field: byId.fields.Status, op: 'eq', value: 'active' },
    });
    const { table: byIdRenamed } = await api.succeed(byIdTable, {
      kind: 'rename_field',
      fieldId: byId.fields.Status,
      name: 'State',
    });
    expect((await api.schema(byIdRenamed)).uniqueRules[0]!.where).toEqual({
      field: byId.fields.Status,
      op: 'eq',
      value: 'active',
    });
  });

  it('add_unique_rule and add_foreign_key: their own problems are 422 with paths under change', async () => {
    const table = await api.create([CODE, { name: 'Notes', type: 'longText' }]);
    await expectRefused(suite, await api.apply(table, { kind: 'add_unique_rule', fieldIds: ['Nope'] }), [
      ['change', 'fieldIds', 0],
    ]);
    await expectRefused(suite, await api.apply(table, { kind: 'add_unique_rule', fieldIds: ['Notes'] }), [
      ['change', 'fieldIds', 0],
    ]);
    await expectRefused(
      suite,
      await api.apply(table, {
        kind: 'add_unique_rule',
        fieldIds: ['Code'],
        where: { field: 'Nope', op: 'eq', value: 'x' },
      }),
      [['change', 'where', 'field']],
    );
    await expectRefused(suite, await api.apply(table, { kind: 'add_unique_rule', fieldIds: [] }), [
      ['change', 'fieldIds'],
    ]);
    await expectRefused(
      suite,
      await api.apply(table, {
        kind: 'add_foreign_key',
        fieldIds: ['Code'],
        referencedTableId: newId(),
        referencedRuleId: newId(),
      }),
      [['change', 'referencedTableId']],
    );
    const other = await api.create([CODE]);
    const otherRule = await api.succeed(other, { kind: 'add_unique_rule', fieldIds: ['Code'] });
    // Another database of the same org.
    await expectRefused(
      suite,
      await api.apply(table, {
        kind: 'add_foreign_key',
        fieldIds: ['Code'],
        referencedTableId: other.tableId,
        referencedRuleId: (otherRule.job.result as { ruleId: string }).ruleId,
      }),
      [['change', 'referencedTableId']],
    );
    expect(await jobsOfTable(suite, table)).toBe(0);
  });

  it('add_foreign_key: the key shows in the schema, is validated, and writes of orphans are refused', async () => {
    const parent0 = await api.create([CODE]);
    const { job: ruleJob, table: parent } = await api.succeed(parent0, { kind: 'add_unique_rule', fieldIds: ['Code'] });
    const ruleId = (ruleJob.result as { ruleId: string }).ruleId;
    await api.row(parent, { Code: 'P-1' });
    const child0 = await createTable(suite.server, suite.org, [TEXT('Parent code', 20), TEXT('Note')], {
      databaseId: parent.databaseId,
    });
    await api.row(child0, { 'Parent code': 'P-1' });
    await api.row(child0, { Note: 'no parent' });
    const { job, table: child } = await api.succeed(child0, {
      kind: 'add_foreign_key',
      fieldIds: ['Parent code'],
      referencedTableId: parent.tableId,
      referencedRuleId: ruleId,
    });
    expect(job.kind).toBe('createForeignKey');
    const foreignKeyId = (job.result as { foreignKeyId: string }).foreignKeyId;
    expect(job.result).toEqual({ foreignKeyId, schemaVersion: child.schemaVersion });
    expect((await api.schema(child)).foreignKeys).toEqual([
      {
        id: foreignKeyId,
        tableId: child.tableId,
        fieldIds: [child.fields['Parent code']],
        referencedTableId: parent.tableId,
        referencedTableName: expect.any(String),
        referencedRuleId: ruleId,
        referencedFieldIds: [parent.fields.Code],
        referencedFieldNames: ['Code'],
        state: 'active',
      },
    ]);
    expect(await foreignKeyConstraints(child)).toEqual([{ name: `k_${foreignKeyId.toLowerCase()}`, validated: true }]);
    const orphan = await createRow(suite.server, suite.org.adminKey, child, { 'Parent code': 'P-2' });
    expectError(orphan, 409, 'FOREIGN_KEY_CONFLICT');
    expect(orphan.body.error.details.foreignKeyId).toBe(foreignKeyId);
    expect((await createRow(suite.server, suite.org.adminKey, child, { 'Parent code': 'P-1' })).status).toBe(201);
    // The referenced rule cannot go while the key uses it, and the referenced field cannot be converted.
    await expectRefused(
      suite,
      await api.apply(parent, { kind: 'convert_field', fieldId: parent.fields.Code, type: 'integer' }),
      [['change', 'fieldId']],
    );
    await expectRefused(suite, await api.apply(child, { kind: 'delete_field', fieldId: child.fields['Parent code'] }), [
      ['change', 'fieldId'],
    ]);
  });

  it('add_foreign_key over orphans: the job fails with FOREIGN_KEY_CONFLICT listing them; no key, no constraint', async () => {
    const parent0 = await api.create([CODE]);
    const { job: ruleJob, table: parent } = await api.succeed(parent0, { kind: 'add_unique_rule', fieldIds: ['Code'] });
    await api.row(parent, { Code: 'P-1' });
    const child = await createTable(suite.server, suite.org, [TEXT('Parent code', 20)], {
      databaseId: parent.databaseId,
    });
    await api.row(child, { 'Parent code': 'P-1' });
    const orphanA = await api.row(child, { 'Parent code': 'P-9' });
    const orphanB = await api.row(child, { 'Parent code': 'P-8' });
    const before = await api.schema(child);
    const job = await api.run(child, {
      kind: 'add_foreign_key',
      fieldIds: ['Parent code'],
      referencedTableId: parent.tableId,
      referencedRuleId: (ruleJob.result as { ruleId: string }).ruleId,
    });
    expect(job.state).toBe('failed');
    const fieldId = child.fields['Parent code']!;
    expect(job.error).toEqual({
      code: 'FOREIGN_KEY_CONFLICT',
      message: expect.any(String),
      details: {
        fieldIds: [fieldId],
        orphans: [
          { rowId: orphanA, values: { [fieldId]: 'P-9' } },
          { rowId: orphanB, values: { [fieldId]: 'P-8' } },
        ].sort((a, b) => a.rowId.localeCompare(b.rowId)),
        truncated: false,
      },
    });
    expect(await api.schema(child)).toEqual(before);
    expect(await foreignKeyConstraints(child)).toEqual([]);
    expect((await createRow(suite.server, suite.org.adminKey, child, { 'Parent code': 'P-7' })).status).toBe(201);
  });
});
