import { describe, expect, it } from 'vitest';
import { Page } from '../src/contracts/pages.ts';
import { RowMutationResponse, RowResponse } from '../src/contracts/rows.ts';
import { TableResponse, TableSchemaResponse } from '../src/contracts/tables.ts';
import type { ApiResponse } from './helpers/server.ts';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createDatabase, createRow, createTable, type FieldSpec, type TestTable } from './helpers/workspace.ts';

const suite = useServerWithOrg();
const token = () => suite.org.adminKey;
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/** One field per type and per option under test; the bad-value cases below address them by these names. */
const TYPED_FIELDS: FieldSpec[] = [
  { name: 'Title', type: 'text', options: { maxLength: 5 } },
  { name: 'Notes', type: 'longText' },
  { name: 'Count', type: 'integer' },
  { name: 'Bounded', type: 'integer', options: { min: 0, max: 10 } },
  { name: 'Price', type: 'number', options: { precision: 15, scale: 2 } },
  { name: 'Small', type: 'number', options: { precision: 5, scale: 2 } },
  { name: 'Ranged', type: 'number', options: { min: -1.5, max: 2.5 } },
  { name: 'Flag', type: 'boolean' },
  { name: 'Day', type: 'date' },
  { name: 'At', type: 'datetime' },
  { name: 'Email', type: 'email' },
  { name: 'Site', type: 'url' },
  { name: 'Status', type: 'select', options: { choices: ['open', 'closed'] } },
  { name: 'Tags', type: 'multiSelect', options: { choices: ['red', 'green', 'blue'] } },
  { name: 'Data', type: 'json', options: { maxDepth: 3, maxBytes: 200 } },
  { name: 'Seq', type: 'autoNumber' },
];

let typed: Promise<TestTable> | undefined;
const typedTable = () => (typed ??= createTable(suite.server, suite.org, TYPED_FIELDS));

async function listRows(table: TestTable) {
  const response = await suite.server.request('GET', `${table.path}/rows?limit=100`, { token: token() });
  expect(response.status, response.text).toBe(200);
  return Page(RowResponse).parse(response.body).data;
}

async function getRow(table: TestTable, rowId: string) {
  const response = await suite.server.request('GET', `${table.path}/rows/${rowId}`, { token: token() });
  expect(response.status, response.text).toBe(200);
  return RowResponse.parse(response.body);
}

function patchRow(
  table: TestTable,
  row: { id: string; version: string },
  values: Record<string, unknown>,
  key = idempotencyKey(),
) {
  return suite.server.request('PATCH', `${table.path}/rows/${row.id}`, {
    token: token(),
    idempotencyKey: key,
    body: { expectedVersion: row.version, values },
  });
}

async function createdRow(table: TestTable, values: Record<string, unknown>) {
  const response = await createRow(suite.server, token(), table, values);
  expect(response.status, response.text).toBe(201);
  return RowMutationResponse.parse(response.body).row;
}

/** Every field of the table keyed by id: null unless given (by field name) in `cells`. */
function allCells(table: TestTable, cells: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(table.fields).map(([name, id]) => [id, name in cells ? cells[name] : null]));
}

/**
 * A 422 VALIDATION_FAILED whose problems name exactly the keys sent for failing cells: each problem's path starts
 * with ['values', key as sent] and carries the field id; a cell may be reported once or more, but none is missing.
 */
function expectCellProblems(response: ApiResponse, table: TestTable, failing: Record<string, string>): void {
  expectError(response, 422, 'VALIDATION_FAILED');
  const problems = response.body.error.details.problems as {
    path: (string | number)[];
    fieldId?: string;
    message: string;
  }[];
  expect(new Set(problems.map((problem) => problem.path[1]))).toEqual(new Set(Object.keys(failing)));
  for (const problem of problems) {
    // A problem inside an array cell (an unknown multiSelect choice) may add the element's index.
    expect(problem.path.slice(0, 2)).toEqual(['values', problem.path[1]]);
    expect(
      problem.path.length === 2 || (problem.path.length === 3 && typeof problem.path[2] === 'number'),
      JSON.stringify(problem),
    ).toBe(true);
    expect(problem.fieldId, JSON.stringify(problem)).toBe(table.fields[failing[String(problem.path[1])]!]);
    expect(problem.message.length).toBeGreaterThan(0);
  }
}

describe('good cell values round-trip in their canonical form', () => {
  it('creates a row with one good value per type (keys by name or id) and reads back the same values', async () => {
    const table = await typedTable();
    const cells = {
      Title: '😀😀😀😀é', // five code points, nine UTF-16 units: maxLength counts characters, not units
      Notes: 'line one\nline two',
      Count: MAX_SAFE,
      Bounded: 10,
      Price: 12.5,
      Small: -999.99,
      Ranged: -1.5,
      Flag: false,
      Day: '2024-02-29',
      At: '2024-01-01T00:00:00.123Z',
      Email: 'ada.lovelace@example.com',
      Site: 'https://example.com/path?q=1#top',
      Status: 'closed',
      Tags: ['blue', 'red'],
      Data: { name: 'x', list: [1, { deep: null }], flag: true },
    };
    const { Count: count, At: at, ...byName } = cells;
    const row = await createdRow(table, { ...byName, [table.fields.Count!]: count, [table.fields.At!]: at });
    const expected = allCells(table, { ...cells, Seq: row.values[table.fields.Seq!] });
    expect(row.values).toEqual(expected);
    expect(row.values[table.fields.Seq!]).toEqual(expect.any(Number));
    expect((await getRow(table, row.id)).values).toEqual(expected);
  });

  it('answers a json cell with the same key order a later read gives (jsonb order), so replays and reads agree', async () => {
    const table = await typedTable();
    const row = await createdRow(table, { Data: { name: 'x', id: 1, zz: { b: 1, a: 2 } } });
    const written = JSON.stringify(row.values[table.fields.Data!]);
    expect(written).toBe('{"id":1,"zz":{"a":2,"b":1},"name":"x"}');
    expect(JSON.stringify((await getRow(table, row.id)).values[table.fields.Data!])).toBe(written);
  });

  it('refuses a json number that JSON.parse can only read as Infinity (1e400) with 422, instead of storing null', async () => {
    const table = await typedTable();
    const response = await suite.server.request('POST', `${table.path}/rows`, {
      token: token(),
      idempotencyKey: idempotencyKey(),
      rawBody: `{"expectedSchemaVersion":${table.schemaVersion},"values":{"Data":{"big":1e400}}}`,
    });
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [['values', 'Data']]);
  });

  it('refuses unpaired surrogates (valid JSON escapes PostgreSQL cannot store) in text and json keys with 422', async () => {
    const table = await typedTable();
    const response = await suite.server.request('POST', `${table.path}/rows`, {
      token: token(),
      idempotencyKey: idempotencyKey(),
      rawBody: `{"expectedSchemaVersion":${table.schemaVersion},"values":{"Title":"a\\ud800","Data":{"\\udc00":1}}}`,
    });
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [
      ['values', 'Title'],
      ['values', 'Data'],
    ]);
  });

  it('keeps "" and [] in a json cell as the JSON values they are (only null empties a json cell)', async () => {
    const table = await typedTable();
    for (const value of ['', [], 0, false]) {
      const row = await createdRow(table, { Data: value });
      expect(row.values[table.fields.Data!]).toEqual(value);
      expect((await getRow(table, row.id)).values[table.fields.Data!]).toEqual(value);
    }
  });

  it('stores omitted optional fields as null and keeps multiSelect order as sent', async () => {
    const table = await typedTable();
    const row = await createdRow(table, { Tags: ['green', 'red', 'blue'] });
    expect(row.values[table.fields.Tags!]).toEqual(['green', 'red', 'blue']);
    expect(row.values[table.fields.Title!]).toBeNull();
    expect((await getRow(table, row.id)).values[table.fields.Tags!]).toEqual(['green', 'red', 'blue']);
  });

  it('changes cells with PATCH and reads them back; null clears an optional cell', async () => {
    const table = await typedTable();
    const row = await createdRow(table, { Title: 'old', Price: 1, Tags: ['red'] });
    const changes = {
      Title: null,
      Price: 1234567890123.45,
      Tags: ['blue', 'green'],
      Data: [[['x']]],
      At: '2099-12-31T23:59:59.999Z',
    };
    const response = await patchRow(table, row, changes);
    expect(response.status, response.text).toBe(200);
    const updated = RowMutationResponse.parse(response.body).row;
    const expected = allCells(table, { ...changes, Seq: row.values[table.fields.Seq!] });
    expect(updated.values).toEqual(expected);
    expect(BigInt(updated.version)).toBeGreaterThan(BigInt(row.version));
    expect((await getRow(table, row.id)).values).toEqual(expected);
  });
});

/** Bad values per field; round i sends the i-th value of every field at once. */
const BAD_VALUES: Record<string, unknown[]> = {
  Title: ['abcdef', 'a\u0000b', 42, '😀😀😀😀😀😀'],
  Notes: [123, 'nul\u0000'],
  Count: ['12', 1.5, 2 ** 53, -(2 ** 53)],
  Bounded: [-1, 11],
  Price: [1.234, '12.5', 0.001],
  Small: [1000, 12345.6],
  Ranged: [-1.6, 2.51],
  Flag: ['true', 1, 'false'],
  Day: ['2023-02-29', '2024-13-01', '2024-1-1', '2024-02-29T00:00:00.000Z'],
  At: ['2024-01-01T00:00:00Z', '2024-01-01T00:00:00.000+01:00', '2024-01-01T24:00:00.000Z', '2024-02-30T00:00:00.000Z'],
  Email: ['not-an-email', 'a@', 42],
  Site: ['ftp://x', 'not a url', 'https://exämple.com/', '/relative/path'],
  Status: ['pending', 'Open', ['open']],
  Tags: [['red', 'red'], ['red', 'purple'], 'red'],
  Data: [{ a: { b: { c: { d: 1 } } } }, { text: 'x'.repeat(300) }, { text: 'a\u0000b' }, { 'k\u0000': 1 }],
  Seq: [5, null],
};
const ROUNDS = Math.max(...Object.values(BAD_VALUES).map((values) => values.length));

/** Round i's body: every field with an i-th bad value; even rounds address fields by id, odd rounds by name. */
function badRound(
  table: TestTable,
  round: number,
): { values: Record<string, unknown>; failing: Record<string, string> } {
  const values: Record<string, unknown> = {};
  const failing: Record<string, string> = {};
  for (const [name, candidates] of Object.entries(BAD_VALUES)) {
    if (round >= candidates.length) continue;
    const key = round % 2 === 0 ? table.fields[name]! : name;
    values[key] = candidates[round];
    failing[key] = name;
  }
  return { values, failing };
}

describe('bad cell values are refused with every failing field listed', () => {
  it('POST rows answers 422 naming each bad cell by the key it was sent under, and writes nothing', async () => {
    const table = await typedTable();
    const before = (await listRows(table)).length;
    for (let round = 0; round < ROUNDS; round += 1) {
      const { values, failing } = badRound(table, round);
      expectCellProblems(await createRow(suite.server, token(), table, values), table, failing);
    }
    expect(await listRows(table)).toHaveLength(before);
  });

  it('rejects a decimal beyond the scale rather than rounding it (1.234 with scale 2 is not stored as 1.23)', async () => {
    const table = await typedTable();
    const response = await createRow(suite.server, token(), table, { Price: 1.234, Small: 1.23 });
    expectCellProblems(response, table, { Price: 'Price' });
    expect(response.body.error.details.problems).toHaveLength(1);
    expect((await listRows(table)).some((row) => row.values[table.fields.Price!] === 1.23)).toBe(false);
  });

  it('reports an unknown multiSelect choice at its index inside the cell', async () => {
    const table = await typedTable();
    const response = await createRow(suite.server, token(), table, { Tags: ['red', 'purple', 'blue', 'pink'] });
    expectCellProblems(response, table, { Tags: 'Tags' });
    expectProblemPaths(response, [
      ['values', 'Tags', 1],
      ['values', 'Tags', 3],
    ]);
  });

  it('replays the same 422 for the same Idempotency-Key and body, still without writing', async () => {
    const table = await typedTable();
    const before = (await listRows(table)).length;
    const { values } = badRound(table, 0);
    const key = idempotencyKey();
    const first = await createRow(suite.server, token(), table, values, key);
    const replay = await createRow(suite.server, token(), table, values, key);
    expectError(replay, 422, 'VALIDATION_FAILED');
    const { requestId: _first, ...firstError } = first.body.error;
    const { requestId: _replay, ...replayError } = replay.body.error;
    expect(replayError).toEqual(firstError);
    expect(await listRows(table)).toHaveLength(before);
  });

  it('PATCH rows answers the same 422 for bad cells and leaves the row unchanged', async () => {
    const table = await typedTable();
    const row = await createdRow(table, { Title: 'keep', Count: 7 });
    for (let round = 0; round < ROUNDS; round += 1) {
      const { values, failing } = badRound(table, round);
      expectCellProblems(await patchRow(table, row, values), table, failing);
    }
    const after = await getRow(table, row.id);
    expect({ version: after.version, values: after.values }).toEqual({ version: row.version, values: row.values });
  });
});

describe('field names in requests', () => {
  it('reports unknown names, wrong-case names and a field given twice (by name and by id) in one 422', async () => {
    const table = await typedTable();
    const before = (await listRows(table)).length;
    const response = await createRow(suite.server, token(), table, {
      Title: 'ok',
      [table.fields.Title!]: 'twice',
      title: 'wrong case',
      Nope: 1,
      Count: 'bad',
    });
    expectError(response, 422, 'VALIDATION_FAILED');
    const problems = response.body.error.details.problems as { path: string[]; fieldId?: string }[];
    expect(problems.map(({ path, fieldId }) => ({ path, fieldId }))).toEqual(
      expect.arrayContaining([
        { path: ['values', table.fields.Title!], fieldId: table.fields.Title! },
        { path: ['values', 'title'], fieldId: undefined },
        { path: ['values', 'Nope'], fieldId: undefined },
        { path: ['values', 'Count'], fieldId: table.fields.Count! },
      ]),
    );
    expect(problems).toHaveLength(4);
    expect(await listRows(table)).toHaveLength(before);
  });

  it('addresses the same cell by exact name or by id', async () => {
    const table = await typedTable();
    const byName = await createdRow(table, { Title: 'name' });
    const byId = await createdRow(table, { [table.fields.Title!]: 'id' });
    expect([byName.values[table.fields.Title!], byId.values[table.fields.Title!]]).toEqual(['name', 'id']);
  });
});

describe('required fields', () => {
  let required: Promise<TestTable> | undefined;
  const requiredTable = () =>
    (required ??= createTable(suite.server, suite.org, [
      { name: 'Name', type: 'text', required: true },
      { name: 'Tags', type: 'multiSelect', required: true, options: { choices: ['a', 'b'] } },
      { name: 'Size', type: 'integer', required: true },
      { name: 'Note', type: 'text' },
    ]));

  it('refuses missing, null, empty-string and empty-array values of required fields, all in one 422', async () => {
    const table = await requiredTable();
    const { Name: name, Tags: tags, Size: size } = table.fields as Record<string, string>;
    const missing = await createRow(suite.server, token(), table, { Note: 'only optional' });
    expectCellProblems(missing, table, { [name!]: 'Name', [tags!]: 'Tags', [size!]: 'Size' });
    expectProblemPaths(missing, [
      ['values', name!],
      ['values', tags!],
      ['values', size!],
    ]);

    const empty = await createRow(suite.server, token(), table, { Name: '', Tags: [], Size: null });
    expectCellProblems(empty, table, { Name: 'Name', Tags: 'Tags', Size: 'Size' });
    const nulls = await createRow(suite.server, token(), table, { Name: null, Tags: null, Size: 1 });
    expectCellProblems(nulls, table, { Name: 'Name', Tags: 'Tags' });
    expect(await listRows(table)).toHaveLength(0);
  });

  it('refuses clearing a required field with PATCH, and accepts a complete row', async () => {
    const table = await requiredTable();
    const row = await createdRow(table, { Name: 'Ada', Tags: ['b', 'a'], Size: 0 });
    expect(row.values).toEqual(allCells(table, { Name: 'Ada', Tags: ['b', 'a'], Size: 0 }));
    expectCellProblems(await patchRow(table, row, { Name: '', Tags: [] }), table, { Name: 'Name', Tags: 'Tags' });
    expect((await getRow(table, row.id)).version).toBe(row.version);
  });
});

describe('autoNumber', () => {
  it('numbers rows 1, 2, 3 by default and from options.start when given', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'Name', type: 'text' },
      { name: 'No', type: 'autoNumber' },
    ]);
    const numbers: unknown[] = [];
    for (const name of ['a', 'b', 'c'])
      numbers.push((await createdRow(table, { Name: name })).values[table.fields.No!]);
    expect(numbers).toEqual([1, 2, 3]);

    const offset = await createTable(suite.server, suite.org, [
      { name: 'No', type: 'autoNumber', options: { start: 1000 } },
    ]);
    const first = await createdRow(offset, {});
    const second = await createdRow(offset, {});
    expect([first.values[offset.fields.No!], second.values[offset.fields.No!]]).toEqual([1000, 1001]);
    expect((await getRow(offset, second.id)).values).toEqual({ [offset.fields.No!]: 1001 });
  });

  it('answers 409 AUTO_INCREMENT_EXHAUSTED once the range {start: 1, max: 2} is used up, and writes nothing', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'Name', type: 'text' },
      { name: 'No', type: 'autoNumber', options: { start: 1, max: 2 } },
    ]);
    await createdRow(table, { Name: 'one' });
    await createdRow(table, { Name: 'two' });
    const third = await createRow(suite.server, token(), table, { Name: 'three' });
    expectError(third, 409, 'AUTO_INCREMENT_EXHAUSTED');
    expect(third.body.error.details).toEqual({ fieldIds: [table.fields.No!], fieldNames: ['No'] });
    const rows = await listRows(table);
    expect(rows.map((row) => row.values[table.fields.No!]).sort()).toEqual([1, 2]);
  });
});

describe('field definitions at table creation', () => {
  const text = (name: string) => ({ name, type: 'text' });
  const BAD_DEFINITIONS: [string, unknown[], (string | number)[]][] = [
    ['an unknown type', [text('A'), { name: 'B', type: 'money' }], ['body', 'fields', 1, 'type']],
    [
      'an unknown option key',
      [{ name: 'A', type: 'text', options: { maxLength: 5, colour: 'red' } }],
      ['body', 'fields', 0, 'options'],
    ],
    ['a select without options', [{ name: 'A', type: 'select' }], ['body', 'fields', 0, 'options']],
    [
      'a multiSelect with no choices',
      [{ name: 'A', type: 'multiSelect', options: { choices: [] } }],
      ['body', 'fields', 0, 'options', 'choices'],
    ],
    [
      'duplicate choices',
      [{ name: 'A', type: 'select', options: { choices: ['x', 'y', 'x'] } }],
      ['body', 'fields', 0, 'options', 'choices'],
    ],
    ['names differing only in case', [text('Code'), text('code')], ['body', 'fields', 1, 'name']],
    ['a name that looks like a ULID', [text('01HZY8Z8Z8Z8Z8Z8Z8Z8Z8Z8Z8')], ['body', 'fields', 0, 'name']],
    ['a name with a leading space', [text(' Name')], ['body', 'fields', 0, 'name']],
    ['an empty name', [text('')], ['body', 'fields', 0, 'name']],
    [
      'number scale equal to precision',
      [{ name: 'A', type: 'number', options: { precision: 4, scale: 4 } }],
      ['body', 'fields', 0, 'options'],
    ],
    [
      'integer min above max',
      [{ name: 'A', type: 'integer', options: { min: 5, max: 4 } }],
      ['body', 'fields', 0, 'options'],
    ],
    ['a required autoNumber', [{ name: 'A', type: 'autoNumber', required: true }], ['body', 'fields', 0, 'required']],
    ['more than 500 fields', Array.from({ length: 501 }, (_, index) => text(`F${index}`)), ['body', 'fields']],
    ['zero fields', [], ['body', 'fields']],
  ];

  let database: Promise<string> | undefined;
  const badTablesDatabase = () => (database ??= createDatabase(suite.server, suite.org));
  const postTable = async (fields: unknown[]) =>
    suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/databases/${await badTablesDatabase()}/tables`, {
      token: token(),
      idempotencyKey: idempotencyKey(),
      body: { name: 'Bad table', fields },
    });

  it.each(BAD_DEFINITIONS)('refuses %s with 422 at the field’s path', async (_case, fields, path) => {
    const response = await postTable(fields);
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [path]);
    expect(response.body.error.details.problems).toHaveLength(1);
  });

  it('created no table for any refused definition', async () => {
    const response = await suite.server.request(
      'GET',
      `/v1/orgs/${suite.org.orgId}/databases/${await badTablesDatabase()}/tables`,
      { token: token() },
    );
    expect(response.status, response.text).toBe(200);
    expect(Page(TableResponse).parse(response.body).data).toEqual([]);
  });

  it('accepts exactly 500 fields', async () => {
    const response = await postTable(Array.from({ length: 500 }, (_, index) => text(`F${index}`)));
    expect(response.status, response.text).toBe(201);
    expect(TableResponse.parse(response.body).fields).toHaveLength(500);
  });

  it('reports every option with its default in the table and in the schema endpoint', async () => {
    const fields: FieldSpec[] = [
      { name: 'text', type: 'text' },
      { name: 'longText', type: 'longText' },
      { name: 'integer', type: 'integer' },
      { name: 'number', type: 'number' },
      { name: 'boolean', type: 'boolean' },
      { name: 'date', type: 'date' },
      { name: 'datetime', type: 'datetime' },
      { name: 'email', type: 'email' },
      { name: 'url', type: 'url' },
      { name: 'select', type: 'select', options: { choices: ['a'] } },
      { name: 'multiSelect', type: 'multiSelect', options: { choices: ['a', 'b'] } },
      { name: 'json', type: 'json' },
      { name: 'autoNumber', type: 'autoNumber' },
      { name: 'partial', type: 'number', options: { scale: 4 } },
    ];
    const table = await createTable(suite.server, suite.org, fields);
    const response = await suite.server.request('GET', `${table.path}/schema`, { token: token() });
    expect(response.status, response.text).toBe(200);
    const schema = TableSchemaResponse.parse(response.body);
    expect(schema).toMatchObject({
      tableId: table.tableId,
      schemaVersion: table.schemaVersion,
      uniqueRules: [],
      foreignKeys: [],
    });
    expect(
      schema.fields.map(({ name, type, required, options, position }) => ({ name, type, required, options, position })),
    ).toEqual(
      [
        { name: 'text', type: 'text', options: { maxLength: 255 } },
        { name: 'longText', type: 'longText', options: { maxLength: 100_000 } },
        { name: 'integer', type: 'integer', options: {} },
        { name: 'number', type: 'number', options: { precision: 15, scale: 2 } },
        { name: 'boolean', type: 'boolean', options: {} },
        { name: 'date', type: 'date', options: {} },
        { name: 'datetime', type: 'datetime', options: {} },
        { name: 'email', type: 'email', options: {} },
        { name: 'url', type: 'url', options: {} },
        { name: 'select', type: 'select', options: { choices: ['a'] } },
        { name: 'multiSelect', type: 'multiSelect', options: { choices: ['a', 'b'] } },
        { name: 'json', type: 'json', options: { maxDepth: 16, maxBytes: 65_536 } },
        { name: 'autoNumber', type: 'autoNumber', options: { start: 1, max: MAX_SAFE } },
        { name: 'partial', type: 'number', options: { precision: 15, scale: 4 } },
      ].map((field, position) => ({ ...field, required: false, position })),
    );
    expect(schema.fields.map((field) => field.id)).toEqual(Object.values(table.fields));
  });
});
