import { beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/kernel/ids.ts';
import { Page } from '../src/contracts/pages.ts';
import { RowResponse } from '../src/contracts/rows.ts';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { addMember, createOrg, createTeamKey, idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createDatabase, createRow, createTable, type TestTable } from './helpers/workspace.ts';

/** Reading rows (filters, order, keyset pages, cursors) and who may read and write them. */
const suite = useServerWithOrg();

const RowPage = Page(RowResponse);
type Row = ReturnType<typeof RowResponse.parse>;

const admin = () => suite.org.adminKey;

/** Five rows created in this order; Score has ties and NULLs so that ordering must break them by row id. */
const SCORES: Record<string, number | null> = { a: 3, b: null, c: 1, d: 3, e: null };

let table: TestTable;
let rows: Row[];

beforeAll(async () => {
  table = await createTable(suite.server, suite.org, [
    { name: 'Name', type: 'text', options: { maxLength: 40 } },
    { name: 'Score', type: 'number' },
  ]);
  rows = [];
  for (const [name, score] of Object.entries(SCORES)) {
    const response = await createRow(suite.server, admin(), table, { Name: name, Score: score });
    expect(response.status, response.text).toBe(201);
    rows.push(response.body.row);
  }
});

const nameOf = (row: Row) => row.values[table.fields.Name!];
const query = (parameters: Record<string, string | number>) =>
  `?${Object.entries(parameters)
    .map(([key, value]) => `${key}=${encodeURIComponent(String(value))}`)
    .join('&')}`;

function listRows(parameters: Record<string, string | number> = {}, token = admin()) {
  return suite.server.request('GET', `${table.path}/rows${query(parameters)}`, { token });
}

async function page(parameters: Record<string, string | number> = {}) {
  const response = await listRows(parameters);
  expect(response.status, response.text).toBe(200);
  return RowPage.parse(response.body);
}

/** Follows nextCursor from the first page to the last, checking the page contract on the way. */
async function walk(parameters: Record<string, string | number>): Promise<Row[]> {
  const seen: Row[] = [];
  let cursor: string | null = null;
  do {
    const current = await page({ ...parameters, ...(cursor ? { cursor } : {}) });
    expect(current.data.length).toBeLessThanOrEqual(Number(parameters.limit));
    expect(current.hasMore).toBe(current.nextCursor !== null);
    seen.push(...current.data);
    cursor = current.nextCursor;
  } while (cursor);
  return seen;
}

describe('GET …/rows', () => {
  it('lists every row in creation (row id) order by default, shaped as spec 2.6 rows', async () => {
    const all = await page();
    expect(all).toEqual({ data: rows, nextCursor: null, hasMore: false });
    expect(all.data.map(nameOf)).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it.each(['0', '101', 'abc'])('answers 422 VALIDATION_FAILED for limit=%s', async (limit) => {
    const response = await listRows({ limit });
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [['query', 'limit']]);
  });

  it('pages with limit=2 over five rows, visiting each exactly once', async () => {
    expect((await walk({ limit: 2 })).map(nameOf)).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('filters with a JSON where naming the field by name or by id', async () => {
    const byName = await page({ where: JSON.stringify({ field: 'Name', op: 'eq', value: 'b' }) });
    expect(byName.data).toEqual([rows[1]]);
    const byId = await page({ where: JSON.stringify({ field: table.fields.Score, op: 'eq', value: 3 }) });
    expect(byId.data.map(nameOf)).toEqual(['a', 'd']);
  });

  it('orders by a number with NULLs first descending and last ascending, ties by row id, across limit=1 pages', async () => {
    const desc = await walk({ limit: 1, orderBy: JSON.stringify([{ field: 'Score', direction: 'desc' }]) });
    expect(desc.map(nameOf)).toEqual(['b', 'e', 'a', 'd', 'c']);
    const asc = await walk({ limit: 1, orderBy: JSON.stringify([{ field: table.fields.Score, direction: 'asc' }]) });
    expect(asc.map(nameOf)).toEqual(['c', 'a', 'd', 'b', 'e']);
  });

  it('answers 422 at [query, where] when where is not JSON', async () => {
    const response = await listRows({ where: '{"field":' });
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [['query', 'where']]);
  });

  it('answers 422 at [where, field] when where names no field of the table', async () => {
    const response = await listRows({ where: JSON.stringify({ field: 'Nope', op: 'eq', value: 1 }) });
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [['where', 'field']]);
  });

  it('answers 400 CURSOR_INVALID for a cursor minted under another filter', async () => {
    const first = await page({ limit: 1, where: JSON.stringify({ field: 'Score', op: 'eq', value: 3 }) });
    expect(first.nextCursor).not.toBeNull();
    const other = await listRows({
      limit: 1,
      cursor: first.nextCursor!,
      where: JSON.stringify({ field: 'Score', op: 'isNull' }),
    });
    expectError(other, 400, 'CURSOR_INVALID');
  });

  it('answers 400 CURSOR_INVALID for an altered cursor', async () => {
    const { nextCursor } = await page({ limit: 2 });
    // The first character always carries payload bits, so changing it changes the signed body.
    const tampered = `${nextCursor![0] === 'e' ? 'f' : 'e'}${nextCursor!.slice(1)}`;
    expectError(await listRows({ limit: 2, cursor: tampered }), 400, 'CURSOR_INVALID');
  });
});

describe('authority over rows', () => {
  // Its own table, so that the rows these tests write never show up in the listings above.
  let guarded: TestTable;
  let existing: Row;
  beforeAll(async () => {
    guarded = await createTable(suite.server, suite.org, [
      { name: 'Name', type: 'text', options: { maxLength: 40 } },
      { name: 'Score', type: 'number' },
    ]);
    existing = await scratchRow();
  });

  const rowUrl = (rowId: string) => `${guarded.path}/rows/${rowId}`;
  const write = (token: string, method: string, path: string, body: unknown) =>
    suite.server.request(method, path, { token, idempotencyKey: idempotencyKey(), body });

  async function scratchRow(): Promise<Row> {
    const response = await createRow(suite.server, admin(), guarded, { Name: 'scratch' });
    expect(response.status, response.text).toBe(201);
    return response.body.row;
  }

  /** Every write a row-writer could make, each expected to be refused with 403 FORBIDDEN; nothing changes. */
  async function expectWritesForbidden(token: string) {
    const row = await scratchRow();
    const refused = [
      await write(token, 'POST', `${guarded.path}/rows`, {
        expectedSchemaVersion: guarded.schemaVersion,
        values: { Name: 'x' },
      }),
      await write(token, 'PATCH', rowUrl(row.id), { expectedVersion: '1', values: { Name: 'x' } }),
      await write(token, 'DELETE', rowUrl(row.id), { expectedVersion: '1' }),
    ];
    for (const response of refused) expectError(response, 403, 'FORBIDDEN');
    expect((await suite.server.request('GET', rowUrl(row.id), { token: admin() })).body).toEqual(row);
  }

  it('lets a viewer read rows, a row, its history and the schema, but not write', async () => {
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    for (const path of [
      `${guarded.path}/rows`,
      rowUrl(existing.id),
      `${rowUrl(existing.id)}/history`,
      `${guarded.path}/schema`,
    ]) {
      const response = await suite.server.request('GET', path, { token: viewer.apiKey });
      expect(response.status, `${path}: ${response.text}`).toBe(200);
    }
    await expectWritesForbidden(viewer.apiKey);
  });

  it('refuses writes through a read-only team key', async () => {
    const key = await createTeamKey(suite.server.prisma, suite.org, 'read');
    expect((await listRows({}, key)).status).toBe(200);
    await expectWritesForbidden(key);
  });

  it('lets a member create, change and delete rows', async () => {
    const member = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    const created = await write(member.apiKey, 'POST', `${guarded.path}/rows`, {
      expectedSchemaVersion: guarded.schemaVersion,
      values: { Name: 'm' },
    });
    expect(created.status, created.text).toBe(201);
    const changed = await write(member.apiKey, 'PATCH', rowUrl(created.body.row.id), {
      expectedVersion: '1',
      values: { Score: 7 },
    });
    expect(changed.status, changed.text).toBe(200);
    const deleted = await write(member.apiKey, 'DELETE', rowUrl(created.body.row.id), { expectedVersion: '2' });
    expect(deleted.status, deleted.text).toBe(200);
  });

  it('answers 404 RESOURCE_NOT_FOUND to another org’s admin using this org’s ids, for reads and writes', async () => {
    const stranger = await createOrg(suite.server.prisma);
    const row = await scratchRow();
    const responses = [
      await suite.server.request('GET', `${guarded.path}/rows`, { token: stranger.adminKey }),
      await suite.server.request('GET', rowUrl(row.id), { token: stranger.adminKey }),
      await suite.server.request('GET', `${rowUrl(row.id)}/history`, { token: stranger.adminKey }),
      await write(stranger.adminKey, 'POST', `${guarded.path}/rows`, {
        expectedSchemaVersion: guarded.schemaVersion,
        values: { Name: 'x' },
      }),
      await write(stranger.adminKey, 'PATCH', rowUrl(row.id), { expectedVersion: '1', values: { Name: 'x' } }),
      await write(stranger.adminKey, 'DELETE', rowUrl(row.id), { expectedVersion: '1' }),
    ];
    for (const response of responses) expectError(response, 404, 'RESOURCE_NOT_FOUND');
    expect((await suite.server.request('GET', rowUrl(row.id), { token: admin() })).body).toEqual(row);
  });

  it('answers 404 RESOURCE_NOT_FOUND for an unknown table and for a table addressed under another database', async () => {
    const unknownTable = `/v1/orgs/${suite.org.orgId}/databases/${guarded.databaseId}/tables/${newId()}/rows`;
    expectError(await suite.server.request('GET', unknownTable, { token: admin() }), 404, 'RESOURCE_NOT_FOUND');
    expectError(
      await write(admin(), 'POST', unknownTable, { expectedSchemaVersion: 1, values: { Name: 'x' } }),
      404,
      'RESOURCE_NOT_FOUND',
    );

    const otherDatabase = await createDatabase(suite.server, suite.org);
    const misplaced = `/v1/orgs/${suite.org.orgId}/databases/${otherDatabase}/tables/${guarded.tableId}/rows`;
    expectError(await suite.server.request('GET', misplaced, { token: admin() }), 404, 'RESOURCE_NOT_FOUND');
    expectError(
      await suite.server.request('GET', `${misplaced}/${existing.id}`, { token: admin() }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(
      await write(admin(), 'POST', misplaced, { expectedSchemaVersion: guarded.schemaVersion, values: { Name: 'x' } }),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });
});

describe('ordering by a long text', () => {
  const long = (letter: string) => letter.repeat(1_500);

  it('keeps cursors short (the position is read back from the row) and pages in order', async () => {
    const notes = await createTable(suite.server, suite.org, [
      { name: 'Note', type: 'text', options: { maxLength: 2_000 } },
    ]);
    for (const letter of ['c', 'a', 'b']) {
      expect((await createRow(suite.server, admin(), notes, { Note: long(letter) })).status).toBe(201);
    }
    const orderBy = encodeURIComponent(JSON.stringify([{ field: 'Note', direction: 'asc' }]));
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const response = await suite.server.request(
        'GET',
        `${notes.path}/rows?limit=1&orderBy=${orderBy}${cursor ? `&cursor=${cursor}` : ''}`,
        { token: admin() },
      );
      expect(response.status, response.text).toBe(200);
      const current = RowPage.parse(response.body);
      seen.push(...current.data.map((row) => String(row.values[notes.fields.Note!]).slice(0, 1)));
      cursor = current.nextCursor;
      if (cursor) expect(cursor.length).toBeLessThanOrEqual(200);
    } while (cursor);
    expect(seen).toEqual(['a', 'b', 'c']);
  });

  it('answers every field type in a page exactly as a single-row read does, on a table wider than 50 fields', async () => {
    const choices = ['Alpha', 'Beta, "Inc"', '[x]'];
    const wide = await createTable(suite.server, suite.org, [
      { name: 'Text', type: 'text' },
      { name: 'Long', type: 'longText' },
      { name: 'Int', type: 'integer' },
      { name: 'Num', type: 'number', options: { precision: 15, scale: 3 } },
      { name: 'Bool', type: 'boolean' },
      { name: 'Day', type: 'date' },
      { name: 'At', type: 'datetime' },
      { name: 'Mail', type: 'email' },
      { name: 'Link', type: 'url' },
      { name: 'Pick', type: 'select', options: { choices } },
      { name: 'Picks', type: 'multiSelect', options: { choices } },
      { name: 'Doc', type: 'json' },
      { name: 'Seq', type: 'autoNumber' },
      ...Array.from({ length: 50 }, (_, index) => ({ name: `Extra ${index}`, type: 'integer' })),
    ]);
    const values = {
      Text: 'q"uote \\ back\nslash \u0007 \u2028 😀 ü',
      Long: 'line 1\r\nline 2\t',
      Int: -9_007_199_254_740_991,
      Num: 123_456_789_012.345,
      Bool: false,
      Day: '2024-02-29',
      At: '2024-02-29T13:45:06.789Z',
      Mail: 'ada@example.com',
      Link: 'https://example.com/a?b="c"',
      Pick: 'Beta, "Inc"',
      Picks: ['[x]', 'Alpha'],
      Doc: { b: [1, 2.5e-7, { c: 'x\ty' }, null], a: 'é\n', n: 1e21 },
      'Extra 49': 7,
    };
    const created = await createRow(suite.server, admin(), wide, values);
    expect(created.status, created.text).toBe(201);
    await createRow(suite.server, admin(), wide, {});
    const single = await suite.server.request('GET', `${wide.path}/rows/${created.body.row.id}`, { token: admin() });
    expect(single.status, single.text).toBe(200);
    const listed = await suite.server.request('GET', `${wide.path}/rows?limit=1`, { token: admin() });
    expect(listed.status, listed.text).toBe(200);
    expect(JSON.stringify(listed.body.data[0])).toBe(JSON.stringify(single.body));
    expect(listed.body.data[0].values[wide.fields['Extra 48']!]).toBeNull();
    const empty = await suite.server.request('GET', `${wide.path}/rows?limit=1&cursor=${listed.body.nextCursor}`, {
      token: admin(),
    });
    expect(Object.values(empty.body.data[0].values).filter((value) => value !== null)).toEqual([2]);
  });

  it('answers 400 CURSOR_INVALID when the row a short cursor points at was deleted', async () => {
    const notes = await createTable(suite.server, suite.org, [
      { name: 'Note', type: 'text', options: { maxLength: 2_000 } },
    ]);
    const first = await createRow(suite.server, admin(), notes, { Note: long('a') });
    await createRow(suite.server, admin(), notes, { Note: long('b') });
    const orderBy = encodeURIComponent(JSON.stringify([{ field: 'Note', direction: 'asc' }]));
    const response = await suite.server.request('GET', `${notes.path}/rows?limit=1&orderBy=${orderBy}`, {
      token: admin(),
    });
    const { nextCursor } = RowPage.parse(response.body);
    const removed = await suite.server.request('DELETE', `${notes.path}/rows/${first.body.row.id}`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1' },
    });
    expect(removed.status, removed.text).toBe(200);
    expectError(
      await suite.server.request('GET', `${notes.path}/rows?limit=1&orderBy=${orderBy}&cursor=${nextCursor}`, {
        token: admin(),
      }),
      400,
      'CURSOR_INVALID',
    );
  });
});
