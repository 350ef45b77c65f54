import { readdirSync, readFileSync } from 'node:fs';
import { Kind, parse } from 'graphql';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { compilesExactly } from '../src/graph/server/compiled-execution.ts';
import { schema } from '../src/graph/schema.ts';
import { openEventStream } from './helpers/event-stream.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { requestPreview } from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Every shape a GraphQL client may send for the same operation answers the same: arguments inline or as
 * variables of any name, variables nested inside input objects and inside JSON literals, default values,
 * named and inline fragments, aliases, one operation picked by name out of several. Queries, mutations and the
 * jobUpdated subscription. (graphql-jit, once the executor, bound a subscription's arguments from the variables
 * and dropped a variable inside a JSON literal: docs/decisions/graphql-execution.md.)
 */
const suite = useServerWithOrg({ RUN_WORKER: 'false' });
let table: TestTable;
let adaId: string;

interface Shape {
  name: string;
  query: string;
  variables?: Record<string, unknown>;
  operationName?: string;
  /** The field's answer, out of `data` (the shape may alias it). */
  pick: (data: any) => any;
}

const ids = () => ({ orgId: suite.org.orgId, databaseId: table.databaseId, tableId: table.tableId });

async function answer(shape: Shape): Promise<any> {
  const response = await suite.server.request('POST', '/graphql', {
    token: suite.org.adminKey,
    body: {
      query: shape.query,
      variables: shape.variables ?? {},
      ...(shape.operationName ? { operationName: shape.operationName } : {}),
    },
  });
  expect(response.body?.errors, `${shape.name}: ${response.text}`).toBeUndefined();
  expect(response.status, shape.name).toBe(200);
  return shape.pick(response.body.data);
}

beforeAll(async () => {
  table = await createTable(suite.server, suite.org, [
    { name: 'Name', type: 'text' },
    { name: 'Age', type: 'integer' },
  ]);
  const ada = await createRow(suite.server, suite.org.adminKey, table, { Name: 'Ada', Age: 36 });
  expect(ada.status, ada.text).toBe(201);
  adaId = ada.body.row.id;
  for (const [name, age] of [
    ['Grace', 85],
    ['Alan', 41],
  ] as const) {
    expect((await createRow(suite.server, suite.org.adminKey, table, { Name: name, Age: age })).status).toBe(201);
  }
});

describe('queries', () => {
  const rowShapes = (): Shape[] => {
    const { orgId, databaseId, tableId } = ids();
    const inline = `orgId: "${orgId}", databaseId: "${databaseId}", tableId: "${tableId}"`;
    const page = (data: any) => data.rows.data.map((row: { id: string }) => row.id);
    return [
      {
        name: 'inline literals',
        query: `{ rows(${inline}, where: {field: "Name", op: "eq", value: "Ada"}) { data { id } } }`,
        pick: page,
      },
      {
        name: 'variables named as the arguments',
        query: `query ($orgId: ID!, $databaseId: ID!, $tableId: ID!, $where: JSON) {
          rows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, where: $where) { data { id } } }`,
        variables: { ...ids(), where: { field: 'Name', op: 'eq', value: 'Ada' } },
        pick: page,
      },
      {
        name: 'variables of other names',
        query: `query Q($o: ID!, $d: ID!, $t: ID!, $w: JSON) { rows(orgId: $o, databaseId: $d, tableId: $t, where: $w) { data { id } } }`,
        variables: { o: orgId, d: databaseId, t: tableId, w: { field: 'Name', op: 'eq', value: 'Ada' } },
        pick: page,
      },
      {
        name: 'a variable inside a JSON literal',
        query: `query ($name: JSON) { rows(${inline}, where: {field: "Name", op: "eq", value: $name}) { data { id } } }`,
        variables: { name: 'Ada' },
        pick: page,
      },
      {
        name: 'variables deep inside a JSON literal',
        query: `query ($field: JSON, $name: JSON, $age: JSON) {
          rows(${inline}, where: {and: [{field: $field, op: "eq", value: $name}, {field: "Age", op: "lt", value: $age}]}) { data { id } } }`,
        variables: { field: 'Name', name: 'Ada', age: 40 },
        pick: page,
      },
      {
        name: 'a variable with a default value inside a JSON literal',
        query: `query ($name: JSON = "Ada") { rows(${inline}, where: {field: "Name", op: "eq", value: $name}) { data { id } } }`,
        pick: page,
      },
      {
        name: 'a named fragment and an alias',
        query: `query ($name: JSON) { found: rows(${inline}, where: {field: "Name", op: "eq", value: $name}) { ...Page } }
          fragment Page on RowPage { data { ...Cells } }
          fragment Cells on Row { id }`,
        variables: { name: 'Ada' },
        pick: (data) => data.found.data.map((row: { id: string }) => row.id),
      },
      {
        name: 'an inline fragment',
        query: `query ($name: JSON) { rows(${inline}, where: {field: "Name", op: "eq", value: $name}) { ... on RowPage { data { id } } } }`,
        variables: { name: 'Ada' },
        pick: page,
      },
      {
        name: 'one operation picked by name out of several',
        query: `query Other { preferenceOptions { themes } }
          query Wanted($name: JSON) { rows(${inline}, where: {field: "Name", op: "eq", value: $name}) { data { id } } }`,
        variables: { name: 'Ada' },
        operationName: 'Wanted',
        pick: page,
      },
    ];
  };

  it('rows: every shape of the same filter answers the same page', async () => {
    for (const shape of rowShapes()) expect(await answer(shape), shape.name).toEqual([adaId]);
  });

  it('rows: a variable nested inside an input object orders as the literal does', async () => {
    const { orgId, databaseId, tableId } = ids();
    const inline = `orgId: "${orgId}", databaseId: "${databaseId}", tableId: "${tableId}"`;
    const names = (data: any) =>
      data.rows.data.map((row: { values: Record<string, unknown> }) => row.values[table.fields.Name!]);
    const shapes: Shape[] = [
      {
        name: 'literal',
        query: `{ rows(${inline}, orderBy: [{field: "Age", direction: "desc"}]) { data { values } } }`,
        pick: names,
      },
      {
        name: 'variables inside the input object',
        query: `query ($by: String!, $way: String!) { rows(${inline}, orderBy: [{field: $by, direction: $way}]) { data { values } } }`,
        variables: { by: 'Age', way: 'desc' },
        pick: names,
      },
      {
        name: 'the list as a variable',
        query: `query ($order: [RowOrderInput!]) { rows(${inline}, orderBy: $order) { data { values } } }`,
        variables: { order: [{ field: 'Age', direction: 'desc' }] },
        pick: names,
      },
      {
        name: 'an input object variable beside a JSON literal holding a variable',
        query: `query ($order: RowOrderInput!, $min: JSON) {
          rows(${inline}, orderBy: [$order], where: {field: "Age", op: "gte", value: $min}) { data { values } } }`,
        variables: { order: { field: 'Age', direction: 'desc' }, min: 0 },
        pick: names,
      },
    ];
    for (const shape of shapes) expect(await answer(shape), shape.name).toEqual(['Grace', 'Alan', 'Ada']);
  });

  it('a variable inside a JSON literal writes nothing outside the JSON log', async () => {
    const errors = vi.spyOn(console, 'error');
    const warnings = vi.spyOn(console, 'warn');
    try {
      const { orgId, databaseId, tableId } = ids();
      const response = await suite.server.graphql(
        `query ($name: JSON) {
        rows(orgId: "${orgId}", databaseId: "${databaseId}", tableId: "${tableId}", where: {field: "Name", op: "eq", value: $name}) {
          data { id } } }`,
        { name: 'Grace' },
        { token: suite.org.adminKey },
      );
      expect(errors.mock.calls).toEqual([]);
      expect(warnings.mock.calls).toEqual([]);
      expect(response.body.data?.rows.data, response.text).toHaveLength(1);
    } finally {
      errors.mockRestore();
      warnings.mockRestore();
    }
  });
});

describe('mutations', () => {
  const created = (data: any) => data.made.row.values[table.fields.Name!];

  it('createRow: every shape of the same input stores the same cells', async () => {
    const { orgId, databaseId, tableId } = ids();
    const inline = `orgId: "${orgId}", databaseId: "${databaseId}", tableId: "${tableId}"`;
    const version = table.schemaVersion;
    const shapes: Shape[] = [
      {
        name: 'inline literals',
        query: `mutation { made: createRow(${inline}, idempotencyKey: "${idempotencyKey()}",
          input: {expectedSchemaVersion: ${version}, values: {Name: "Lin"}}) { row { values } } }`,
        pick: created,
      },
      {
        name: 'variables of other names',
        query: `mutation M($a: ID!, $b: ID!, $c: ID!, $key: String!, $in: CreateRowInput!) {
          made: createRow(orgId: $a, databaseId: $b, tableId: $c, idempotencyKey: $key, input: $in) { row { values } } }`,
        variables: {
          a: orgId,
          b: databaseId,
          c: tableId,
          key: idempotencyKey(),
          in: { expectedSchemaVersion: version, values: { Name: 'Lin' } },
        },
        pick: created,
      },
      {
        name: 'variables inside the input object',
        query: `mutation ($key: String!, $v: Int!, $cells: JSON!) {
          made: createRow(${inline}, idempotencyKey: $key, input: {expectedSchemaVersion: $v, values: $cells}) { row { values } } }`,
        variables: { key: idempotencyKey(), v: version, cells: { Name: 'Lin' } },
        pick: created,
      },
      {
        name: 'a variable inside the JSON literal of the input object',
        query: `mutation ($key: String!, $name: JSON) {
          made: createRow(${inline}, idempotencyKey: $key, input: {expectedSchemaVersion: ${version}, values: {Name: $name}}) { row { values } } }`,
        variables: { key: idempotencyKey(), name: 'Lin' },
        pick: created,
      },
      {
        name: 'a fragment, with variables inside the JSON literal',
        query: `mutation Make($key: String!, $name: JSON, $age: JSON) {
          made: createRow(${inline}, idempotencyKey: $key, input: {expectedSchemaVersion: ${version}, values: {Name: $name, Age: $age}}) {
            ...Made } }
          fragment Made on RowMutation { row { ... on Row { values } } }`,
        variables: { key: idempotencyKey(), name: 'Lin', age: 7 },
        pick: created,
      },
    ];
    for (const shape of shapes) expect(await answer(shape), shape.name).toBe('Lin');
  });
});

describe('subscription jobUpdated', () => {
  let db: pg.Client;
  let jobId: string;

  beforeAll(async () => {
    const accepted = await requestPreview(suite.server, suite.org.adminKey, table, {
      content: 'Name\nAda\n',
      mapping: [{ source: 'Name', fieldId: 'Name' }],
    });
    expect(accepted.status, accepted.text).toBe(202);
    jobId = accepted.body.jobId;
    db = new pg.Client({ connectionString: suite.server.database.url });
    await db.connect();
    // An ended job: each subscription answers it once and completes.
    await db.query(
      `UPDATE jobs SET state = 'succeeded', finished_at = now(), progress_done = 1, progress_total = 1 WHERE id = $1`,
      [jobId],
    );
  });
  afterAll(() => db.end());

  async function events(shape: Shape): Promise<any[]> {
    const stream = await openEventStream(`${suite.server.url}/graphql`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${suite.org.adminKey}`,
        accept: 'text/event-stream',
        'content-type': 'application/json',
      },
      body: JSON.stringify({ query: shape.query, variables: shape.variables ?? {} }),
    });
    expect(stream.status, shape.name).toBe(200);
    const all = await stream.rest();
    expect(all.at(-1)?.event, shape.name).toBe('complete');
    return all
      .filter((event) => event.event === 'next')
      .map((event) => {
        expect(event.data.errors, `${shape.name}: ${JSON.stringify(event.data)}`).toBeUndefined();
        return shape.pick(event.data.data);
      });
  }

  it('every shape of the same arguments streams the job', async () => {
    const orgId = suite.org.orgId;
    const state = (data: any) => data.jobUpdated;
    const shapes: Shape[] = [
      {
        name: 'variables named as the arguments',
        query: 'subscription ($orgId: ID!, $jobId: ID!) { jobUpdated(orgId: $orgId, jobId: $jobId) { jobId state } }',
        variables: { orgId, jobId },
        pick: state,
      },
      {
        name: 'inline literals',
        query: `subscription { jobUpdated(orgId: "${orgId}", jobId: "${jobId}") { jobId state } }`,
        pick: state,
      },
      {
        name: 'variables of other names',
        query: 'subscription Watch($org: ID!, $job: ID!) { jobUpdated(orgId: $org, jobId: $job) { jobId state } }',
        variables: { org: orgId, job: jobId },
        pick: state,
      },
      {
        name: 'variable names swapped',
        query: 'subscription ($jobId: ID!, $orgId: ID!) { jobUpdated(orgId: $jobId, jobId: $orgId) { jobId state } }',
        variables: { jobId: orgId, orgId: jobId },
        pick: state,
      },
      {
        name: 'one inline, one variable',
        query: `subscription ($j: ID!) { jobUpdated(orgId: "${orgId}", jobId: $j) { jobId state } }`,
        variables: { j: jobId },
        pick: state,
      },
      {
        name: 'an alias and fragments',
        query: `subscription ($o: ID!, $j: ID!) { job: jobUpdated(orgId: $o, jobId: $j) { ...JobState ... on Job { jobId } } }
          fragment JobState on Job { state }`,
        variables: { o: orgId, j: jobId },
        pick: (data) => data.job,
      },
    ];
    for (const shape of shapes) expect(await events(shape), shape.name).toEqual([{ jobId, state: 'succeeded' }]);
  });
});

describe('the compiled executor', () => {
  it('runs every REST operation (all arguments passed as variables), and none of the shapes it gets wrong', () => {
    const dir = new URL('../src/http/rest/operations/', import.meta.url);
    const documents = readdirSync(dir)
      .filter((file) => file.endsWith('.graphql'))
      .map((file) => parse(readFileSync(new URL(file, dir), 'utf8')));
    const names = documents.flatMap((document) =>
      document.definitions.flatMap((definition) =>
        definition.kind === Kind.OPERATION_DEFINITION && definition.operation !== 'subscription'
          ? [[document, definition.name!.value] as const]
          : [],
      ),
    );
    expect(names.length).toBeGreaterThan(50);
    for (const [document, name] of names) expect(compilesExactly(schema, document, name), name).toBe(true);
    const wrong = [
      'subscription ($o: ID!, $j: ID!) { jobUpdated(orgId: $o, jobId: $j) { state } }',
      'query ($n: JSON) { rows(orgId: "a", databaseId: "b", tableId: "c", where: {field: "Name", op: "eq", value: $n}) { hasMore } }',
      'query { rows(orgId: "a", databaseId: "b", tableId: "c", where: {field: "Name", op: "eq", value: "Ada"}) { hasMore } }',
      'query ($w: JSON = {field: "Name", op: "isNull"}) { rows(orgId: "a", databaseId: "b", tableId: "c", where: $w) { hasMore } }',
      'query ($f: String!) { rows(orgId: "a", databaseId: "b", tableId: "c", orderBy: [{field: $f, direction: "asc"}]) { hasMore } }',
    ];
    for (const query of wrong) expect(compilesExactly(schema, parse(query)), query).toBe(false);
  });
});
