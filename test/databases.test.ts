import { describe, expect, it } from 'vitest';
import { newId } from '../src/kernel/ids.ts';
import { DatabaseResponse } from '../src/contracts/databases.ts';
import { TableResponse, TableSchemaResponse } from '../src/contracts/tables.ts';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { addMember, createOrg, idempotencyKey, type TestOrg } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createDatabase, createRow, createTable, type FieldSpec } from './helpers/workspace.ts';

const suite = useServerWithOrg();

let counter = 0;
const freshName = (prefix: string) => `${prefix} ${newId().slice(-8)}${(counter += 1)}`;

const databasesPath = (orgId = suite.org.orgId) => `/v1/orgs/${orgId}/databases`;
const tablesPath = (databaseId: string, orgId = suite.org.orgId) => `${databasesPath(orgId)}/${databaseId}/tables`;

function postDatabase(body: unknown, token = suite.org.adminKey, orgId = suite.org.orgId, key = idempotencyKey()) {
  return suite.server.request('POST', databasesPath(orgId), { token, idempotencyKey: key, body });
}

function postTable(databaseId: string, body: unknown, token = suite.org.adminKey, key = idempotencyKey()) {
  return suite.server.request('POST', tablesPath(databaseId), { token, idempotencyKey: key, body });
}

const get = (path: string, token = suite.org.adminKey) => suite.server.request('GET', path, { token });

async function activityEvents(event: string, where: { databaseId?: string; tableId?: string }) {
  return suite.server.prisma.activityEvent.findMany({ where: { orgId: suite.org.orgId, event, ...where } });
}

async function schemaExists(databaseId: string): Promise<boolean> {
  const rows = await suite.server.prisma.$queryRaw<unknown[]>`
    SELECT 1 FROM information_schema.schemata WHERE schema_name = ${`d_${databaseId.toLowerCase()}`}`;
  return rows.length === 1;
}

async function dataPlaneSchemaCount(): Promise<number> {
  const [row] = await suite.server.prisma.$queryRaw<{ count: number }[]>`
    SELECT count(*)::int AS count FROM information_schema.schemata WHERE starts_with(schema_name, 'd_')`;
  return row!.count;
}

interface ColumnInfo {
  name: string;
  dataType: string;
  nullable: string;
  precision: number | null;
  scale: number | null;
  defaultValue: string | null;
}

async function columnsOf(schema: string, table: string): Promise<Map<string, ColumnInfo>> {
  const rows = await suite.server.prisma.$queryRaw<ColumnInfo[]>`
    SELECT column_name::text AS name, data_type::text AS "dataType", is_nullable::text AS nullable,
           numeric_precision::int AS precision, numeric_scale::int AS scale, column_default::text AS "defaultValue"
      FROM information_schema.columns WHERE table_schema = ${schema} AND table_name = ${table}`;
  return new Map(rows.map((row) => [row.name, row]));
}

/** Every page of a list, following `nextCursor` with `limit=1`. */
async function walk(path: string, token = suite.org.adminKey): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 20; page += 1) {
    const response = await get(`${path}?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, token);
    expect(response.status, response.text).toBe(200);
    expect(response.body.data.length).toBeLessThanOrEqual(1);
    ids.push(...response.body.data.map((item: { id: string }) => item.id));
    expect(response.body.hasMore).toBe(response.body.nextCursor !== null);
    if (!response.body.hasMore) return ids;
    cursor = response.body.nextCursor;
  }
  throw new Error('pagination did not end');
}

describe('POST /v1/orgs/{orgId}/databases', () => {
  it('creates an active database at version 1, its PostgreSQL schema and a database.create event', async () => {
    const name = freshName('Inventory');
    const response = await postDatabase({ name });
    expect(response.status, response.text).toBe(201);
    const database = DatabaseResponse.parse(response.body);
    expect(database).toMatchObject({ orgId: suite.org.orgId, name, state: 'active', version: '1' });
    expect(database.createdAt).toBe(database.updatedAt);
    expect(await schemaExists(database.id)).toBe(true);
    const events = await activityEvents('database.create', { databaseId: database.id });
    expect(events.map((event) => event.category)).toEqual(['schema']);
  });

  it('refuses a second database with the same name in any case with 409 UNIQUE_CONFLICT, leaving no schema behind', async () => {
    const name = freshName('Customers');
    expect((await postDatabase({ name })).status).toBe(201);
    const schemasBefore = await dataPlaneSchemaCount();
    for (const again of [name, name.toUpperCase(), name.toLowerCase()]) {
      expectError(await postDatabase({ name: again }), 409, 'UNIQUE_CONFLICT');
    }
    expect(await dataPlaneSchemaCount()).toBe(schemasBefore);
    const count = await suite.server.prisma.database.count({
      where: { orgId: suite.org.orgId, name: { equals: name, mode: 'insensitive' } },
    });
    expect(count).toBe(1);
  });

  it.each([
    ['an empty name', { name: '' }, ['body', 'name']],
    ['a name of 121 characters', { name: 'n'.repeat(121) }, ['body', 'name']],
    ['a missing name', {}, ['body', 'name']],
  ])('rejects %s with 422', async (_case, body, path) => {
    const response = await postDatabase(body);
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [path]);
  });

  it('accepts a name of exactly 120 characters', async () => {
    const name = freshName('Long').padEnd(120, 'x');
    expect((await postDatabase({ name })).status).toBe(201);
  });

  it('rejects properties the body does not define', async () => {
    expectError(await postDatabase({ name: freshName('Extra'), colour: 'blue' }), 422, 'VALIDATION_FAILED');
  });

  it('is refused to a viewer (403) but allowed to a member, who manages schema (DESIGN §3)', async () => {
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    expectError(await postDatabase({ name: freshName('By viewer') }, viewer.apiKey), 403, 'FORBIDDEN');
    const member = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    const created = await postDatabase({ name: freshName('By member') }, member.apiKey);
    expect(created.status, created.text).toBe(201);
    DatabaseResponse.parse(created.body);
  });

  it('answers 404 in an org the caller does not belong to', async () => {
    const other = await createOrg(suite.server.prisma);
    expectError(
      await postDatabase({ name: freshName('Intruder') }, suite.org.adminKey, other.orgId),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expect(await suite.server.prisma.database.count({ where: { orgId: other.orgId } })).toBe(0);
  });
});

describe('GET /v1/orgs/{orgId}/databases', () => {
  it('pages oldest first: limit=1 walks every database exactly once', async () => {
    const org: TestOrg = await createOrg(suite.server.prisma);
    const created: string[] = [];
    for (let index = 0; index < 3; index += 1)
      created.push(await createDatabase(suite.server, org, freshName('Paged')));
    const full = await get(databasesPath(org.orgId), org.adminKey);
    expect(full.status).toBe(200);
    expect(full.body).toEqual({ data: expect.any(Array), nextCursor: null, hasMore: false });
    full.body.data.forEach((item: unknown) => DatabaseResponse.parse(item));
    expect(await walk(databasesPath(org.orgId), org.adminKey)).toEqual([...created].sort());
  });

  it('refuses a cursor whose position was altered with 400 CURSOR_INVALID', async () => {
    await createDatabase(suite.server, suite.org, freshName('Cursor'));
    await createDatabase(suite.server, suite.org, freshName('Cursor'));
    const first = await get(`${databasesPath()}?limit=1`);
    const [, signature] = (first.body.nextCursor as string).split('.');
    const forged = `${Buffer.from(JSON.stringify({ id: '00000000000000000000000000' })).toString('base64url')}.${signature}`;
    expectError(await get(`${databasesPath()}?limit=1&cursor=${forged}`), 400, 'CURSOR_INVALID');
    expectError(await get(`${databasesPath()}?limit=1&cursor=garbage`), 400, 'CURSOR_INVALID');
  });

  it('reads one database, and answers 404 for a database of another org', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const read = await get(`${databasesPath()}/${databaseId}`);
    expect(read.status).toBe(200);
    expect(DatabaseResponse.parse(read.body).id).toBe(databaseId);

    const other = await createOrg(suite.server.prisma);
    const foreign = await createDatabase(suite.server, other);
    expectError(await get(`${databasesPath()}/${foreign}`), 404, 'RESOURCE_NOT_FOUND');
    expectError(await get(`${databasesPath(other.orgId)}/${foreign}`), 404, 'RESOURCE_NOT_FOUND');
    expectError(await get(`${databasesPath()}/${newId()}`), 404, 'RESOURCE_NOT_FOUND');
  });
});

/** One field of each type, with what PostgreSQL should store it as. */
const EVERY_TYPE: { spec: FieldSpec; options: Record<string, unknown>; dataType: string }[] = [
  { spec: { name: 'Name', type: 'text', required: true }, options: { maxLength: 255 }, dataType: 'text' },
  { spec: { name: 'Notes', type: 'longText' }, options: { maxLength: 100_000 }, dataType: 'text' },
  { spec: { name: 'Count', type: 'integer' }, options: {}, dataType: 'bigint' },
  {
    spec: { name: 'Price', type: 'number', required: true, options: { precision: 10, scale: 3 } },
    options: { precision: 10, scale: 3 },
    dataType: 'numeric',
  },
  { spec: { name: 'Active', type: 'boolean' }, options: {}, dataType: 'boolean' },
  { spec: { name: 'Born', type: 'date' }, options: {}, dataType: 'date' },
  { spec: { name: 'Seen', type: 'datetime' }, options: {}, dataType: 'timestamp with time zone' },
  { spec: { name: 'Email', type: 'email' }, options: {}, dataType: 'text' },
  { spec: { name: 'Site', type: 'url' }, options: {}, dataType: 'text' },
  {
    spec: { name: 'Size', type: 'select', options: { choices: ['S', 'M'] } },
    options: { choices: ['S', 'M'] },
    dataType: 'text',
  },
  {
    spec: { name: 'Tags', type: 'multiSelect', options: { choices: ['a', 'b'] } },
    options: { choices: ['a', 'b'] },
    dataType: 'ARRAY',
  },
  { spec: { name: 'Data', type: 'json' }, options: { maxDepth: 16, maxBytes: 65_536 }, dataType: 'jsonb' },
  {
    spec: { name: 'Number', type: 'autoNumber' },
    options: { start: 1, max: Number.MAX_SAFE_INTEGER },
    dataType: 'bigint',
  },
];

describe('POST …/databases/{databaseId}/tables', () => {
  it('creates the table with its fields in order, schemaVersion 1, options with defaults, and a table.create event', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const name = freshName('Products');
    const response = await postTable(databaseId, { name, fields: EVERY_TYPE.map((field) => field.spec) });
    expect(response.status, response.text).toBe(201);
    const table = TableResponse.parse(response.body);
    expect(table).toMatchObject({
      orgId: suite.org.orgId,
      databaseId,
      name,
      state: 'active',
      version: '1',
      schemaVersion: 1,
    });
    expect(
      table.fields.map(({ name: fieldName, type, required, options, position }) => ({
        name: fieldName,
        type,
        required,
        options,
        position,
      })),
    ).toEqual(
      EVERY_TYPE.map(({ spec, options }, position) => ({
        name: spec.name,
        type: spec.type,
        required: spec.required ?? false,
        options,
        position,
      })),
    );
    expect(new Set(table.fields.map((field) => field.id)).size).toBe(EVERY_TYPE.length);
    expect(
      (await activityEvents('table.create', { databaseId, tableId: table.id })).map((event) => event.category),
    ).toEqual(['schema']);
  });

  it('stores each field as a typed column of t_<id>, beside the history table h_<id>', async () => {
    const table = await createTable(
      suite.server,
      suite.org,
      EVERY_TYPE.map((field) => field.spec),
    );
    const schema = `d_${table.databaseId.toLowerCase()}`;
    const tables = await suite.server.prisma.$queryRaw<{ name: string }[]>`
      SELECT table_name::text AS name FROM information_schema.tables WHERE table_schema = ${schema} ORDER BY table_name`;
    const suffix = table.tableId.toLowerCase();
    // The database's change feed (docs/decisions/changes.md) lives beside its tables.
    expect(tables.map((row) => row.name)).toEqual([
      'change_arm',
      'change_commits',
      'change_feed',
      'changes',
      `h_${suffix}`,
      `t_${suffix}`,
    ]);

    const columns = await columnsOf(schema, `t_${suffix}`);
    expect(columns.size).toBe(4 + EVERY_TYPE.length); // id, version, created_at, updated_at
    for (const { spec, dataType } of EVERY_TYPE) {
      const column = columns.get(`f_${table.fields[spec.name]!.toLowerCase()}`);
      expect(column?.dataType, spec.name).toBe(dataType);
      const notNull = spec.required === true || spec.type === 'autoNumber';
      expect(column?.nullable, spec.name).toBe(notNull ? 'NO' : 'YES');
    }
    const price = columns.get(`f_${table.fields.Price!.toLowerCase()}`)!;
    expect([price.precision, price.scale]).toEqual([10, 3]);
    expect(columns.get(`f_${table.fields.Number!.toLowerCase()}`)!.defaultValue).toMatch(/^nextval\(/);
    expect([...(await columnsOf(schema, `h_${suffix}`)).keys()].sort()).toEqual([
      'actor_id',
      'actor_kind',
      'actor_name',
      'changed_at',
      'field_id',
      'mutation_id',
      'operation',
      'row_id',
      'value',
      'version',
    ]);
  });

  it('keeps table names unique per database (ignoring case) but not across databases', async () => {
    const first = await createDatabase(suite.server, suite.org);
    const second = await createDatabase(suite.server, suite.org);
    const name = freshName('Orders');
    const fields = [{ name: 'Code', type: 'text' }];
    expect((await postTable(first, { name, fields })).status).toBe(201);
    expectError(await postTable(first, { name: name.toUpperCase(), fields }), 409, 'UNIQUE_CONFLICT');
    expect((await postTable(second, { name, fields })).status).toBe(201);
  });

  it('answers 404 for an unknown database or one of another org', async () => {
    const body = { name: freshName('Lost'), fields: [{ name: 'Code', type: 'text' }] };
    expectError(await postTable(newId(), body), 404, 'RESOURCE_NOT_FOUND');
    const other = await createOrg(suite.server.prisma);
    expectError(await postTable(await createDatabase(suite.server, other), body), 404, 'RESOURCE_NOT_FOUND');
  });

  it('is refused to a viewer with 403 FORBIDDEN', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    expectError(
      await postTable(databaseId, { name: freshName('No'), fields: [{ name: 'Code', type: 'text' }] }, viewer.apiKey),
      403,
      'FORBIDDEN',
    );
    expect(await suite.server.prisma.dataTable.count({ where: { databaseId } })).toBe(0);
  });

  it('replays a create with the same Idempotency-Key: same table, created once', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const key = idempotencyKey();
    const body = { name: freshName('Once'), fields: [{ name: 'Code', type: 'text' }] };
    const first = await postTable(databaseId, body, suite.org.adminKey, key);
    const replay = await postTable(databaseId, body, suite.org.adminKey, key);
    expect(first.status).toBe(201);
    expect(replay.status).toBe(201);
    expect(replay.body.id).toBe(first.body.id);
    expect(replay.body).toEqual(first.body);
    expect(await suite.server.prisma.dataTable.count({ where: { databaseId } })).toBe(1);
  });

  it('never lets user text reach DDL: quotes and SQL in names are just names', async () => {
    const databaseId = await createDatabase(suite.server, suite.org, 'db"; DROP SCHEMA public CASCADE; --');
    const name = 'x"; DROP TABLE users; --';
    const response = await postTable(databaseId, {
      name,
      fields: [
        { name: 'a"b', type: 'text' },
        { name: "it's", type: 'integer' },
      ],
    });
    expect(response.status, response.text).toBe(201);
    expect(response.body.name).toBe(name);
    expect(response.body.fields.map((field: { name: string }) => field.name)).toEqual(['a"b', "it's"]);

    const [users] = await suite.server.prisma.$queryRaw<
      { present: boolean }[]
    >`SELECT to_regclass('public.users') IS NOT NULL AS present`;
    expect(users!.present).toBe(true);
    expect((await get(`/v1/orgs/${suite.org.orgId}`)).status).toBe(200);

    const table = {
      orgId: suite.org.orgId,
      databaseId,
      tableId: response.body.id,
      schemaVersion: 1,
      fields: {},
      path: `${tablesPath(databaseId)}/${response.body.id}`,
    };
    const row = await createRow(suite.server, suite.org.adminKey, table, {
      'a"b': "'; DELETE FROM users; --",
      "it's": 1,
    });
    expect(row.status, row.text).toBe(201);
    const [quoted, apostrophe] = response.body.fields.map((field: { id: string }) => field.id);
    expect(row.body.row.values).toEqual({ [quoted]: "'; DELETE FROM users; --", [apostrophe]: 1 });
  });
});

describe('reading tables and their schema', () => {
  it('lists tables (paged), reads one, and serves the schema endpoint with no rules or keys yet', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const a = await createTable(
      suite.server,
      suite.org,
      [
        { name: 'Code', type: 'text', required: true },
        { name: 'Qty', type: 'integer' },
      ],
      { databaseId },
    );
    const b = await createTable(suite.server, suite.org, [{ name: 'Label', type: 'text' }], { databaseId });

    const list = await get(tablesPath(databaseId));
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ data: expect.any(Array), nextCursor: null, hasMore: false });
    expect(list.body.data.map((table: unknown) => TableResponse.parse(table).id)).toEqual([a.tableId, b.tableId]);
    expect(await walk(tablesPath(databaseId))).toEqual([a.tableId, b.tableId]);

    const one = await get(a.path);
    expect(one.status).toBe(200);
    expect(one.body).toEqual(list.body.data[0]);

    const schema = await get(`${a.path}/schema`);
    expect(schema.status).toBe(200);
    expect(TableSchemaResponse.parse(schema.body)).toEqual({
      tableId: a.tableId,
      schemaVersion: 1,
      fields: one.body.fields,
      uniqueRules: [],
      foreignKeys: [],
      indexes: [],
    });
  });

  it('lets a viewer read, and answers 404 for tables outside the path’s org or database', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Code', type: 'text' }]);
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    expect((await get(table.path, viewer.apiKey)).status).toBe(200);
    expect((await get(`${table.path}/schema`, viewer.apiKey)).status).toBe(200);

    const otherDatabase = await createDatabase(suite.server, suite.org);
    expectError(await get(`${tablesPath(otherDatabase)}/${table.tableId}`), 404, 'RESOURCE_NOT_FOUND');
    expectError(await get(`${tablesPath(otherDatabase)}/${table.tableId}/schema`), 404, 'RESOURCE_NOT_FOUND');
    expectError(await get(tablesPath(newId())), 404, 'RESOURCE_NOT_FOUND');

    const other = await createOrg(suite.server.prisma);
    expectError(await get(table.path, other.adminKey), 404, 'RESOURCE_NOT_FOUND');
    expectError(await get(`${table.path}/schema`, other.adminKey), 404, 'RESOURCE_NOT_FOUND');
  });
});
