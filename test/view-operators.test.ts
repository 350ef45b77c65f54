import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/kernel/ids.ts';
import { SavedViewResponse } from '../src/contracts/views.ts';
import { expectError } from './helpers/expectations.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { definitionOf, expectProblems, repeat, savedView, viewClient, type Body, type Path } from './helpers/views.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type FieldSpec, type TestTable } from './helpers/workspace.ts';

/**
 * View filters on a table with one field of each type (issue 4): every operator on every field type it accepts,
 * through rows?viewId, the pairs it refuses, and property-based tests: random valid definitions round-trip
 * unchanged, random invalid ones get the right 4xx. test/view-definitions.test.ts has the shape limits.
 */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;

const { postView, deleteView, rowIdsThrough } = viewClient(suite);

// ---------------------------------------------------------------------------------------------------------------
// Every operator on every field type it accepts (docs/decisions/filters.md), through rows?viewId.

const TYPED_FIELDS: FieldSpec[] = [
  { name: 'Text', type: 'text', options: { maxLength: 100 } },
  { name: 'Long', type: 'longText' },
  { name: 'Int', type: 'integer' },
  { name: 'Num', type: 'number', options: { precision: 10, scale: 2 } },
  { name: 'Flag', type: 'boolean' },
  { name: 'Day', type: 'date' },
  { name: 'At', type: 'datetime' },
  { name: 'Mail', type: 'email' },
  { name: 'Link', type: 'url' },
  { name: 'Status', type: 'select', options: { choices: ['open', 'done', 'hold'] } },
  { name: 'Tags', type: 'multiSelect', options: { choices: ['red', 'green', 'blue'] } },
  { name: 'Doc', type: 'json' },
  { name: 'Seq', type: 'autoNumber' },
];

/** Rows a..f, created in this order (so Seq is 1..6). Text is lower-case so that ordering agrees in any collation. */
const TYPED_ROWS: Record<string, Body> = {
  a: {
    Text: 'apple',
    Long: 'alpha beta',
    Int: 1,
    Num: 1.5,
    Flag: true,
    Day: '2024-01-01',
    At: '2024-01-01T00:00:00.000Z',
    Mail: 'ann@example.com',
    Link: 'https://a.example.com/',
    Status: 'open',
    Tags: ['red'],
    Doc: { k: 1, tags: ['x', 'y'] },
  },
  b: {
    Text: 'banana',
    Long: 'beta gamma',
    Int: 2,
    Num: 2.25,
    Flag: false,
    Day: '2024-02-01',
    At: '2024-02-01T12:30:00.000Z',
    Mail: 'bob@example.com',
    Link: 'https://b.example.com/docs',
    Status: 'done',
    Tags: ['red', 'green'],
    Doc: { k: 2, n: null },
  },
  c: {
    Text: 'cherry',
    Long: 'gamma',
    Int: 3,
    Num: -3,
    Flag: true,
    Day: '2024-03-01',
    At: '2024-03-01T23:59:59.999Z',
    Mail: 'cy@test.org',
    Link: 'http://c.test.org/',
    Status: 'hold',
    Tags: ['blue'],
    Doc: [1, 2, 3],
  },
  d: {
    Text: 'apricot',
    Int: -4,
    Num: 0,
    Flag: false,
    Day: '2023-12-31',
    At: '2023-12-31T23:59:59.999Z',
    Mail: 'dee@test.org',
    Link: 'https://d.example.org/',
    Status: 'open',
    Tags: [],
    Doc: 'str',
  },
  e: {},
  f: {
    Text: 'date',
    Long: 'gamma ray',
    Int: 100,
    Num: 100.99,
    Day: '2024-02-29',
    At: '2024-02-29T08:00:00.000Z',
    Link: 'https://f.example.com/a_b',
    Tags: ['green', 'blue'],
    Doc: { k: 1, deep: { a: [1, { b: true }] } },
  },
};

const ORDERED = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'between', 'in', 'isNull', 'isNotNull'];
const TEXTUAL = [...ORDERED, 'prefix', 'contains', 'iContains'];
/** The operator × type table of docs/decisions/filters.md, per field of TYPED_FIELDS. */
const ACCEPTED: Record<string, string[]> = {
  Text: TEXTUAL,
  Long: TEXTUAL,
  Mail: TEXTUAL,
  Link: TEXTUAL,
  Status: TEXTUAL,
  Int: ORDERED,
  Num: ORDERED,
  Seq: ORDERED,
  Day: ORDERED,
  At: ORDERED,
  Flag: ['eq', 'ne', 'in', 'isNull', 'isNotNull'],
  Tags: ['contains', 'in', 'isNull', 'isNotNull'],
  Doc: ['isNull', 'isNotNull', 'pathExists', 'pathEq', 'jsonContains'],
};
const ALL_OPS = [...TEXTUAL, 'pathExists', 'pathEq', 'jsonContains'];

/** [op, value and path, the letters of the rows selected]. */
type OperatorCase = [op: string, operand: Body, rows: string];
const v = (value: unknown): Body => ({ value });
const AT = {
  a: '2024-01-01T00:00:00.000Z',
  b: '2024-02-01T12:30:00.000Z',
  c: '2024-03-01T23:59:59.999Z',
  d: '2023-12-31T23:59:59.999Z',
  f: '2024-02-29T08:00:00.000Z',
};
const OPERATOR_CASES: Record<string, OperatorCase[]> = {
  Text: [
    ['eq', v('apple'), 'a'],
    ['ne', v('apple'), 'bcdef'],
    ['lt', v('b'), 'ad'],
    ['lte', v('banana'), 'abd'],
    ['gt', v('cherry'), 'f'],
    ['gte', v('cherry'), 'cf'],
    ['between', v(['b', 'd']), 'bc'],
    ['in', v(['apple', 'date', 'zzz']), 'af'],
    ['isNull', {}, 'e'],
    ['isNotNull', {}, 'abcdf'],
    ['prefix', v('ap'), 'ad'],
    ['contains', v('an'), 'b'],
    ['contains', v('AN'), ''],
    ['iContains', v('AP'), 'ad'],
  ],
  Long: [
    ['eq', v('gamma'), 'c'],
    ['ne', v('gamma'), 'abdef'],
    ['lt', v('beta'), 'a'],
    ['lte', v('beta gamma'), 'ab'],
    ['gt', v('gamma'), 'f'],
    ['gte', v('gamma'), 'cf'],
    ['between', v(['b', 'gamma']), 'bc'],
    ['in', v(['gamma', 'alpha']), 'c'],
    ['isNull', {}, 'de'],
    ['isNotNull', {}, 'abcf'],
    ['prefix', v('gamma'), 'cf'],
    ['contains', v('beta'), 'ab'],
    ['iContains', v('GAMMA R'), 'f'],
  ],
  Int: [
    ['eq', v(2), 'b'],
    ['ne', v(2), 'acdef'],
    ['lt', v(1), 'd'],
    ['lte', v(1), 'ad'],
    ['gt', v(3), 'f'],
    ['gt', v(1.5), 'bcf'],
    ['gte', v(3), 'cf'],
    ['between', v([1, 3]), 'abc'],
    ['in', v([1, 100, 7]), 'af'],
    ['isNull', {}, 'e'],
    ['isNotNull', {}, 'abcdf'],
  ],
  Num: [
    ['eq', v(2.25), 'b'],
    ['ne', v(0), 'abcef'],
    ['lt', v(0), 'c'],
    ['lte', v(0), 'cd'],
    ['gt', v(2.25), 'f'],
    ['gte', v(2.25), 'bf'],
    ['between', v([0, 2.25]), 'abd'],
    ['in', v([1.5, -3]), 'ac'],
    ['isNull', {}, 'e'],
    ['isNotNull', {}, 'abcdf'],
  ],
  Flag: [
    ['eq', v(true), 'ac'],
    ['ne', v(true), 'bdef'],
    ['in', v([false]), 'bd'],
    ['isNull', {}, 'ef'],
    ['isNotNull', {}, 'abcd'],
  ],
  Day: [
    ['eq', v('2024-02-29'), 'f'],
    ['ne', v('2024-01-01'), 'bcdef'],
    ['lt', v('2024-01-01'), 'd'],
    ['lte', v('2024-01-01'), 'ad'],
    ['gt', v('2024-02-01'), 'cf'],
    ['gte', v('2024-02-01'), 'bcf'],
    ['between', v(['2024-01-01', '2024-02-01']), 'ab'],
    ['in', v(['2023-12-31', '2024-03-01']), 'cd'],
    ['isNull', {}, 'e'],
    ['isNotNull', {}, 'abcdf'],
  ],
  At: [
    ['eq', v(AT.b), 'b'],
    ['ne', v(AT.b), 'acdef'],
    ['lt', v(AT.a), 'd'],
    ['lte', v(AT.a), 'ad'],
    ['gt', v(AT.f), 'c'],
    ['gte', v(AT.f), 'cf'],
    ['between', v([AT.d, AT.a]), 'ad'],
    ['between', v([AT.d, AT.d]), 'd'],
    ['in', v([AT.a, AT.c]), 'ac'],
    ['isNull', {}, 'e'],
    ['isNotNull', {}, 'abcdf'],
  ],
  Mail: [
    ['eq', v('cy@test.org'), 'c'],
    ['ne', v('cy@test.org'), 'abdef'],
    ['lt', v('b'), 'a'],
    ['lte', v('bob@example.com'), 'ab'],
    ['gt', v('c'), 'cd'],
    ['gte', v('cy@test.org'), 'cd'],
    ['between', v(['b', 'd']), 'bc'],
    ['in', v(['ann@example.com', 'dee@test.org']), 'ad'],
    ['isNull', {}, 'ef'],
    ['isNotNull', {}, 'abcd'],
    ['prefix', v('bob@'), 'b'],
    ['contains', v('@test.'), 'cd'],
    ['iContains', v('EXAMPLE'), 'ab'],
  ],
  Link: [
    ['eq', v('https://a.example.com/'), 'a'],
    ['ne', v('https://a.example.com/'), 'bcdef'],
    ['lt', v('https://b'), 'ac'],
    ['lte', v('https://b.example.com/docs'), 'abc'],
    ['gt', v('https://b.example.com/docs'), 'df'],
    ['gte', v('https://d'), 'df'],
    ['between', v(['https://a', 'https://c']), 'ab'],
    ['in', v(['http://c.test.org/', 'https://nope.example/']), 'c'],
    ['isNull', {}, 'e'],
    ['isNotNull', {}, 'abcdf'],
    ['prefix', v('https://'), 'abdf'],
    ['contains', v('_'), 'f'],
    ['iContains', v('EXAMPLE.ORG'), 'd'],
  ],
  Status: [
    ['eq', v('open'), 'ad'],
    ['ne', v('open'), 'bcef'],
    ['lt', v('hold'), 'b'],
    ['lte', v('hold'), 'bc'],
    ['gt', v('hold'), 'ad'],
    ['gte', v('hold'), 'acd'],
    ['between', v(['done', 'hold']), 'bc'],
    ['in', v(['done', 'hold']), 'bc'],
    ['isNull', {}, 'ef'],
    ['isNotNull', {}, 'abcd'],
    ['prefix', v('ho'), 'c'],
    ['contains', v('pe'), 'ad'],
    ['iContains', v('ON'), 'b'],
  ],
  Tags: [
    ['contains', v('red'), 'ab'],
    ['in', v(['green', 'blue']), 'bcf'],
    ['isNull', {}, 'de'],
    ['isNotNull', {}, 'abcf'],
  ],
  Doc: [
    ['isNull', {}, 'e'],
    ['isNotNull', {}, 'abcdf'],
    ['pathExists', { path: ['k'] }, 'abf'],
    ['pathExists', { path: ['n'] }, 'b'],
    ['pathExists', { path: [0] }, 'c'],
    ['pathExists', { path: ['deep', 'a', 1, 'b'] }, 'f'],
    ['pathEq', { path: ['k'], value: 1 }, 'af'],
    ['pathEq', { path: ['n'], value: null }, 'b'],
    ['pathEq', { path: ['deep', 'a', 1], value: { b: true } }, 'f'],
    ['jsonContains', v({ k: 1 }), 'af'],
    ['jsonContains', v([2]), 'c'],
    ['jsonContains', { path: ['tags'], value: ['y'] }, 'a'],
    ['jsonContains', v('str'), 'd'],
  ],
  Seq: [
    ['eq', v(3), 'c'],
    ['ne', v(3), 'abdef'],
    ['lt', v(2), 'a'],
    ['lte', v(2), 'ab'],
    ['gt', v(5), 'f'],
    ['gte', v(5), 'ef'],
    ['between', v([2, 4]), 'bcd'],
    ['in', v([1, 6]), 'af'],
    ['isNull', {}, ''],
    ['isNotNull', {}, 'abcdef'],
  ],
};

let typed: TestTable;
let letterOf: Map<string, string>;

beforeAll(async () => {
  typed = await createTable(suite.server, suite.org, TYPED_FIELDS);
  letterOf = new Map();
  for (const [letter, values] of Object.entries(TYPED_ROWS)) {
    const response = await createRow(suite.server, admin(), typed, values);
    expect(response.status, response.text).toBe(201);
    letterOf.set(response.body.row.id, letter);
    expect(response.body.row.values[typed.fields.Seq!]).toBe(letterOf.size);
  }
});

describe('every operator on every field type, through rows?viewId', () => {
  it('covers every accepted (type, operator) pair', () => {
    for (const [field, ops] of Object.entries(ACCEPTED)) {
      expect(new Set(OPERATOR_CASES[field]!.map(([op]) => op)), field).toEqual(new Set(ops));
    }
  });

  it.each(TYPED_FIELDS.map((field) => [field.type, field.name]))(
    '%s: each operator selects exactly the expected rows',
    async (_type, field) => {
      const cases = OPERATOR_CASES[field]!;
      const selected = await Promise.all(
        cases.map(async ([op, operand], index) => {
          // Alternating scopes keeps each under its 100-view capacity without deleting in between.
          const visibility = index % 2 === 0 ? 'personal' : 'shared';
          const view = savedView(
            await postView(typed, {
              visibility,
              definition: definitionOf({ where: { field: typed.fields[field], op, ...operand } }),
            }),
          );
          return (await rowIdsThrough(typed, view))
            .map((id) => letterOf.get(id))
            .sort()
            .join('');
        }),
      );
      expect(
        Object.fromEntries(cases.map(([op, operand], index) => [`${op} ${JSON.stringify(operand)}`, selected[index]])),
      ).toEqual(Object.fromEntries(cases.map(([op, operand, rows]) => [`${op} ${JSON.stringify(operand)}`, rows])));
    },
  );

  it('refuses at create every operator a field type does not take, at the op', async () => {
    const refused = TYPED_FIELDS.flatMap(({ name }) =>
      ALL_OPS.filter((op) => !ACCEPTED[name]!.includes(op)).map((op) => [name, op]),
    );
    expect(refused).toHaveLength(13 * 16 - 129);
    const unexpected = (
      await Promise.all(
        refused.map(async ([field, op]) => {
          const response = await postView(typed, {
            definition: definitionOf({ where: { field: typed.fields[field!], op, value: 1 } }),
          });
          const paths = response.body?.error?.details?.problems?.map((problem: { path: Path }) =>
            problem.path.join('.'),
          );
          return response.status === 422 && JSON.stringify(paths) === '["definition.query.where.op"]'
            ? []
            : [`${field} ${op}: ${response.status} ${response.text}`];
        }),
      )
    ).flat();
    expect(unexpected).toEqual([]);
  });

  it.each([
    ['between without a pair', { field: 'Num', op: 'between', value: [1] }, ['value']],
    ['in without an array', { field: 'Int', op: 'in', value: 1 }, ['value']],
    ['a string on an integer', { field: 'Int', op: 'eq', value: '1' }, ['value']],
    ['a number on a date', { field: 'Day', op: 'gt', value: 20240101 }, ['value']],
    ['an impossible date', { field: 'Day', op: 'eq', value: '2024-02-30' }, ['value']],
    ['a timestamp without milliseconds', { field: 'At', op: 'lt', value: '2024-01-01T00:00:00Z' }, ['value']],
    ['a select value that is not a choice', { field: 'Status', op: 'eq', value: 'closed' }, ['value']],
    ['a multiSelect value that is not a choice', { field: 'Tags', op: 'in', value: ['red', 'pink'] }, ['value', 1]],
    ['null instead of isNull', { field: 'Text', op: 'eq', value: null }, ['value']],
    ['a value on isNull', { field: 'Text', op: 'isNull', value: 'x' }, ['value']],
    ['pathExists without a path', { field: 'Doc', op: 'pathExists' }, ['path']],
    ['a path on a text field', { field: 'Text', op: 'eq', value: 'x', path: ['a'] }, ['path']],
    ['an unknown field', { field: 'Nope', op: 'isNull' }, ['field']],
  ])('refuses %s at create, at its path', async (_label, leaf, at) => {
    const response = await postView(typed, { definition: definitionOf({ where: leaf }) });
    expectProblems(response, [['definition', 'query', 'where', ...at]]);
  });

  it.each(['Tags', 'Doc'])('refuses sorting by %s', async (field) => {
    const response = await postView(typed, { definition: definitionOf({ orderBy: [{ field, direction: 'asc' }] }) });
    expectProblems(response, [['definition', 'query', 'orderBy', 0, 'field']]);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Property-based: random valid definitions round-trip unchanged; random invalid ones are a 4xx, never a 5xx.

const ascii = (maxLength = 8) => fc.string({ maxLength });
const json = fc
  .jsonValue({ maxDepth: 3, stringUnit: 'grapheme-ascii' })
  .filter((value) => !JSON.stringify(value).includes('__proto__'));
const pathItem = fc.oneof(ascii(), fc.integer({ min: 0, max: 2147483647 }));
const calendarTime = fc.date({
  min: new Date('0001-01-01T00:00:00.000Z'),
  max: new Date('9999-12-31T23:59:59.999Z'),
  noInvalidDate: true,
});

/** Valid leaves (without `field`) for each field of TYPED_FIELDS: right operators, right-typed values. */
function leafArbitrary(name: string): fc.Arbitrary<Body> {
  const nullity = fc.record({ op: fc.constantFrom('isNull', 'isNotNull') });
  const valued = (ops: string[], value: fc.Arbitrary<unknown>) => fc.record({ op: fc.constantFrom(...ops), value });
  const ordered = (operand: fc.Arbitrary<unknown>, equal = operand, textual = false) =>
    fc.oneof(
      nullity,
      valued(['eq', 'ne'], equal),
      valued(['in'], fc.array(equal, { minLength: 1, maxLength: 4 })),
      valued(['lt', 'lte', 'gt', 'gte', ...(textual ? ['prefix', 'contains', 'iContains'] : [])], operand),
      valued(['between'], fc.tuple(operand, operand)),
    );
  const number = fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }));
  const tag = fc.constantFrom('red', 'green', 'blue');
  switch (name) {
    case 'Int':
    case 'Num':
    case 'Seq':
      return ordered(number);
    case 'Day':
      return ordered(calendarTime.map((date) => date.toISOString().slice(0, 10)));
    case 'At':
      return ordered(calendarTime.map((date) => date.toISOString()));
    case 'Status':
      return ordered(ascii(), fc.constantFrom('open', 'done', 'hold'), true);
    case 'Flag':
      return fc.oneof(
        nullity,
        valued(['eq', 'ne'], fc.boolean()),
        valued(['in'], fc.array(fc.boolean(), { minLength: 1, maxLength: 2 })),
      );
    case 'Tags':
      return fc.oneof(
        nullity,
        valued(['contains'], tag),
        valued(['in'], fc.array(tag, { minLength: 1, maxLength: 3 })),
      );
    case 'Doc':
      return fc.oneof(
        nullity,
        fc.record({ op: fc.constant('pathExists'), path: fc.array(pathItem, { minLength: 1, maxLength: 4 }) }),
        fc.record({ op: fc.constant('pathEq'), path: fc.array(pathItem, { minLength: 1, maxLength: 4 }), value: json }),
        fc.record(
          { op: fc.constant('jsonContains'), path: fc.array(pathItem, { maxLength: 4 }), value: json },
          { requiredKeys: ['op', 'value'] },
        ),
      );
    default:
      return ordered(ascii(), ascii(), true);
  }
}

function definitionArbitrary(): fc.Arbitrary<Body> {
  const ids = Object.values(typed.fields);
  const orderable = TYPED_FIELDS.filter((field) => !['multiSelect', 'json'].includes(field.type)).map(
    (field) => typed.fields[field.name]!,
  );
  // A field is named by id or by its exact name; both must come back as sent.
  const leaf = fc
    .constantFrom(...TYPED_FIELDS.map((field) => field.name))
    .chain((name) =>
      fc
        .tuple(fc.boolean(), leafArbitrary(name))
        .map(([byId, rest]) => ({ field: byId ? typed.fields[name] : name, ...rest })),
    );
  const { where } = fc.letrec<{ where: unknown }>((tie) => ({
    where: fc.oneof(
      { maxDepth: 3, depthSize: 'small' },
      leaf,
      fc.record({ and: fc.array(tie('where'), { minLength: 1, maxLength: 3 }) }),
      fc.record({ or: fc.array(tie('where'), { minLength: 1, maxLength: 3 }) }),
    ),
  }));
  const orderBy = fc
    .shuffledSubarray(orderable, { maxLength: 8 })
    .chain((fields) =>
      fc.tuple(...fields.map((field) => fc.constantFrom('asc', 'desc').map((direction) => ({ field, direction })))),
    );
  return fc.record({
    columnOrder: fc.shuffledSubarray(ids),
    columnWidths: fc.dictionary(
      fc.constantFrom(...ids),
      fc.oneof(fc.integer({ min: 40, max: 2000 }), fc.double({ min: 40, max: 2000, noNaN: true })),
    ),
    frozenColumns: fc.integer({ min: 0, max: 200 }),
    hiddenColumns: fc.shuffledSubarray(ids),
    query: fc.record({ where, orderBy }, { requiredKeys: [] }),
  });
}

interface Mutation {
  label: string;
  apply: (body: any) => void;
  status: number;
  code: string;
}
const mutation = (label: string, apply: (body: any) => void, status = 422, code = 'VALIDATION_FAILED'): Mutation => ({
  label,
  apply,
  status,
  code,
});
const UNKNOWN_ID = newId();

/** One way to break a valid create body; each is enough on its own, whatever the rest of the body holds. */
function mutationArbitrary(): fc.Arbitrary<Mutation> {
  const id = (name: string) => typed.fields[name]!;
  const allowed: Record<string, string[]> = {
    body: ['expectedSchemaVersion', 'name', 'visibility', 'definition'],
    definition: ['columnOrder', 'columnWidths', 'frozenColumns', 'hiddenColumns', 'query'],
    query: ['where', 'orderBy'],
    leaf: ['field', 'op', 'value', 'path'],
    orderByItem: ['field', 'direction'],
  };
  const extraProperty = fc
    .tuple(
      fc.constantFrom(...Object.keys(allowed)),
      ascii().filter((key) => key !== '__proto__'),
      json,
    )
    .map(([level, key, value]) =>
      mutation(`an extra ${level} property`, (body) => {
        const extra = { [allowed[level]!.includes(key) ? `${key}!` : key]: value };
        if (level === 'body') Object.assign(body, extra);
        if (level === 'definition') Object.assign(body.definition, extra);
        if (level === 'query') Object.assign(body.definition.query, extra);
        if (level === 'leaf') body.definition.query.where = { field: id('Int'), op: 'isNull', ...extra };
        if (level === 'orderByItem') body.definition.query.orderBy = [{ field: id('Int'), direction: 'asc', ...extra }];
      }),
    );
  const wrongValues: Body[] = [
    { field: id('Int'), op: 'eq', value: 'one' },
    { field: id('Flag'), op: 'eq', value: 1 },
    { field: id('Day'), op: 'lt', value: 20240101 },
    { field: id('Text'), op: 'contains', value: 5 },
    { field: id('Tags'), op: 'contains', value: true },
    { field: id('At'), op: 'gte', value: 'yesterday' },
    { field: id('Status'), op: 'in', value: ['nope'] },
    { field: id('Num'), op: 'between', value: [1, '2'] },
    { field: id('Doc'), op: 'pathEq', path: ['a'] },
  ];
  return fc.oneof(
    extraProperty,
    fc
      .tuple(
        fc.constantFrom(...Object.values(typed.fields)),
        fc.oneof(
          fc.double({ max: 39.99, noNaN: true, noDefaultInfinity: true }),
          fc.double({ min: 2000.01, noNaN: true, noDefaultInfinity: true }),
        ),
      )
      .map(([field, width]) =>
        mutation(`width ${width}`, (body) => {
          body.definition.columnWidths[field] = width;
        }),
      ),
    ascii()
      .filter((op) => !ALL_OPS.includes(op))
      .map((op) =>
        mutation(`op ${op}`, (body) => {
          body.definition.query.where = { field: id('Int'), op, value: 1 };
        }),
      ),
    fc.constantFrom(...wrongValues).map((leaf) =>
      mutation(`leaf ${JSON.stringify(leaf)}`, (body) => {
        body.definition.query.where = leaf;
      }),
    ),
    fc.integer({ min: 9, max: 20 }).map((count) =>
      mutation(`${count} orderBy items`, (body) => {
        body.definition.query.orderBy = repeat(count, { field: id('Int'), direction: 'asc' });
      }),
    ),
    fc.constantFrom('columnOrder', 'hiddenColumns', 'columnWidths', 'where', 'orderBy').map((member) =>
      mutation(`unknown id in ${member}`, (body) => {
        const { definition } = body;
        if (member === 'columnOrder' || member === 'hiddenColumns')
          definition[member] = [...definition[member], UNKNOWN_ID];
        if (member === 'columnWidths') definition.columnWidths[UNKNOWN_ID] = 100;
        if (member === 'where') definition.query.where = { field: UNKNOWN_ID, op: 'isNull' };
        if (member === 'orderBy') definition.query.orderBy = [{ field: UNKNOWN_ID, direction: 'desc' }];
      }),
    ),
    fc.constantFrom('columnOrder', 'hiddenColumns').map((member) =>
      mutation(`a repeated id in ${member}`, (body) => {
        body.definition[member] = [id('Text'), id('Text')];
      }),
    ),
    fc
      .oneof(
        fc.integer({ max: -1 }),
        fc.integer({ min: 201 }),
        fc.double({ min: 0.01, max: 199.99, noNaN: true }).filter((value) => !Number.isInteger(value)),
      )
      .map((frozen) =>
        mutation(`frozenColumns ${frozen}`, (body) => {
          body.definition.frozenColumns = frozen;
        }),
      ),
    fc.constantFrom(...allowed.definition!).map((member) =>
      mutation(`no ${member}`, (body) => {
        delete body.definition[member];
      }),
    ),
    fc
      .constantFrom<[string, unknown]>(
        ['columnOrder', 'x'],
        ['columnWidths', []],
        ['frozenColumns', '0'],
        ['hiddenColumns', null],
        ['query', []],
      )
      .map(([member, value]) =>
        mutation(`${member} of the wrong type`, (body) => {
          body.definition[member] = value;
        }),
      ),
    fc.tuple(fc.constantFrom('and', 'or'), fc.constantFrom(0, 101)).map(([group, count]) =>
      mutation(`${group} with ${count} items`, (body) => {
        body.definition.query.where = { [group]: repeat(count, { field: id('Int'), op: 'isNull' }) };
      }),
    ),
    fc
      .oneof(
        fc.constant(''),
        fc.constant(' '),
        fc.string({ minLength: 121, maxLength: 150 }).filter((name) => name.trim().length > 120),
      )
      .map((name) =>
        mutation(`name ${JSON.stringify(name)}`, (body) => {
          body.name = name;
        }),
      ),
    fc.integer({ min: 1, max: 1000 }).map((ahead) =>
      mutation(
        `expectedSchemaVersion +${ahead}`,
        (body) => {
          body.expectedSchemaVersion = typed.schemaVersion + ahead;
        },
        409,
        'SCHEMA_VERSION_CONFLICT',
      ),
    ),
  );
}

describe('property-based (fast-check)', () => {
  it('round-trips random valid definitions unchanged, and reads rows through them', async () => {
    await fc.assert(
      fc.asyncProperty(definitionArbitrary(), async (definition) => {
        const sent = JSON.parse(JSON.stringify(definition)) as Body; // what the wire carries (-0 is 0, no undefined)
        const view = savedView(await postView(typed, { definition }));
        try {
          expect(view.definition).toEqual(sent);
          expect(view.validationErrors).toEqual([]);
          const read = await suite.server.request('GET', `${typed.path}/views/${view.id}`, { token: admin() });
          expect(read.status, read.text).toBe(200);
          expect(SavedViewResponse.parse(read.body).definition).toEqual(sent);
          await rowIdsThrough(typed, view);
        } finally {
          await deleteView(typed, view);
        }
      }),
      { numRuns: 40 },
    );
  });

  it('answers random invalid definitions with the right 4xx, never a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(definitionArbitrary(), mutationArbitrary(), async (definition, broken) => {
        const body = {
          expectedSchemaVersion: typed.schemaVersion,
          name: 'View',
          visibility: 'personal',
          definition: structuredClone(definition),
        };
        broken.apply(body);
        const response = await suite.server.request('POST', `${typed.path}/views`, {
          token: admin(),
          idempotencyKey: idempotencyKey(),
          body,
        });
        expectError(response, broken.status, broken.code);
      }),
      { numRuns: 60 },
    );
  });
});
