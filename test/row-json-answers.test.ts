import { beforeAll, describe, expect, it } from 'vitest';
import { answerPieces, RawJson, stringifyAnswer } from '../src/kernel/raw-json.ts';
import { addUniqueRule, createRow, createTable, type TestTable } from './helpers/workspace.ts';
import { useServerWithOrg } from './helpers/suite.ts';

/**
 * Rows read from PostgreSQL are answered with the `values` JSON PostgreSQL built, written into the answer as it is
 * (src/kernel/raw-json.ts, issue 30): REST and /graphql answer the same bytes, and GraphQL selections (subsets,
 * order, aliases, typename) keep their meaning.
 */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;

let table: TestTable;
let ruleId: string;
const VALUES = {
  Sku: 'A-"1"\\\n\u0007 😀 ü',
  Qty: 3,
  Price: 20,
  Doc: { b: [1, 2.5e-7, { c: 'x\ty' }, null], a: 'é', n: 1e21 },
  Tags: ['x', 'y'],
};

beforeAll(async () => {
  const created = await createTable(suite.server, suite.org, [
    { name: 'Sku', type: 'text', options: { maxLength: 50 } },
    { name: 'Qty', type: 'integer' },
    { name: 'Price', type: 'number', options: { precision: 15, scale: 2 } },
    { name: 'Doc', type: 'json' },
    { name: 'Tags', type: 'multiSelect', options: { choices: ['x', 'y'] } },
  ]);
  const rule = await addUniqueRule(suite.server, admin(), created, { fieldIds: ['Sku'] });
  expect(rule.job.state).toBe('succeeded');
  table = rule.table;
  ruleId = rule.ruleId;
  for (const values of [VALUES, { Sku: 'B', Qty: null }]) {
    const response = await createRow(suite.server, admin(), table, values);
    expect(response.status, response.text).toBe(201);
  }
});

const address = () => ({ orgId: table.orgId, databaseId: table.databaseId, tableId: table.tableId });

/** The text of `data.<field>` in a /graphql answer, as the server wrote it. */
function dataText(text: string, field: string): string {
  const prefix = `{"data":{"${field}":`;
  expect(text.startsWith(prefix), text).toBe(true);
  expect(text.endsWith('}}'), text).toBe(true);
  return text.slice(prefix.length, -2);
}

describe('rows answered with the JSON PostgreSQL built', () => {
  it('answers a page with the same bytes on REST and /graphql, each value as it was written', async () => {
    const rest = await suite.server.request('GET', `${table.path}/rows?limit=10`, { token: admin() });
    expect(rest.status, rest.text).toBe(200);
    expect(rest.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const graph = await suite.server.graphql(
      `query($orgId: ID!, $databaseId: ID!, $tableId: ID!) {
        rows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, limit: 10) {
          data { id version createdAt updatedAt values } nextCursor hasMore } }`,
      address(),
      { token: admin() },
    );
    expect(graph.status, graph.text).toBe(200);
    expect(dataText(graph.text, 'rows')).toBe(rest.text);
    const first = rest.body.data[0];
    expect(Object.keys(first)).toEqual(['id', 'version', 'createdAt', 'updatedAt', 'values']);
    expect(Object.fromEntries(Object.entries(table.fields).map(([name, id]) => [name, first.values[id]]))).toEqual(
      VALUES,
    );
    expect(Object.values(rest.body.data[1].values)).toEqual(['B', null, null, null, null]);
  });

  it('keeps GraphQL selections: a subset in the asked order, aliases, typename, and values as a value', async () => {
    const graph = await suite.server.graphql(
      `query($orgId: ID!, $databaseId: ID!, $tableId: ID!) {
        rows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, limit: 1) {
          hasMore data { cells: values __typename key: id values } } }`,
      address(),
      { token: admin() },
    );
    expect(graph.status, graph.text).toBe(200);
    const [row] = graph.body.data.rows.data;
    expect(Object.keys(graph.body.data.rows)).toEqual(['hasMore', 'data']);
    expect(Object.keys(row)).toEqual(['cells', '__typename', 'key', 'values']);
    expect(row.__typename).toBe('Row');
    expect(row.cells).toEqual(row.values);
    expect(row.values[table.fields.Sku!]).toBe(VALUES.Sku);
  });

  it('answers a lookup with the same bytes on REST and /graphql', async () => {
    const body = { ruleId, keys: [['B'], ['nope'], [VALUES.Sku]] };
    const rest = await suite.server.request('POST', `${table.path}/rows/lookup`, { token: admin(), body });
    expect(rest.status, rest.text).toBe(200);
    const graph = await suite.server.graphql(
      `query($orgId: ID!, $databaseId: ID!, $tableId: ID!, $input: LookupRowsInput!) {
        lookupRows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, input: $input) {
          data { id version createdAt updatedAt values } } }`,
      { ...address(), input: body },
      { token: admin() },
    );
    expect(graph.status, graph.text).toBe(200);
    expect(dataText(graph.text, 'lookupRows')).toBe(rest.text);
    expect(
      rest.body.data.map((row: { values: Record<string, unknown> } | null) => row?.values[table.fields.Sku!] ?? null),
    ).toEqual(['B', null, VALUES.Sku]);
  });
});

describe('large answers, written in pieces', () => {
  /** A row whose page is ~40 KB of JSON, so REST writes it in several pieces; fetched without compression. */
  async function largePage() {
    const large = await createTable(suite.server, suite.org, [{ name: 'Doc', type: 'json' }]);
    const doc = { text: 'é"\\'.repeat(8_000), list: Array.from({ length: 500 }, (_item, index) => index / 3) };
    const created = await createRow(suite.server, admin(), large, { Doc: doc });
    expect(created.status, created.text).toBe(201);
    const url = `${suite.server.url}${large.path}/rows?limit=10`;
    const headers = { authorization: `Bearer ${admin()}`, 'accept-encoding': 'identity' };
    return { large, doc, url, headers };
  }

  it('answers the same bytes on REST and /graphql, with the Content-Length of the body', async () => {
    const { large, doc, url, headers } = await largePage();
    const rest = await fetch(url, { headers });
    const text = await rest.text();
    expect(rest.status, text).toBe(200);
    expect(rest.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(Number(rest.headers.get('content-length'))).toBe(Buffer.byteLength(text));
    expect(answerPieces(JSON.parse(text)).length).toBeGreaterThan(1);
    expect(JSON.parse(text).data[0].values[large.fields.Doc!]).toEqual(doc);
    const graph = await suite.server.graphql(
      `query($orgId: ID!, $databaseId: ID!, $tableId: ID!) {
        rows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, limit: 10) {
          data { id version createdAt updatedAt values } nextCursor hasMore } }`,
      { orgId: large.orgId, databaseId: large.databaseId, tableId: large.tableId },
      { token: admin() },
    );
    expect(graph.status, graph.text).toBe(200);
    expect(dataText(graph.text, 'rows')).toBe(text);
  });

  it('answers HEAD with the GET answer’s Content-Length and no body', async () => {
    const { url, headers } = await largePage();
    const get = await fetch(url, { headers });
    const length = Buffer.byteLength(await get.text());
    const head = await fetch(url, { method: 'HEAD', headers });
    expect(head.status).toBe(200);
    expect(Number(head.headers.get('content-length'))).toBe(length);
    expect(await head.text()).toBe('');
  });
});

describe('answerPieces', () => {
  it('joins to the text stringifyAnswer writes, in pieces of about 32 KB', () => {
    const when = new Date('2026-11-28T10:00:00.000Z');
    const value = {
      a: new RawJson('{"x": 1.50}'),
      b: [new RawJson('null'), 'text', undefined, () => 1, Symbol('s'), Number.NaN, when],
      c: undefined,
      d: { toJSON: () => ({ shown: true }) },
      e: Object.assign(Object.create(null) as object, { k: 'x\u0000y', 'quote"key': -0 }),
      f: new Map([[1, 2]]),
      g: [{}, { skipped: undefined }, []],
      rows: Array.from({ length: 2_000 }, (_item, index) => ({
        id: `r${index}`,
        values: new RawJson(`{"n":${index}}`),
      })),
    };
    const pieces = answerPieces(value);
    expect(pieces.join('') === stringifyAnswer(value)).toBe(true);
    expect(pieces.length).toBeGreaterThan(1);
    for (const piece of pieces) expect(piece.length).toBeLessThan(2 * 32_768);
    const holed: unknown[] = new Array(3);
    holed[0] = 1;
    holed[2] = 3;
    expect(answerPieces(holed)).toEqual(['[1,null,3]']);
    expect(answerPieces(null)).toEqual(['null']);
  });

  it('splices RawJson text even where a string holds the splice marker', () => {
    const value = { a: new RawJson('{"x": 1.50}'), b: '\u0000raw-json' };
    expect(answerPieces(value)).toEqual(['{"a":{"x": 1.50},"b":"\\u0000raw-json"}']);
  });
});

describe('stringifyAnswer', () => {
  it('writes RawJson text as it is, and anything else as JSON.stringify does', () => {
    const value = { a: new RawJson('{"x": 1.50}'), b: [new RawJson('null'), 'text'], c: undefined };
    expect(stringifyAnswer(value)).toBe('{"a":{"x": 1.50},"b":[null,"text"]}');
    expect(JSON.stringify(value)).toBe('{"a":{"x":1.5},"b":[null,"text"]}');
  });

  it('serializes by parsing when a string in the answer holds the splice marker', () => {
    for (const marker of ['\u0000raw-json', 'a","\u0000raw-json']) {
      const value = { a: new RawJson('{"x":1}'), b: marker };
      expect(JSON.parse(stringifyAnswer(value))).toEqual({ a: { x: 1 }, b: marker });
    }
  });
});
