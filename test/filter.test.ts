import pg from 'pg';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  resolvedOptions,
  toParam,
  typeSpecOf,
  UNSTORABLE_TEXT,
  type CellValue,
  type FieldDefinition,
  type FieldType,
} from '../src/data/field-types.ts';
import { FilterExpression, OrderBy, resolveField } from '../src/data/filter.ts';
import { checkFilter, checkOrderBy } from '../src/data/filter-check.ts';
import { compileFilter, isIndexable, type Bind } from '../src/data/filter-sql.ts';
import { columnOf } from '../src/data/identifiers.ts';
import { Params } from '../src/data/statement.ts';
import { newId } from '../src/kernel/ids.ts';

function fieldOf(name: string, type: FieldType, options?: Record<string, unknown>): FieldDefinition {
  return { id: newId(), name, type, required: false, options: resolvedOptions(type, options), position: 0 };
}

const name = fieldOf('Name', 'text');
const status = fieldOf('Status', 'select', { choices: ['Open', 'Done'] });
const amount = fieldOf('Amount', 'number', { precision: 10, scale: 2 });
const count = fieldOf('Count', 'integer');
const active = fieldOf('Active', 'boolean');
const due = fieldOf('Due', 'date');
const at = fieldOf('At', 'datetime');
const tags = fieldOf('Tags', 'multiSelect', { choices: ['red', 'green', 'blue'] });
const doc = fieldOf('Doc', 'json');
const FIELDS = [name, status, amount, count, active, due, at, tags, doc];

const leaf = (field: string, op: string, extra: Record<string, unknown> = {}) => ({ field, op, ...extra });
function nested(depth: number, inner: unknown): unknown {
  let expression = inner;
  for (let level = 0; level < depth; level += 1) expression = { and: [expression] };
  return expression;
}
const deepArray = (depth: number): unknown => (depth === 0 ? 1 : [deepArray(depth - 1)]);
const repeat = <T>(length: number, item: T): T[] => Array.from({ length }, () => item);

function issuePaths(schema: z.ZodType, input: unknown): (string | number)[][] {
  const result = schema.safeParse(input);
  return result.success ? [] : result.error.issues.map((issue) => issue.path as (string | number)[]);
}

describe('FilterExpression (spec 2.4 structure)', () => {
  const ok = leaf('Name', 'eq', { value: 'x' });

  it.each([
    ['a leaf', ok],
    [
      'a leaf with any JSON value and a path',
      leaf('Doc', 'pathEq', { path: ['a', 0, ''], value: { b: [1, null, true, 'x'] } }),
    ],
    ['nested and/or', { and: [ok, { or: [ok, leaf('Count', 'isNull')] }] }],
    ['and with 100 items', { and: repeat(100, ok) }],
    ['a 64-character field', leaf('f'.repeat(64), 'isNull')],
    ['a 32-item path', leaf('Doc', 'pathExists', { path: repeat(32, 'k') })],
    ['a 1024-character path key', leaf('Doc', 'pathExists', { path: ['k'.repeat(1024)] })],
    ['path indexes 0 and 2147483647', leaf('Doc', 'pathExists', { path: [0, 2147483647] })],
    ['and/or nested 16 levels', nested(16, ok)],
    ['500 conditions', { and: repeat(5, { or: repeat(100, ok) }) }],
    ['a value nested 64 levels', leaf('Doc', 'jsonContains', { value: deepArray(64) })],
  ])('accepts %s', (_label, input) => {
    expect(FilterExpression.safeParse(input).error?.issues).toBeUndefined();
  });

  it.each([
    ['and with 0 items', { and: [] }, [['and']]],
    ['and with 101 items', { and: repeat(101, ok) }, [['and']]],
    ['or with 0 items', { or: [] }, [['or']]],
    ['or with 101 items', { or: repeat(101, ok) }, [['or']]],
    ['an empty field', leaf('', 'isNull'), [['field']]],
    ['a 65-character field', leaf('f'.repeat(65), 'isNull'), [['field']]],
    ['a 33-item path', leaf('Doc', 'pathExists', { path: repeat(33, 'k') }), [['path']]],
    ['a 1025-character path key', leaf('Doc', 'pathExists', { path: ['k', 'k'.repeat(1025)] }), [['path', 1]]],
    ['path index -1', leaf('Doc', 'pathExists', { path: [-1] }), [['path', 0]]],
    ['path index 2147483648', leaf('Doc', 'pathExists', { path: [2147483648] }), [['path', 0]]],
    ['a fractional path index', leaf('Doc', 'pathExists', { path: [1.5] }), [['path', 0]]],
    ['a boolean path item', leaf('Doc', 'pathExists', { path: [true] }), [['path', 0]]],
    ['an unknown op', leaf('Name', 'like', { value: 'x' }), [['op']]],
    ['a missing op', { field: 'Name' }, [['op']]],
    ['an extra leaf property', { ...ok, negate: true }, [[]]],
    ['an extra group property', { and: [ok], not: true }, [[]]],
    ['both and and or', { and: [ok], or: [ok] }, [[]]],
    ['a string expression', 'Name = 1', [[]]],
    ['null', null, [[]]],
    ['a non-finite number value', leaf('Amount', 'eq', { value: Number.POSITIVE_INFINITY }), [['value']]],
    ['NaN deep in a value', leaf('Doc', 'jsonContains', { value: { a: [1, Number.NaN] } }), [['value', 'a', 1]]],
    ['a non-JSON value', leaf('Due', 'eq', { value: new Date(0) }), [['value']]],
    ['a value nested 65 levels', leaf('Doc', 'jsonContains', { value: deepArray(65) }), [['value', ...repeat(64, 0)]]],
    ['and/or nested 17 levels', nested(17, ok), [repeat(16, 'and').flatMap((key) => [key, 0])]],
    ['501 conditions', { and: [...repeat(5, { or: repeat(100, ok) }), ok] }, [[]]],
  ])('rejects %s', (_label, input, paths) => {
    expect(issuePaths(FilterExpression, input)).toEqual(paths);
  });

  it('reports every structural problem with its path, in document order', () => {
    const input = { and: [{ ...ok, extra: 1 }, { or: [] }, leaf('Doc', 'nope', { path: [-1, 'ok', true] })] };
    expect(issuePaths(FilterExpression, input)).toEqual([
      ['and', 0],
      ['and', 1, 'or'],
      ['and', 2, 'op'],
      ['and', 2, 'path', 0],
      ['and', 2, 'path', 2],
    ]);
  });

  it('reports a hostile nesting depth as a problem instead of exhausting the stack', () => {
    const result = FilterExpression.safeParse(nested(100_000, ok));
    expect(result.error?.issues.map((issue) => issue.message)).toEqual([
      'and/or groups may nest at most 16 levels deep',
    ]);
  });

  it('describes the recursive shape in JSON Schema for the OpenAPI document', () => {
    for (const io of ['input', 'output'] as const) {
      expect(JSON.stringify(z.toJSONSchema(FilterExpression, { io, unrepresentable: 'any' }))).toContain(
        '"jsonContains"',
      );
    }
  });
});

describe('OrderBy (spec 2.3)', () => {
  const item = { field: 'Name', direction: 'asc' };

  it('accepts up to 8 items', () => {
    expect(OrderBy.safeParse(repeat(8, item)).success).toBe(true);
    expect(OrderBy.safeParse([]).success).toBe(true);
  });

  it.each([
    ['9 items', repeat(9, item), [[]]],
    ['a bad direction', [{ field: 'Name', direction: 'up' }], [[0, 'direction']]],
    ['a missing direction', [{ field: 'Name' }], [[0, 'direction']]],
    ['a 65-character field', [{ field: 'f'.repeat(65), direction: 'desc' }], [[0, 'field']]],
    ['an empty field', [{ field: '', direction: 'desc' }], [[0, 'field']]],
    ['an extra property', [{ ...item, nulls: 'first' }], [[0]]],
  ])('rejects %s', (_label, input, paths) => {
    expect(issuePaths(OrderBy, input)).toEqual(paths);
  });
});

describe('resolveField', () => {
  it('finds a field by id, else by exact, case-sensitive name', () => {
    expect(resolveField(FIELDS, amount.id)).toBe(amount);
    expect(resolveField(FIELDS, 'Amount')).toBe(amount);
    expect(resolveField(FIELDS, 'amount')).toBeUndefined();
  });

  it('prefers an id over a name that spells it', () => {
    const impostor = { ...fieldOf('x', 'text'), name: amount.id };
    expect(resolveField([impostor, amount], amount.id)).toBe(amount);
  });
});

describe('checkFilter', () => {
  const NUL = '\u0000';

  it.each([
    [
      'an unknown field',
      leaf('Nope', 'isNull'),
      [{ path: ['field'], message: 'must be the id or name of a field of this table; "Nope" is neither' }],
    ],
    [
      'an order comparison on a boolean',
      leaf('Active', 'lt', { value: true }),
      [{ path: ['op'], message: 'lt does not apply to a boolean field; use one of eq, ne, in, isNull, isNotNull' }],
    ],
    [
      'prefix on a number',
      leaf('Amount', 'prefix', { value: '1' }),
      [
        {
          path: ['op'],
          message:
            'prefix does not apply to a number field; use one of eq, ne, lt, lte, gt, gte, between, in, isNull, isNotNull',
        },
      ],
    ],
    [
      'eq on a multiSelect',
      leaf('Tags', 'eq', { value: 'red' }),
      [
        {
          path: ['op'],
          message: 'eq does not apply to a multiSelect field; use one of contains, in, isNull, isNotNull',
        },
      ],
    ],
    [
      'a json operator on text',
      leaf('Name', 'pathExists', { path: ['a'] }),
      [
        {
          path: ['op'],
          message:
            'pathExists does not apply to a text field; use one of eq, ne, lt, lte, gt, gte, between, in, isNull, isNotNull, prefix, contains, iContains',
        },
      ],
    ],
    [
      'eq on json',
      leaf('Doc', 'eq', { value: 1 }),
      [
        {
          path: ['op'],
          message: 'eq does not apply to a json field; use one of isNull, isNotNull, pathExists, pathEq, jsonContains',
        },
      ],
    ],
    ['a missing value', leaf('Amount', 'gt'), [{ path: ['value'], message: 'is required for gt' }]],
    [
      'a missing pathEq value',
      leaf('Doc', 'pathEq', { path: ['a'] }),
      [{ path: ['value'], message: 'is required for pathEq' }],
    ],
    [
      'a value on isNull',
      leaf('Name', 'isNull', { value: null }),
      [{ path: ['value'], message: 'must be absent: isNull takes no value' }],
    ],
    [
      'a value on pathExists',
      leaf('Doc', 'pathExists', { path: ['a'], value: 1 }),
      [{ path: ['value'], message: 'must be absent: pathExists takes no value' }],
    ],
    [
      'eq null',
      leaf('Name', 'eq', { value: null }),
      [{ path: ['value'], message: 'must not be null (use isNull or isNotNull)' }],
    ],
    [
      'a string for a number',
      leaf('Amount', 'eq', { value: '1.5' }),
      [{ path: ['value'], message: 'must be a finite number' }],
    ],
    ['a number for text', leaf('Name', 'eq', { value: 1 }), [{ path: ['value'], message: 'must be a string' }]],
    [
      'a string for a boolean',
      leaf('Active', 'eq', { value: 'true' }),
      [{ path: ['value'], message: 'must be true or false' }],
    ],
    ['a non-date', leaf('Due', 'gt', { value: 20240101 }), [{ path: ['value'], message: 'must be a date YYYY-MM-DD' }]],
    [
      'an impossible date',
      leaf('Due', 'eq', { value: '2023-02-29' }),
      [{ path: ['value'], message: 'must be a calendar date YYYY-MM-DD' }],
    ],
    [
      'a timestamp with an offset',
      leaf('At', 'lt', { value: '2024-01-01T00:00:00.000+01:00' }),
      [{ path: ['value'], message: 'must be a UTC timestamp YYYY-MM-DDTHH:MM:SS.mmmZ' }],
    ],
    [
      'between with one value',
      leaf('Amount', 'between', { value: [1] }),
      [{ path: ['value'], message: 'must be an array of two values [low, high]' }],
    ],
    [
      'between with a wrong bound',
      leaf('Due', 'between', { value: ['2024-01-01', null] }),
      [{ path: ['value', 1], message: 'must not be null (use isNull or isNotNull)' }],
    ],
    [
      'in with no values',
      leaf('Count', 'in', { value: [] }),
      [{ path: ['value'], message: 'must be an array of 1 to 1000 values' }],
    ],
    [
      'in with 1001 values',
      leaf('Count', 'in', { value: repeat(1001, 1) }),
      [{ path: ['value'], message: 'must be an array of 1 to 1000 values' }],
    ],
    [
      'in with a scalar',
      leaf('Count', 'in', { value: 1 }),
      [{ path: ['value'], message: 'must be an array of 1 to 1000 values' }],
    ],
    [
      'in with wrong items',
      leaf('Count', 'in', { value: [1, 'two', 3, null] }),
      [
        { path: ['value', 1], message: 'must be a finite number' },
        { path: ['value', 3], message: 'must not be null (use isNull or isNotNull)' },
      ],
    ],
    [
      'a select value that is not a choice',
      leaf('Status', 'eq', { value: 'open' }),
      [{ path: ['value'], message: 'must be one of the declared choices' }],
    ],
    [
      'a select list with a stranger',
      leaf('Status', 'in', { value: ['Open', 'Closed'] }),
      [{ path: ['value', 1], message: 'must be one of the declared choices' }],
    ],
    [
      'a multiSelect value that is not a choice',
      leaf('Tags', 'contains', { value: 'purple' }),
      [{ path: ['value'], message: 'must be one of the declared choices' }],
    ],
    [
      'NUL in a text value',
      leaf('Name', 'contains', { value: `a${NUL}b` }),
      [{ path: ['value'], message: UNSTORABLE_TEXT }],
    ],
    [
      'NUL in a JSON key',
      leaf('Doc', 'jsonContains', { value: { [`k${NUL}`]: 1 } }),
      [{ path: ['value'], message: UNSTORABLE_TEXT }],
    ],
    [
      'NUL in a path key',
      leaf('Doc', 'pathExists', { path: ['a', `b${NUL}`] }),
      [{ path: ['path', 1], message: UNSTORABLE_TEXT }],
    ],
    [
      'an unpaired surrogate in a text value',
      leaf('Name', 'eq', { value: 'a\ud800' }),
      [{ path: ['value'], message: UNSTORABLE_TEXT }],
    ],
    [
      'a path on a non-json operator',
      leaf('Doc', 'isNull', { path: ['a'] }),
      [{ path: ['path'], message: 'must be absent: only pathExists, pathEq, jsonContains take a path' }],
    ],
    ['a missing path', leaf('Doc', 'pathEq', { value: 1 }), [{ path: ['path'], message: 'is required for pathEq' }]],
    [
      'an empty path',
      leaf('Doc', 'pathExists', { path: [] }),
      [{ path: ['path'], message: 'must have at least one item for pathExists' }],
    ],
  ])('reports %s', (_label, expression, problems) => {
    expect(checkFilter(expression as FilterExpression, FIELDS)).toEqual(problems);
  });

  it('accepts prefix and substring on a select without requiring a choice', () => {
    expect(
      checkFilter(
        {
          and: [leaf('Status', 'prefix', { value: 'Op' }), leaf('Status', 'iContains', { value: 'x' })],
        } as FilterExpression,
        FIELDS,
      ),
    ).toEqual([]);
  });

  it('returns every problem, each at its path inside the expression', () => {
    const expression = {
      and: [
        leaf('Name', 'eq', { value: 'fine' }),
        { or: [leaf('Amount', 'gt', { value: 'big' }), leaf('Ghost', 'isNull')] },
        leaf('Name', 'iContains', { path: ['x'], value: 3 }),
      ],
    } as FilterExpression;
    expect(checkFilter(expression, FIELDS)).toEqual([
      { path: ['and', 1, 'or', 0, 'value'], message: 'must be a finite number' },
      {
        path: ['and', 1, 'or', 1, 'field'],
        message: 'must be the id or name of a field of this table; "Ghost" is neither',
      },
      { path: ['and', 2, 'path'], message: 'must be absent: only pathExists, pathEq, jsonContains take a path' },
      { path: ['and', 2, 'value'], message: 'must be a string' },
    ]);
  });
});

describe('checkOrderBy', () => {
  it('accepts every type except json and multiSelect, by id or name', () => {
    const orderBy = [name, status, amount, count, active, due, at].map((field, index) => ({
      field: index % 2 ? field.id : field.name,
      direction: 'asc' as const,
    }));
    expect(checkOrderBy(orderBy, FIELDS)).toEqual([]);
  });

  it('reports unknown, unsortable and repeated fields', () => {
    const orderBy = [
      { field: 'Name', direction: 'asc' as const },
      { field: 'Doc', direction: 'asc' as const },
      { field: tags.id, direction: 'desc' as const },
      { field: 'Nope', direction: 'asc' as const },
      { field: name.id, direction: 'desc' as const },
    ];
    expect(checkOrderBy(orderBy, FIELDS)).toEqual([
      { path: [1, 'field'], message: 'cannot sort by a json field' },
      { path: [2, 'field'], message: 'cannot sort by a multiSelect field' },
      { path: [3, 'field'], message: 'must be the id or name of a field of this table; "Nope" is neither' },
      { path: [4, 'field'], message: 'must not repeat a field already sorted by' },
    ]);
  });
});

describe('compileFilter', () => {
  const collect =
    (bound: unknown[]): Bind =>
    (value, cast) => {
      bound.push(value);
      return `$${bound.length}::${cast}`;
    };

  it('parenthesises every group and reaches columns only through their ids', () => {
    const sneaky = { ...fieldOf('x"; DROP TABLE t; --', 'text') };
    const expression = {
      or: [
        { and: [leaf(sneaky.name, 'eq', { value: 'a' }), leaf('Active', 'eq', { value: true })] },
        leaf('Count', 'isNull'),
      ],
    } as FilterExpression;
    const sql = compileFilter(expression, [...FIELDS, sneaky], collect([]), 'r');
    expect(sql).toBe(
      `((r.${columnOf(sneaky.id)} = $1::text AND r.${columnOf(active.id)} = $2::boolean) OR r.${columnOf(count.id)} IS NULL)`,
    );
  });

  it('binds only scalars: lists element by element, JSON as text', () => {
    const bound: unknown[] = [];
    compileFilter(
      {
        and: [
          leaf('Count', 'in', { value: [1, 2] }),
          leaf('Tags', 'in', { value: ['red', 'blue'] }),
          leaf('Doc', 'pathEq', { path: ['a', 0], value: { b: [1] } }),
          leaf('Amount', 'between', { value: [1.25, 2] }),
        ],
      } as FilterExpression,
      FIELDS,
      collect(bound),
    );
    expect(bound).toEqual(['1', '2', 'red', 'blue', 'a', '0', '{"b":[1]}', '1.25', '2']);
  });

  it('refuses an unchecked filter and an alias that is not a plain identifier', () => {
    expect(() => compileFilter(leaf('Ghost', 'isNull') as FilterExpression, FIELDS, collect([]))).toThrow(
      /checked filter/,
    );
    expect(() => compileFilter(leaf('Name', 'isNull') as FilterExpression, FIELDS, collect([]), 'r; DROP')).toThrow(
      /alias/,
    );
  });
});

describe('isIndexable', () => {
  it.each([
    [leaf('Name', 'eq', { value: 'a' }), true],
    [leaf('Name', 'prefix', { value: 'a' }), true],
    [leaf('Name', 'contains', { value: 'a' }), true],
    [
      { or: [leaf('Amount', 'gt', { value: 1 }), leaf('Due', 'between', { value: ['2024-01-01', '2024-12-31'] })] },
      true,
    ],
    [leaf('Tags', 'contains', { value: 'red' }), true],
    [leaf('Doc', 'jsonContains', { value: { a: 1 } }), true],
    [leaf('Name', 'lt', { value: 'm' }), false],
    [leaf('Status', 'between', { value: ['A', 'B'] }), false],
    [{ and: [leaf('Count', 'eq', { value: 1 }), leaf('Name', 'iContains', { value: 'a' })] }, false],
    [leaf('Ghost', 'isNull'), false],
  ])('%j → %s', (expression, expected) => {
    expect(isIndexable(expression as FilterExpression, FIELDS)).toBe(expected);
  });
});

describe('compiled filters on PostgreSQL', () => {
  const client = new pg.Client({
    connectionString: process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres',
  });
  const schema = pg.escapeIdentifier(`filter_test_${newId().toLowerCase()}`);
  const table = `${schema}.rows`;

  const ROWS: Record<string, Partial<Record<string, CellValue>>> = {
    r1: {
      Name: 'Alpha',
      Status: 'Open',
      Amount: 1.5,
      Count: 1,
      Active: true,
      Due: '2024-01-31',
      At: '2024-01-01T00:00:00.000Z',
      Tags: ['red', 'green'],
      Doc: { a: { b: [10, 20] }, k: 'v' },
    },
    r2: {
      Name: 'Bêta Éclair',
      Status: 'Done',
      Amount: 2.25,
      Count: 2,
      Active: false,
      Due: '2024-02-29',
      At: '2024-01-01T00:00:00.001Z',
      Tags: ['blue'],
      Doc: { a: { b: [30] } },
    },
    r3: {
      Name: 'ALPHABET',
      Amount: -3,
      Count: 3,
      At: '2023-12-31T23:59:59.999Z',
      Tags: [],
      Doc: { list: [{ x: 1 }, { x: 2 }] },
    },
    r4: {},
    r5: {
      Name: 'gamma 100%_done',
      Status: 'Open',
      Amount: 1000.1,
      Count: Number.MAX_SAFE_INTEGER,
      Active: false,
      Due: '2024-03-01',
      At: '2030-06-15T12:30:00.000Z',
      Tags: ['green'],
      Doc: { a: null },
    },
  };

  async function insertRow(id: string, cells: Partial<Record<string, CellValue>>): Promise<void> {
    const params = new Params();
    const values = FIELDS.map((field) =>
      params.add(toParam(field, cells[field.name] ?? null), typeSpecOf(field.type).cast),
    );
    await client.query(
      `INSERT INTO ${table} (id, ${FIELDS.map((field) => columnOf(field.id)).join(', ')}) VALUES (${params.add(id)}, ${values.join(', ')})`,
      params.values,
    );
  }

  beforeAll(async () => {
    await client.connect();
    // Datetime filters must not depend on the session's zone.
    await client.query(`SET TIME ZONE 'America/New_York'`);
    await client.query(`CREATE SCHEMA ${schema}`);
    const columns = FIELDS.map((field) => `${columnOf(field.id)} ${typeSpecOf(field.type).column(field.options)}`);
    await client.query(`CREATE TABLE ${table} (id text PRIMARY KEY, ${columns.join(', ')})`);
    for (const [id, cells] of Object.entries(ROWS)) await insertRow(id, cells);
  });

  afterAll(async () => {
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client.end();
  });

  async function idsWhere(expression: FilterExpression): Promise<string[]> {
    const params = new Params();
    const sql = compileFilter(expression, FIELDS, (value, cast) => params.add(value, cast), 'r');
    const result = await client.query<{ id: string }>(
      `SELECT r.id FROM ${table} r WHERE ${sql} ORDER BY r.id`,
      params.values,
    );
    return result.rows.map((row) => row.id);
  }

  /** Index predicates take no parameters, so DDL gets literals, escaped by the driver. */
  const inlineLiteral: Bind = (value, cast) =>
    value === null ? `NULL::${cast}` : `${pg.escapeLiteral(String(value))}::${cast}`;

  const CASES: [string, Record<string, unknown>, string[]][] = [
    ['text eq', leaf('Name', 'eq', { value: 'Alpha' }), ['r1']],
    ['text ne, which matches empty cells', leaf('Name', 'ne', { value: 'Alpha' }), ['r2', 'r3', 'r4', 'r5']],
    ['text in', leaf('Name', 'in', { value: ['Alpha', 'ALPHABET', 'nobody'] }), ['r1', 'r3']],
    ['text contains, case-sensitive', leaf('Name', 'contains', { value: 'lpha' }), ['r1']],
    ['text iContains, ASCII', leaf('Name', 'iContains', { value: 'alpha' }), ['r1', 'r3']],
    ['text iContains, beyond ASCII', leaf('Name', 'iContains', { value: 'éCLAIR' }), ['r2']],
    ['prefix with % and _ taken literally', leaf('Name', 'prefix', { value: 'gamma 100%_' }), ['r5']],
    ['prefix where _ would be a LIKE wildcard', leaf('Name', 'prefix', { value: 'gamma 100__' }), []],
    ['prefix % alone', leaf('Name', 'prefix', { value: '%' }), []],
    ['contains % alone', leaf('Name', 'contains', { value: '%' }), ['r5']],
    ['select eq', leaf('Status', 'eq', { value: 'Open' }), ['r1', 'r5']],
    ['select ne', leaf('Status', 'ne', { value: 'Open' }), ['r2', 'r3', 'r4']],
    ['number eq a decimal', leaf('Amount', 'eq', { value: 2.25 }), ['r2']],
    ['number gt a decimal', leaf('Amount', 'gt', { value: 1.5 }), ['r2', 'r5']],
    ['number gte', leaf('Amount', 'gte', { value: 1.5 }), ['r1', 'r2', 'r5']],
    ['number lt a negative', leaf('Amount', 'lt', { value: -2.99 }), ['r3']],
    ['number lte', leaf('Amount', 'lte', { value: 1.5 }), ['r1', 'r3']],
    ['number between, inclusive', leaf('Amount', 'between', { value: [1.5, 2.25] }), ['r1', 'r2']],
    ['number ne', leaf('Amount', 'ne', { value: 1.5 }), ['r2', 'r3', 'r4', 'r5']],
    ['integer gt a decimal', leaf('Count', 'gt', { value: 1.5 }), ['r2', 'r3', 'r5']],
    ['integer eq 2^53 - 1', leaf('Count', 'eq', { value: Number.MAX_SAFE_INTEGER }), ['r5']],
    ['integer in', leaf('Count', 'in', { value: [1, 3, 2.5] }), ['r1', 'r3']],
    ['integer isNull', leaf('Count', 'isNull'), ['r4']],
    ['boolean eq', leaf('Active', 'eq', { value: true }), ['r1']],
    ['boolean ne, which matches empty cells', leaf('Active', 'ne', { value: true }), ['r2', 'r3', 'r4', 'r5']],
    ['boolean isNotNull', leaf('Active', 'isNotNull'), ['r1', 'r2', 'r5']],
    ['date gt', leaf('Due', 'gt', { value: '2024-01-31' }), ['r2', 'r5']],
    ['date between a leap day', leaf('Due', 'between', { value: ['2024-02-01', '2024-02-29'] }), ['r2']],
    ['date in', leaf('Due', 'in', { value: ['2024-03-01', '2024-01-31'] }), ['r1', 'r5']],
    ['datetime eq to the millisecond', leaf('At', 'eq', { value: '2024-01-01T00:00:00.001Z' }), ['r2']],
    ['datetime gt', leaf('At', 'gt', { value: '2024-01-01T00:00:00.000Z' }), ['r2', 'r5']],
    ['datetime lt', leaf('At', 'lt', { value: '2024-01-01T00:00:00.000Z' }), ['r3']],
    ['multiSelect contains a choice', leaf('Tags', 'contains', { value: 'green' }), ['r1', 'r5']],
    ['multiSelect in: has any of', leaf('Tags', 'in', { value: ['blue', 'red'] }), ['r1', 'r2']],
    ['multiSelect isNull: NULL or no choice', leaf('Tags', 'isNull'), ['r3', 'r4']],
    ['multiSelect isNotNull', leaf('Tags', 'isNotNull'), ['r1', 'r2', 'r5']],
    ['json isNull', leaf('Doc', 'isNull'), ['r4']],
    ['json pathExists, where JSON null exists', leaf('Doc', 'pathExists', { path: ['a'] }), ['r1', 'r2', 'r5']],
    ['json pathExists with an array index', leaf('Doc', 'pathExists', { path: ['a', 'b', 1] }), ['r1']],
    ['json pathEq with an array index', leaf('Doc', 'pathEq', { path: ['a', 'b', 0], value: 30 }), ['r2']],
    ['json pathEq inside an array of objects', leaf('Doc', 'pathEq', { path: ['list', 1, 'x'], value: 2 }), ['r3']],
    ['json pathEq to JSON null', leaf('Doc', 'pathEq', { path: ['a'], value: null }), ['r5']],
    ['json jsonContains', leaf('Doc', 'jsonContains', { value: { k: 'v' } }), ['r1']],
    ['json jsonContains at a path', leaf('Doc', 'jsonContains', { path: ['list'], value: [{ x: 2 }] }), ['r3']],
    ['and', { and: [leaf('Active', 'eq', { value: false }), leaf('Amount', 'lt', { value: 100 })] }, ['r2']],
    ['or', { or: [leaf('Active', 'eq', { value: true }), leaf('Name', 'isNull')] }, ['r1', 'r4']],
    // Without parentheses `A OR B AND C` would read as `A OR (B AND C)` and add r1.
    [
      'or inside and',
      {
        and: [
          { or: [leaf('Count', 'eq', { value: 1 }), leaf('Count', 'eq', { value: 2 })] },
          leaf('Active', 'eq', { value: false }),
        ],
      },
      ['r2'],
    ],
    [
      'and inside or, nested three deep',
      {
        or: [
          {
            and: [
              leaf('Tags', 'contains', { value: 'green' }),
              { or: [leaf('Due', 'lt', { value: '2024-02-01' }), leaf('Amount', 'gt', { value: 999 })] },
            ],
          },
          leaf('Doc', 'pathEq', { path: ['a', 'b', 0], value: 30 }),
        ],
      },
      ['r1', 'r2', 'r5'],
    ],
  ];

  it.each(CASES)('%s', async (_label, expression, expected) => {
    expect(await idsWhere(expression as FilterExpression)).toEqual(expected);
  });

  it('references fields by id as well as by name', async () => {
    expect(await idsWhere(leaf(amount.id, 'gt', { value: 1.5 }) as FilterExpression)).toEqual(['r2', 'r5']);
  });

  it('compiles every indexable case into a predicate PostgreSQL accepts for a unique index, selecting the same rows', async () => {
    const indexable = CASES.filter(([, expression]) => isIndexable(expression as FilterExpression, FIELDS));
    expect(indexable.length).toBeGreaterThan(40);
    for (const [label, expression, expected] of indexable) {
      const predicate = compileFilter(expression as FilterExpression, FIELDS, inlineLiteral);
      await client.query(`CREATE UNIQUE INDEX filter_probe ON ${table} (id) WHERE ${predicate}`);
      await client.query(`DROP INDEX ${schema}.filter_probe`);
      const result = await client.query<{ id: string }>(`SELECT id FROM ${table} WHERE ${predicate} ORDER BY id`);
      expect(
        result.rows.map((row) => row.id),
        label,
      ).toEqual(expected);
    }
  });
});
