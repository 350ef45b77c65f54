import { describe, expect, it } from 'vitest';
import { JobResponse } from '../src/contracts/jobs.ts';
import { RowResponse } from '../src/http/rest/routes/rows.ts';
import { Page } from '../src/contracts/pages.ts';
import { expectError } from './helpers/expectations.ts';
import { holdJobUpdate } from './helpers/job-holds.ts';
import { waitForJob } from './helpers/jobs.ts';
import { schemaChangeApi } from './helpers/schema-changes.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { definitionOf, expectProblems, savedView, viewClient, type View } from './helpers/views.ts';
import { addUniqueRule, createRow, createTable, refreshSchemaVersion, type TestTable } from './helpers/workspace.ts';

/**
 * Sort indexes (issue 14): add_index / drop_index through endpoint 5, the schema endpoint's `indexes`, the cap,
 * automatic indexes for shared views' orders, and pages read through an index equal to pages read without one.
 */
const suite = useServerWithOrg();
const api = schemaChangeApi(suite);
const views = viewClient(suite);
const RowPage = Page(RowResponse);
const JobList = Page(JobResponse);

async function numbersTable(): Promise<TestTable> {
  const table = await createTable(suite.server, suite.org, [
    { name: 'N', type: 'number', options: { precision: 10, scale: 2 } },
    { name: 'T', type: 'text', options: { maxLength: 100 } },
    { name: 'J', type: 'json' },
    { name: 'Long', type: 'text', options: { maxLength: 1000 } },
  ]);
  const values = [3, null, 1, 3, 2, null, 1, 3, 5, null, 2, 4, 3];
  for (const [index, n] of values.entries()) {
    const response = await createRow(suite.server, suite.org.adminKey, table, {
      N: n,
      T: index % 3 === 0 ? null : `t${index % 4}`,
    });
    expect(response.status, response.text).toBe(201);
  }
  return table;
}

async function succeed(table: TestTable, change: Record<string, unknown>) {
  const job = await api.finished(api.accepted(await api.apply(table, change)).statusUrl);
  expect(job.state, JSON.stringify(job)).toBe('succeeded');
  return { job, table: await refreshSchemaVersion(suite.server, suite.org.adminKey, table) };
}

/** Every row id in the order, read 3 at a time through cursors. */
async function pagedIds(table: TestTable, orderBy: unknown): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const query: string = `orderBy=${encodeURIComponent(JSON.stringify(orderBy))}&limit=3${cursor ? `&cursor=${cursor}` : ''}`;
    const response = await suite.server.request('GET', `${table.path}/rows?${query}`, { token: suite.org.adminKey });
    expect(response.status, response.text).toBe(200);
    const page = RowPage.parse(response.body);
    ids.push(...page.data.map((row) => row.id));
    cursor = page.nextCursor;
  } while (cursor);
  return ids;
}

async function physicalIndexes(table: TestTable): Promise<string[]> {
  const rows = await suite.server.prisma.$queryRaw<{ indexdef: string }[]>`
    SELECT indexdef FROM pg_indexes WHERE schemaname = ${`d_${table.databaseId.toLowerCase()}`} AND tablename = ${`t_${table.tableId.toLowerCase()}`}
       AND indexname LIKE 'i\\_%' ORDER BY indexname`;
  return rows.map((row) => row.indexdef);
}

async function readyIndexes(table: TestTable) {
  let indexes: Awaited<ReturnType<typeof api.schemaOf>>['indexes'] = [];
  await expect
    .poll(async () => (indexes = (await api.schemaOf(table)).indexes).every((index) => index.state === 'ready'), {
      timeout: 30_000,
      interval: 50,
      message: 'every index ready',
    })
    .toBe(true);
  return indexes;
}

describe('add_index and drop_index', () => {
  it('builds the index online, lists it, and pages read through it exactly as without it', async () => {
    let table = await numbersTable();
    const orders = [
      [{ field: 'N', direction: 'asc' }],
      [{ field: 'N', direction: 'desc' }],
      [
        { field: 'N', direction: 'asc' },
        { field: 'T', direction: 'desc' },
      ],
      [
        { field: 'T', direction: 'desc' },
        { field: 'N', direction: 'asc' },
      ],
    ];
    const before = await Promise.all(orders.map((order) => pagedIds(table, order)));
    for (const order of orders) {
      const { job, table: next } = await succeed(table, { kind: 'add_index', fields: order });
      expect(job.result).toEqual({ indexId: expect.any(String), schemaVersion: table.schemaVersion + 1 });
      table = next;
    }
    const indexes = await api.schemaOf(table);
    expect(indexes.indexes).toHaveLength(4);
    expect(indexes.indexes[0]).toEqual({
      id: expect.any(String),
      keys: [{ fieldId: table.fields.N, direction: 'asc' }],
      origin: 'explicit',
      state: 'ready',
      method: 'btree',
      createdAt: expect.any(String),
    });
    const definitions = await physicalIndexes(table);
    expect(definitions).toHaveLength(4);
    expect(definitions.some((definition) => /\(f_\w+ DESC, f_\w+, id\)$/.test(definition))).toBe(true);
    expect(await Promise.all(orders.map((order) => pagedIds(table, order)))).toEqual(before);

    const dropped = await succeed(table, { kind: 'drop_index', indexId: indexes.indexes[0]!.id });
    expect(dropped.job.result).toEqual({
      indexId: indexes.indexes[0]!.id,
      dropped: true,
      keptForViews: false,
      schemaVersion: table.schemaVersion + 1,
    });
    expect((await api.schemaOf(dropped.table)).indexes).toHaveLength(3);
    expect(await physicalIndexes(table)).toHaveLength(3);
  });

  it('refuses what cannot be indexed before any job: 422 with the path', async () => {
    const table = await numbersTable();
    expectProblems(await api.apply(table, { kind: 'add_index', fields: [{ field: 'Nope', direction: 'asc' }] }), [
      ['change', 'fields', 0, 'field'],
    ]);
    expectProblems(await api.apply(table, { kind: 'add_index', fields: [{ field: 'J', direction: 'asc' }] }), [
      ['change', 'fields', 0, 'field'],
    ]);
    expectProblems(
      await api.apply(table, {
        kind: 'add_index',
        fields: [
          { field: 'N', direction: 'asc' },
          { field: 'N', direction: 'desc' },
        ],
      }),
      [['change', 'fields', 1, 'field']],
    );
    expectProblems(await api.apply(table, { kind: 'add_index', fields: [{ field: 'N', direction: 'up' }] }), [
      ['body', 'change', 'fields', 0, 'direction'],
    ]);
    expectProblems(await api.apply(table, { kind: 'add_index', fields: [] }), [['body', 'change', 'fields']]);
    expectProblems(await api.apply(table, { kind: 'add_index', fields: [{ field: 'Long', direction: 'asc' }] }), [
      ['change', 'fields'],
    ]);
    expectProblems(await api.apply(table, { kind: 'drop_index', indexId: '01HZZZZZZZZZZZZZZZZZZZZZZZ' }), [
      ['change', 'indexId'],
    ]);
    const { table: indexed } = await succeed(table, { kind: 'add_index', fields: [{ field: 'N', direction: 'asc' }] });
    expectProblems(
      await api.apply(indexed, { kind: 'add_index', fields: [{ field: table.fields.N, direction: 'asc' }] }),
      [['change', 'fields']],
    );
  });

  // A wider maxLength would let in a value no index entry can hold: the row's write would then fail with a 500.
  it('refuses raising a text maxLength past what an index or a btree unique rule over it can hold, and keeps writes 2xx', async () => {
    let table = await createTable(suite.server, suite.org, [
      { name: 'T', type: 'text', options: { maxLength: 100 } },
      { name: 'K', type: 'text', options: { maxLength: 100 } },
    ]);
    table = (await succeed(table, { kind: 'add_index', fields: [{ field: 'T', direction: 'asc' }] })).table;
    const rule = await addUniqueRule(suite.server, suite.org.adminKey, table, { fieldIds: ['K'] });
    expect(rule.job.state, JSON.stringify(rule.job)).toBe('succeeded');
    table = await refreshSchemaVersion(suite.server, suite.org.adminKey, table);
    const widen = (field: string, maxLength: number) =>
      api.apply(table, { kind: 'update_field', fieldId: table.fields[field], options: { maxLength } });

    const overIndex = await widen('T', 1_000);
    expectProblems(overIndex, [['change', 'options', 'maxLength']]);
    expect(overIndex.body.error.details.problems[0].message).toMatch(
      /^sort index \w+ could no longer hold every value \(4000 bytes, at most 2550\); drop it first$/,
    );
    const overRule = await widen('K', 700);
    expectProblems(overRule, [['change', 'options', 'maxLength']]);
    expect(overRule.body.error.details.problems[0].message).toMatch(
      /^unique rule \w+ could no longer hold every key \(2800 bytes, at most 2600\)/,
    );

    table = (await succeed(table, { kind: 'update_field', fieldId: table.fields.T, options: { maxLength: 600 } }))
      .table;
    const longest = await createRow(suite.server, suite.org.adminKey, table, {
      T: '😀'.repeat(600),
      K: '😀'.repeat(100),
    });
    expect(longest.status, longest.text).toBe(201);
  });

  it('fails a maxLength raise whose field gained an automatic index while it waited in the queue', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'T', type: 'text', options: { maxLength: 100 } },
    ]);
    const claim = await holdJobUpdate(
      suite.server.database.url,
      `NEW.kind = 'updateField' AND OLD.state = 'queued' AND NEW.state <> 'queued'`,
    );
    try {
      const accepted = api.accepted(
        await api.apply(table, { kind: 'update_field', fieldId: table.fields.T, options: { maxLength: 1_000 } }),
      );
      await claim.reached();
      savedView(
        await views.postView(table, {
          visibility: 'shared',
          definition: definitionOf({ orderBy: [{ field: 'T', direction: 'asc' }] }),
        }),
      );
      await claim.unlock();
      const job = await api.finished(accepted.statusUrl);
      expect(job.state).toBe('failed');
      expect(job.error).toMatchObject({
        code: 'VALIDATION_FAILED',
        details: {
          problems: [
            {
              path: ['change', 'options', 'maxLength'],
              fieldId: table.fields.T,
              message: expect.stringMatching(/; sort no shared view by this field first$/),
            },
          ],
        },
      });
    } finally {
      await claim.release();
    }
  });

  it('allows at most 8 indexes per table: the ninth is 409 CAPACITY_LIMIT', async () => {
    let table = await createTable(
      suite.server,
      suite.org,
      Array.from({ length: 9 }, (_, index) => ({ name: `F${index}`, type: 'integer' })),
    );
    for (let index = 0; index < 8; index += 1)
      table = (await succeed(table, { kind: 'add_index', fields: [{ field: `F${index}`, direction: 'asc' }] })).table;
    const refused = await api.apply(table, { kind: 'add_index', fields: [{ field: 'F8', direction: 'asc' }] });
    expectError(refused, 409, 'CAPACITY_LIMIT');
    expect(refused.body.error.details).toEqual({ limit: 8, scope: 'table indexes', indexIds: expect.any(Array) });
  });

  it('deleting a field drops the indexes that use it', async () => {
    const table = await numbersTable();
    const { table: indexed } = await succeed(table, {
      kind: 'add_index',
      fields: [
        { field: 'T', direction: 'asc' },
        { field: 'N', direction: 'desc' },
      ],
    });
    const { table: after } = await succeed(indexed, { kind: 'delete_field', fieldId: table.fields.N });
    expect((await api.schemaOf(after)).indexes).toEqual([]);
    expect(await physicalIndexes(after)).toEqual([]);
  });

  it('converting a field rebuilds its indexes over the new column', async () => {
    const table = await numbersTable();
    const { table: indexed } = await succeed(table, { kind: 'add_index', fields: [{ field: 'N', direction: 'desc' }] });
    const before = await pagedIds(indexed, [{ field: 'N', direction: 'desc' }]);
    const { table: converted } = await succeed(indexed, {
      kind: 'convert_field',
      fieldId: table.fields.N,
      type: 'integer',
      onUnconvertible: 'fail',
    });
    expect(await readyIndexes(converted)).toEqual([
      expect.objectContaining({ keys: [{ fieldId: table.fields.N, direction: 'desc' }], state: 'ready' }),
    ]);
    expect(await physicalIndexes(converted)).toHaveLength(1);
    expect(await pagedIds(converted, [{ field: 'N', direction: 'desc' }])).toEqual(before);
  });
});

describe('automatic indexes for shared views', () => {
  async function shareSorted(table: TestTable, orderBy: unknown, visibility = 'shared'): Promise<View> {
    return savedView(await views.postView(table, { visibility, definition: definitionOf({ orderBy }) }));
  }

  it('a shared view’s order gets an index when saved; it goes when no view needs it', async () => {
    const table = await numbersTable();
    await shareSorted(table, [{ field: 'T', direction: 'asc' }], 'personal');
    expect((await api.schemaOf(table)).indexes).toEqual([]);
    const first = await shareSorted(table, [{ field: 'N', direction: 'desc' }]);
    const second = await shareSorted(table, [{ field: table.fields.N, direction: 'desc' }]);
    const listed = (await api.schemaOf(table)).indexes;
    expect(listed).toEqual([
      expect.objectContaining({ keys: [{ fieldId: table.fields.N, direction: 'desc' }], origin: 'automatic' }),
    ]);
    expect(['building', 'ready']).toContain(listed[0]!.state);
    expect(await views.rowIdsThrough(table, first)).toHaveLength(13);
    expect(await readyIndexes(table)).toEqual([expect.objectContaining({ state: 'ready' })]);
    expect((await api.schemaOf(table)).schemaVersion).toBe(table.schemaVersion);

    await views.deleteView(table, first);
    expect((await api.schemaOf(table)).indexes).toHaveLength(1);
    await views.deleteView(table, second);
    expect((await api.schemaOf(table)).indexes).toEqual([]);
    await expect.poll(() => physicalIndexes(table), { timeout: 30_000, interval: 50 }).toEqual([]);
  });

  it('an order that cannot be indexed (a text of 1000 characters may not fit a btree entry) saves the view without one', async () => {
    const table = await numbersTable();
    await shareSorted(table, [{ field: 'Long', direction: 'asc' }]);
    expect((await api.schemaOf(table)).indexes).toEqual([]);
  });

  it('drop_index of an index a shared view needs keeps it as automatic; an automatic one cannot be dropped', async () => {
    const table = await numbersTable();
    const { job, table: indexed } = await succeed(table, {
      kind: 'add_index',
      fields: [{ field: 'N', direction: 'asc' }],
    });
    const indexId = (job.result as { indexId: string }).indexId;
    await shareSorted(indexed, [{ field: 'N', direction: 'asc' }]);
    expect((await api.schemaOf(indexed)).indexes).toEqual([
      expect.objectContaining({ id: indexId, origin: 'explicit' }),
    ]);
    const { job: dropped, table: after } = await succeed(indexed, { kind: 'drop_index', indexId });
    expect(dropped.result).toEqual({
      indexId,
      dropped: false,
      keptForViews: true,
      schemaVersion: indexed.schemaVersion + 1,
    });
    expect((await api.schemaOf(after)).indexes).toEqual([
      expect.objectContaining({ id: indexId, origin: 'automatic', state: 'ready' }),
    ]);
    expectProblems(await api.apply(after, { kind: 'drop_index', indexId }), [['change', 'indexId']]);
  });

  it('the save answers at once and enqueues an updateTable job that succeeds', async () => {
    const table = await numbersTable();
    await shareSorted(table, [{ field: 'N', direction: 'asc' }]);
    const response = await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/jobs?kind=updateTable`, {
      token: suite.org.adminKey,
    });
    expect(response.status, response.text).toBe(200);
    const jobs = JobList.parse(response.body).data;
    expect(jobs.length).toBeGreaterThan(0);
    for (const job of jobs) {
      const finished = JobResponse.parse(
        await waitForJob(suite.server, suite.org.adminKey, `/v1/orgs/${suite.org.orgId}/jobs/${job.jobId}`),
      );
      expect(finished.state, JSON.stringify(finished)).toBe('succeeded');
    }
  });
});
