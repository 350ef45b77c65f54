import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH } from '../src/kernel/input-hygiene.ts';
import { Page } from '../src/contracts/pages.ts';
import { RowResponse } from '../src/contracts/rows.ts';
import { expectError } from './helpers/expectations.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { definitionOf, expectProblems, repeat, savedView, viewClient, type Body, type Path } from './helpers/views.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type FieldSpec, type TestTable } from './helpers/workspace.ts';

/**
 * View definitions (spec 2.3, 2.4, §8; issue 4): every shape limit at its boundary and one past it, pathological
 * filters, and injection attempts. test/view-operators.test.ts has every operator on every field type and the
 * property-based tests.
 */
const suite = useServerWithOrg();
const RowPage = Page(RowResponse);
const admin = () => suite.org.adminKey;

const { postView, deleteView, rowIdsThrough } = viewClient(suite);
const nested = (depth: number, inner: unknown): unknown => (depth === 0 ? inner : { and: [nested(depth - 1, inner)] });

// ---------------------------------------------------------------------------------------------------------------
// Shape limits and pathological filters, on a table with 201 fields so that 200 and 201 columns both exist.

const LONG_NAME = 'L'.repeat(64);
let wide: TestTable;
let wideIds: string[];
const textId = (index: number) => wide.fields[`c${String(index).padStart(3, '0')}`]!;

beforeAll(async () => {
  const fields: FieldSpec[] = [
    { name: 'Doc', type: 'json' },
    { name: LONG_NAME, type: 'text', options: { maxLength: 10 } },
    ...Array.from({ length: 199 }, (_item, index) => ({
      name: `c${String(index + 1).padStart(3, '0')}`,
      type: 'text',
      options: { maxLength: 10 },
    })),
  ];
  wide = await createTable(suite.server, suite.org, fields);
  wideIds = Object.values(wide.fields);
  expect(wideIds).toHaveLength(201);
});

const WHERE = ['body', 'definition', 'query', 'where'];
const ORDER_BY = ['body', 'definition', 'query', 'orderBy'];
const isNullOn = (field: () => string) => () => ({ field: field(), op: 'isNull' });
const someText = isNullOn(() => textId(1));
const onDoc = (extra: Body) => () => ({ field: wide.fields.Doc, op: 'pathExists', ...extra });
const withQuery = (query: () => Body) => () => ({ definition: definitionOf(query()) });
const withWhere = (where: () => unknown) => withQuery(() => ({ where: where() }));
const withLayout = (layout: () => Body) => () => ({ definition: definitionOf({}, layout()) });
const orderByItems = (count: number) => () => ({
  orderBy: Array.from({ length: count }, (_item, index) => ({ field: textId(index + 1), direction: 'asc' })),
});

/** [label, request body fields, null when accepted or the exact problem paths]. */
const SHAPE_CASES: [string, () => Body, Path[] | null][] = [
  ['a 1-character name', () => ({ name: 'n' }), null],
  ['a 120-character name', () => ({ name: 'n'.repeat(120) }), null],
  ['an empty name', () => ({ name: '' }), [['body', 'name']]],
  ['a blank name', () => ({ name: '   ' }), [['body', 'name']]],
  ['a 121-character name', () => ({ name: 'n'.repeat(121) }), [['body', 'name']]],
  ['visibility "public"', () => ({ visibility: 'public' }), [['body', 'visibility']]],
  ['columnOrder with 200 ids', withLayout(() => ({ columnOrder: wideIds.slice(0, 200) })), null],
  ['columnOrder with 201 ids', withLayout(() => ({ columnOrder: wideIds })), [['body', 'definition', 'columnOrder']]],
  ['hiddenColumns with 200 ids', withLayout(() => ({ hiddenColumns: wideIds.slice(1) })), null],
  [
    'hiddenColumns with 201 ids',
    withLayout(() => ({ hiddenColumns: wideIds })),
    [['body', 'definition', 'hiddenColumns']],
  ],
  ['frozenColumns 0', withLayout(() => ({ frozenColumns: 0 })), null],
  ['frozenColumns 200', withLayout(() => ({ frozenColumns: 200 })), null],
  ['frozenColumns -1', withLayout(() => ({ frozenColumns: -1 })), [['body', 'definition', 'frozenColumns']]],
  ['frozenColumns 201', withLayout(() => ({ frozenColumns: 201 })), [['body', 'definition', 'frozenColumns']]],
  ['frozenColumns 1.5', withLayout(() => ({ frozenColumns: 1.5 })), [['body', 'definition', 'frozenColumns']]],
  ['widths 40 and 2000', withLayout(() => ({ columnWidths: { [textId(1)]: 40, [textId(2)]: 2000 } })), null],
  [
    '200 widths',
    withLayout(() => ({ columnWidths: Object.fromEntries(wideIds.slice(1).map((id) => [id, 100])) })),
    null,
  ],
  [
    '201 widths',
    withLayout(() => ({ columnWidths: Object.fromEntries(wideIds.map((id) => [id, 100])) })),
    [['body', 'definition', 'columnWidths']],
  ],
  ['width 39.9', withLayout(() => ({ columnWidths: { w: 39.9 } })), [['body', 'definition', 'columnWidths', 'w']]],
  ['width 2001', withLayout(() => ({ columnWidths: { w: 2001 } })), [['body', 'definition', 'columnWidths', 'w']]],
  ['8 orderBy items', withQuery(orderByItems(8)), null],
  ['9 orderBy items', withQuery(orderByItems(9)), [ORDER_BY]],
  ['a 64-character orderBy field', withQuery(() => ({ orderBy: [{ field: LONG_NAME, direction: 'desc' }] })), null],
  [
    'a 65-character orderBy field',
    withQuery(() => ({ orderBy: [{ field: `${LONG_NAME}L`, direction: 'asc' }] })),
    [[...ORDER_BY, 0, 'field']],
  ],
  [
    'an empty orderBy field',
    withQuery(() => ({ orderBy: [{ field: '', direction: 'asc' }] })),
    [[...ORDER_BY, 0, 'field']],
  ],
  [
    'direction "up"',
    withQuery(() => ({ orderBy: [{ field: textId(1), direction: 'up' }] })),
    [[...ORDER_BY, 0, 'direction']],
  ],
  ['a 64-character where field', withWhere(isNullOn(() => LONG_NAME)), null],
  ['a 65-character where field', withWhere(isNullOn(() => `${LONG_NAME}L`)), [[...WHERE, 'field']]],
  ['and with 1 item', withWhere(() => ({ and: [someText()] })), null],
  ['and with 100 items', withWhere(() => ({ and: repeat(100, someText()) })), null],
  ['and with 0 items', withWhere(() => ({ and: [] })), [[...WHERE, 'and']]],
  ['and with 101 items', withWhere(() => ({ and: repeat(101, someText()) })), [[...WHERE, 'and']]],
  ['or with 1 item', withWhere(() => ({ or: [someText()] })), null],
  ['or with 100 items', withWhere(() => ({ or: repeat(100, someText()) })), null],
  ['or with 0 items', withWhere(() => ({ or: [] })), [[...WHERE, 'or']]],
  ['or with 101 items', withWhere(() => ({ or: repeat(101, someText()) })), [[...WHERE, 'or']]],
  ['a 32-item path', withWhere(onDoc({ path: repeat(32, 'k') })), null],
  ['a 33-item path', withWhere(onDoc({ path: repeat(33, 'k') })), [[...WHERE, 'path']]],
  ['a 1024-character path key', withWhere(onDoc({ path: ['k'.repeat(1024)] })), null],
  ['a 1025-character path key', withWhere(onDoc({ path: ['k'.repeat(1025)] })), [[...WHERE, 'path', 0]]],
  ['path index 2147483647', withWhere(onDoc({ path: [2147483647] })), null],
  ['path index 2147483648', withWhere(onDoc({ path: ['k', 2147483648] })), [[...WHERE, 'path', 1]]],
  ['path index -1', withWhere(onDoc({ path: [-1] })), [[...WHERE, 'path', 0]]],
  ['an unknown op', withWhere(() => ({ field: textId(1), op: 'like', value: 'x' })), [[...WHERE, 'op']]],
  [
    'an extra definition property',
    () => ({ definition: { ...definitionOf(), filters: [] } }),
    [['body', 'definition']],
  ],
  ['an extra query property', withQuery(() => ({ limit: 10 })), [['body', 'definition', 'query']]],
  ['an extra leaf property', withWhere(() => ({ ...someText(), negate: true })), [WHERE]],
  ['an extra group property', withWhere(() => ({ and: [someText()], not: true })), [WHERE]],
  [
    'an extra orderBy item property',
    withQuery(() => ({ orderBy: [{ field: textId(1), direction: 'asc', nulls: 'first' }] })),
    [[...ORDER_BY, 0]],
  ],
  ['an extra body property', () => ({ ownerUserId: suite.org.adminUserId }), [['body']]],
  ...['columnOrder', 'columnWidths', 'frozenColumns', 'hiddenColumns', 'query'].map(
    (member): [string, () => Body, Path[]] => [
      `a definition without ${member}`,
      () => ({ definition: { ...definitionOf(), [member]: undefined } }),
      [['body', 'definition', member]],
    ],
  ),
  ['expectedSchemaVersion 0', () => ({ expectedSchemaVersion: 0 }), [['body', 'expectedSchemaVersion']]],
  [
    'expectedSchemaVersion 2147483648',
    () => ({ expectedSchemaVersion: 2147483648 }),
    [['body', 'expectedSchemaVersion']],
  ],
];

describe('definition shape (spec 2.3, 2.4, §8) at each limit and one past it', () => {
  it.each(SHAPE_CASES)('%s', async (_label, body, problems) => {
    const request = body();
    const response = await postView(wide, request);
    if (problems) return expectProblems(response, problems);
    const view = savedView(response);
    if (request.definition) expect(view.definition).toEqual(request.definition);
    if (request.name) expect(view.name).toBe(request.name);
  });

  it('treats expectedSchemaVersion 2147483647 as well-formed but stale (409 SCHEMA_VERSION_CONFLICT)', async () => {
    expectError(await postView(wide, { expectedSchemaVersion: 2147483647 }), 409, 'SCHEMA_VERSION_CONFLICT');
  });

  it('answers a malformed JSON body with 400 BAD_REQUEST', async () => {
    const response = await suite.server.request('POST', `${wide.path}/views`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      rawBody: '{"name": "View", "definition": {',
    });
    expectError(response, 400, 'BAD_REQUEST');
  });
});

describe('pathological filters', () => {
  /** The raw body of a view whose where nests `depth` and-groups, built as text (no recursion on our side). */
  const deepBody = (depth: number) =>
    `{"expectedSchemaVersion":${wide.schemaVersion},"name":"Deep","visibility":"personal",` +
    `"definition":{"columnOrder":[],"columnWidths":{},"frozenColumns":0,"hiddenColumns":[],"query":{"where":` +
    `${'{"and":['.repeat(depth)}${JSON.stringify(someText())}${']}'.repeat(depth)}}}}`;
  const postRaw = (rawBody: string) =>
    suite.server.request('POST', `${wide.path}/views`, { token: admin(), idempotencyKey: idempotencyKey(), rawBody });
  const seventeenthLevel = [...WHERE, ...Array.from({ length: 16 }, () => ['and', 0]).flat()];

  it('accepts and/or nested 16 levels and refuses 17, naming the 17th group', async () => {
    savedView(await postView(wide, withWhere(() => nested(16, someText()))()));
    expectProblems(await postView(wide, withWhere(() => nested(17, someText()))()), [seventeenthLevel]);
  });

  it('accepts 500 conditions and refuses 501', async () => {
    const groups = repeat(5, { or: repeat(100, someText()) });
    savedView(await postView(wide, withWhere(() => ({ and: groups }))()));
    expectProblems(await postView(wide, withWhere(() => ({ and: [...groups, someText()] }))()), [WHERE]);
  });

  it('refuses a 100 000-level filter that fits the body limit as a body nested too deep, not a stack overflow', async () => {
    const body = deepBody(100_000);
    expect(Buffer.byteLength(body)).toBeLessThan(suite.server.config.BODY_LIMIT_BYTES);
    const response = await postRaw(body);
    expectError(response, 400, 'BAD_REQUEST');
    expect(response.body.error.details).toEqual({ maxDepth: MAX_JSON_DEPTH });
  });

  it('refuses a 200 000-level filter, over the body limit, with 413 PAYLOAD_TOO_LARGE', async () => {
    const body = deepBody(200_000);
    expect(Buffer.byteLength(body)).toBeGreaterThan(suite.server.config.BODY_LIMIT_BYTES);
    expectError(await postRaw(body), 413, 'PAYLOAD_TOO_LARGE');
  });

  it('refuses a value nested 100 000 levels as a body nested too deep', async () => {
    const value = `${'['.repeat(100_000)}1${']'.repeat(100_000)}`;
    const leaf = `{"field":"${wide.fields.Doc}","op":"jsonContains","value":${value}}`;
    const response = await postRaw(deepBody(0).replace(JSON.stringify(someText()), leaf));
    expectError(response, 400, 'BAD_REQUEST');
    expect(response.body.error.details).toEqual({ maxDepth: MAX_JSON_DEPTH });
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Injection attempts: every string reaches SQL as a bound parameter, and LIKE wildcards are matched literally.

const INJECTED_NAME = 'x"; DROP TABLE users; --';
const NOTES = [
  'x"; DROP TABLE users; --',
  "'; SELECT pg_sleep(10); --",
  '100% sure',
  'snake_case',
  'back\\slash',
  'plain text',
  'it\'s "quoted"',
];

describe('injection attempts in field names and values', () => {
  let notes: TestTable;
  let noteIds: string[];
  let usersBefore: number;

  beforeAll(async () => {
    notes = await createTable(suite.server, suite.org, [
      { name: 'Note', type: 'text', options: { maxLength: 100 } },
      { name: INJECTED_NAME, type: 'text', options: { maxLength: 10 } },
    ]);
    noteIds = [];
    for (const [index, note] of NOTES.entries()) {
      const response = await createRow(suite.server, admin(), notes, { Note: note, [INJECTED_NAME]: `n${index}` });
      expect(response.status, response.text).toBe(201);
      noteIds.push(response.body.row.id);
    }
    usersBefore = await suite.server.prisma.user.count();
  });

  /** The notes (by index) a view with this where selects. */
  async function notesMatching(where: unknown, name = 'View'): Promise<number[]> {
    const view = savedView(await postView(notes, { name, definition: definitionOf({ where }) }));
    expect(view.name).toBe(name);
    const ids = await rowIdsThrough(notes, view);
    await deleteView(notes, view);
    return ids.map((id) => noteIds.indexOf(id)).sort((left, right) => left - right);
  }
  const note = (op: string, value: unknown) => ({ field: 'Note', op, value });

  it.each([
    ['contains', INJECTED_NAME, [0]],
    ['contains', "'; SELECT pg_sleep(10); --", [1]],
    ['contains', '%', [2]],
    ['contains', '_', [1, 3]], // pg_sleep has one too
    ['contains', '\\', [4]],
    ['contains', "'", [1, 6]],
    ['contains', '"', [0, 6]],
    ['contains', '%_\\', []],
    ['prefix', "'", [1]],
    ['prefix', '%', []],
    ['iContains', 'drop TABLE', [0]],
    ['iContains', '_CASE', [3]],
    ['iContains', '\\S', [4]],
    ['eq', 'back\\slash', [4]],
    ['eq', 'it\'s "quoted"', [6]],
    ['in', ["'; SELECT pg_sleep(10); --", '%'], [1]],
  ])('Note %s %j (also the view name) selects exactly the notes it matches literally', async (op, value, expected) => {
    // Had pg_sleep(10) run, the read would have answered 503 QUERY_TIMEOUT (the 5 s statement budget), not 200.
    expect(suite.server.config.QUERY_TIMEOUT_MS).toBeLessThan(10_000);
    expect(await notesMatching(note(op, value), String(value).slice(0, 120))).toEqual(expected);
  });

  it('resolves a field named like an injection by its exact name, in where and orderBy', async () => {
    const view = savedView(
      await postView(notes, {
        definition: definitionOf({
          where: { field: INJECTED_NAME, op: 'in', value: ['n0', 'n2'] },
          orderBy: [{ field: INJECTED_NAME, direction: 'desc' }],
        }),
      }),
    );
    expect(await rowIdsThrough(notes, view)).toEqual([noteIds[2], noteIds[0]]);
    await deleteView(notes, view);
  });

  it('refuses an injection as an unknown field reference at its path', async () => {
    const response = await postView(notes, {
      definition: definitionOf({
        where: { field: '"; DROP TABLE users; --', op: 'isNull' },
        orderBy: [{ field: "') --", direction: 'asc' }],
      }),
    });
    expectProblems(response, [
      ['definition', 'query', 'where', 'field'],
      ['definition', 'query', 'orderBy', 0, 'field'],
    ]);
  });

  it('leaves the catalog and the rows intact', async () => {
    expect(await suite.server.prisma.user.count()).toBe(usersBefore);
    const schema = await suite.server.request('GET', `${notes.path}/schema`, { token: admin() });
    expect(schema.status, schema.text).toBe(200);
    expect(schema.body.fields.map((field: { name: string }) => field.name)).toEqual(['Note', INJECTED_NAME]);
    const rows = await suite.server.request('GET', `${notes.path}/rows?limit=100`, { token: admin() });
    expect(RowPage.parse(rows.body).data.map((row) => row.values[notes.fields.Note!])).toEqual(NOTES);
  });
});
