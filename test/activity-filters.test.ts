import { describe, expect, it } from 'vitest';
import { newId } from '../src/kernel/ids.ts';
import { ActivityPageResponse, FilterOptionsResponse } from '../src/contracts/activity.ts';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { addMember, createOrg, createTeamKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createDatabase, createRow, createTable } from './helpers/workspace.ts';

/** Endpoint 11's filters (each narrows to exactly what it names, with `scope`) and endpoint 12's filter options. */
const suite = useServerWithOrg();

type Page = ReturnType<typeof ActivityPageResponse.parse>;
type Entry = Page['data'][number];
type Query = Record<string, string | number>;

const admin = () => suite.org.adminKey;
const queryString = (query: Query) =>
  new URLSearchParams(Object.entries(query).map(([name, value]) => [name, String(value)])).toString();
const feed = (query: Query, token = admin()) =>
  suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/activity?${queryString(query)}`, { token });
const options = (query: Query, token = admin(), orgId = suite.org.orgId) =>
  suite.server.request('GET', `/v1/orgs/${orgId}/activity/filters?${queryString(query)}`, { token });

async function page(query: Query, token = admin()): Promise<Page> {
  const response = await feed(query, token);
  expect(response.status, response.text).toBe(200);
  return ActivityPageResponse.parse(response.body);
}

async function filterOptions(query: Query, token = admin()) {
  const response = await options(query, token);
  expect(response.status, response.text).toBe(200);
  return FilterOptionsResponse.parse(response.body);
}

const prefixOf = (token: string) => token.split('_')[1]!;
const idsOf = (entries: Entry[]) => entries.map((entry) => entry.id);

/**
 * One org's whole history, made once: two databases whose names differ by a `%`, tables whose names differ by a
 * `_`, rows by the admin, a member and a team key, a viewer who wrote nothing, a database with no events (made
 * behind the API's back, as if it predated the feed), and another org with events of its own.
 */
let history: ReturnType<typeof makeHistory> | undefined;
const workspace = () => (history ??= makeHistory());

async function makeHistory() {
  const { server, org } = suite;
  const { prisma } = server;
  const grace = await addMember(prisma, org.orgId, 'member', 'Grace Hopper');
  const viewer = await addMember(prisma, org.orgId, 'viewer', 'Victor Viewer');
  const teamKey = await createTeamKey(prisma, org, 'write');
  const percent = await createDatabase(server, org, 'Rate 50% Plan');
  const plain = await createDatabase(server, org, 'Rate 50 Plan');
  const invoices = await createTable(server, org, [{ name: 'Note', type: 'text' }], {
    databaseId: percent,
    name: 'Invoices',
  });
  const underscore = await createTable(server, org, [{ name: 'Note', type: 'text' }], {
    databaseId: plain,
    name: 'Under_Score',
  });
  const lookalike = await createTable(server, org, [{ name: 'Note', type: 'text' }], {
    databaseId: plain,
    name: 'UnderXScore',
  });
  for (const [token, table] of [
    [admin(), invoices],
    [grace.apiKey, invoices],
    [teamKey, underscore],
  ] as const) {
    const created = await createRow(server, token, table, { Note: 'x' });
    expect(created.status, created.text).toBe(201);
  }
  await prisma.database.create({ data: { id: newId(), orgId: org.orgId, name: 'Quiet' } });
  const other = await createOrg(prisma);
  await createTable(server, other, [{ name: 'Note', type: 'text' }], { name: 'Foreign Invoices' });

  const all = (await page({ limit: 100 })).data;
  expect(all).toHaveLength(8); // two database.create, three table.create, three records.changed
  const teamKeyId = (await prisma.apiKey.findUniqueOrThrow({ where: { prefix: prefixOf(teamKey) } })).id;
  return { grace, viewer, teamKey, teamKeyId, percent, plain, invoices, underscore, lookalike, all };
}

/** The API's answer must be exactly the full feed's entries that satisfy `keep`, in the same order. */
async function expectNarrowed(query: Query, keep: (entry: Entry) => boolean, count: number): Promise<Page> {
  const { all } = await workspace();
  const result = await page({ ...query, limit: 100 });
  expect(idsOf(result.data)).toEqual(idsOf(all.filter(keep)));
  expect(result.data).toHaveLength(count);
  return result;
}

const named = (id: string, name: string) => ({ id, name, state: 'active' });

describe('GET …/activity: filters by database, table and resource, with scope', () => {
  it('narrows to a database and shows it in scope', async () => {
    const { percent } = await workspace();
    const result = await expectNarrowed({ databaseId: percent }, (entry) => entry.database?.id === percent, 4);
    expect(result.scope).toEqual({ database: named(percent, 'Rate 50% Plan'), table: null });
  });

  it('narrows to a table and shows it in scope', async () => {
    const { invoices } = await workspace();
    const result = await expectNarrowed(
      { tableId: invoices.tableId },
      (entry) => entry.table?.id === invoices.tableId,
      3,
    );
    // A table-scoped feed is scoped to the table's database too.
    expect(result.scope).toEqual({
      database: named(invoices.databaseId, 'Rate 50% Plan'),
      table: named(invoices.tableId, 'Invoices'),
    });
  });

  it('combines database and table, and shows both in scope', async () => {
    const { plain, underscore } = await workspace();
    const result = await expectNarrowed(
      { databaseId: plain, tableId: underscore.tableId },
      (entry) => entry.table?.id === underscore.tableId,
      2,
    );
    expect(result.scope).toEqual({
      database: named(plain, 'Rate 50 Plan'),
      table: named(underscore.tableId, 'Under_Score'),
    });
  });

  it('takes resource=database:<id> and resource=table:<id> as the same scopes', async () => {
    const { plain, lookalike } = await workspace();
    const database = await expectNarrowed(
      { resource: `database:${plain}` },
      (entry) => entry.database?.id === plain,
      4,
    );
    expect(database.scope).toEqual({ database: named(plain, 'Rate 50 Plan'), table: null });
    const table = await expectNarrowed(
      { resource: `table:${lookalike.tableId}` },
      (entry) => entry.table?.id === lookalike.tableId,
      1,
    );
    expect(table.scope).toEqual({
      database: named(plain, 'Rate 50 Plan'),
      table: named(lookalike.tableId, 'UnderXScore'),
    });
  });

  it('answers 422 when resource names another database or table than databaseId / tableId, and accepts the same one', async () => {
    const { percent, plain, invoices } = await workspace();
    const response = await feed({ resource: `database:${percent}`, databaseId: plain });
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [['query', 'resource']]);
    expectError(await feed({ resource: `table:${invoices.tableId}`, tableId: newId() }), 422, 'VALIDATION_FAILED');
    expect((await feed({ resource: `database:${percent}`, databaseId: percent })).status).toBe(200);
  });

  it('has a null scope without those filters', async () => {
    await workspace();
    expect((await page({ category: 'records' })).scope).toEqual({ database: null, table: null });
  });

  it('answers 404 for an id of this org’s format that names nothing', async () => {
    expectError(await feed({ databaseId: newId() }), 404, 'RESOURCE_NOT_FOUND');
    expectError(await feed({ resource: `table:${newId()}` }), 404, 'RESOURCE_NOT_FOUND');
  });
});

describe('GET …/activity: filters by category, event, text and time', () => {
  it('narrows to a category, and to an event', async () => {
    await expectNarrowed({ category: 'records' }, (entry) => entry.category === 'records', 3);
    await expectNarrowed({ category: 'schema' }, (entry) => entry.category === 'schema', 5);
    await expectNarrowed({ category: 'imports' }, () => false, 0);
    await expectNarrowed({ event: 'table.create' }, (entry) => entry.event === 'table.create', 3);
    await expectNarrowed({ event: 'database.create', category: 'records' }, () => false, 0);
  });

  const contains = (text: string | undefined, part: string) => (text ?? '').toLowerCase().includes(part.toLowerCase());
  it.each<[string, string, number]>([
    ['the summary, ignoring case', 'created 1 ROW', 3],
    ['the actor’s name', 'GRACE', 1],
    ['the database’s name (row events do not name it in their summary)', '50 plan', 4],
    ['the table’s name (row events do not name it in their summary)', 'invoices', 3],
    ['a literal %', '50%', 4],
    ['a literal _', 'r_s', 2],
    ['text that names nothing', 'Quiet', 0],
  ])('searches %s', async (_name, q, count) => {
    await expectNarrowed(
      { q },
      (entry) =>
        [entry.summary, entry.actor.name, entry.database?.name, entry.table?.name].some((text) => contains(text, q)),
      count,
    );
  });

  it('keeps events from `from` (inclusive) until `to` (exclusive) by occurredAt', async () => {
    const { all } = await workspace();
    const instants = [...new Set(all.map((entry) => entry.occurredAt))].sort();
    expect(instants.length).toBeGreaterThan(2);
    const [pivot, later] = [instants[1]!, instants.at(-1)!];
    await expectNarrowed(
      { from: pivot },
      (entry) => entry.occurredAt >= pivot,
      all.filter((entry) => entry.occurredAt >= pivot).length,
    );
    await expectNarrowed(
      { to: pivot },
      (entry) => entry.occurredAt < pivot,
      all.filter((entry) => entry.occurredAt < pivot).length,
    );
    const inWindow = (entry: Entry) => entry.occurredAt >= pivot && entry.occurredAt < later;
    await expectNarrowed({ from: pivot, to: later }, inWindow, all.filter(inWindow).length);
    const afterLast = new Date(Date.parse(later) + 1).toISOString();
    await expectNarrowed({ to: afterLast }, () => true, 8);
    await expectNarrowed({ from: afterLast }, () => false, 0);
  });

  it('pages a filtered feed one entry at a time through exactly its entries', async () => {
    const { all } = await workspace();
    const query = { category: 'records', limit: 1 };
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const result: Page = await page(cursor ? { ...query, cursor } : query);
      seen.push(...idsOf(result.data));
      cursor = result.nextCursor;
    } while (cursor);
    expect(seen).toEqual(idsOf(all.filter((entry) => entry.category === 'records')));
  });
});

describe('GET …/activity/filters (endpoint 12)', () => {
  it('lists the actors of the history, with kind and key, and not a member who wrote nothing', async () => {
    const { grace, teamKey, teamKeyId } = await workspace();
    expect(await filterOptions({ type: 'actors' })).toEqual({
      data: [
        {
          value: suite.org.adminUserId,
          label: 'Ada Admin',
          kind: 'actor',
          avatarUrl: '',
          description: `User · key ${prefixOf(admin())}`,
        },
        {
          value: grace.userId,
          label: 'Grace Hopper',
          kind: 'actor',
          avatarUrl: '',
          description: `User · key ${prefixOf(grace.apiKey)}`,
        },
        {
          value: teamKeyId,
          label: 'Team key',
          kind: 'actor',
          avatarUrl: '',
          description: `Team key · key ${prefixOf(teamKey)}`,
        },
      ],
      hasMore: false,
    });
  });

  it('searches actors by name and says when the search must be narrowed', async () => {
    const { grace } = await workspace();
    expect((await filterOptions({ type: 'actors', q: 'HOPPER' })).data.map((option) => option.value)).toEqual([
      grace.userId,
    ]);
    expect(await filterOptions({ type: 'actors', q: '%' })).toEqual({ data: [], hasMore: false });
    expect(await filterOptions({ type: 'actors', q: 'Victor' })).toEqual({ data: [], hasMore: false });
    const first = await filterOptions({ type: 'actors', limit: 1 });
    expect({ labels: first.data.map((option) => option.label), hasMore: first.hasMore }).toEqual({
      labels: ['Ada Admin'],
      hasMore: true,
    });
    expect((await filterOptions({ type: 'actors', limit: 2 })).hasMore).toBe(true);
    expect((await filterOptions({ type: 'actors', limit: 3 })).hasMore).toBe(false);
    expect((await filterOptions({ type: 'actors', q: '' })).data).toHaveLength(3);
  });

  it('lists the databases and tables of the history as resource references, not one without events', async () => {
    const { percent, plain, invoices, underscore, lookalike } = await workspace();
    const result = await filterOptions({ type: 'resources' });
    expect(result.hasMore).toBe(false);
    const byValue = (a: { value: string }, b: { value: string }) => a.value.localeCompare(b.value);
    expect([...result.data].sort(byValue)).toEqual(
      [
        {
          value: `database:${percent}`,
          label: 'Rate 50% Plan',
          kind: 'database',
          avatarUrl: '',
          description: 'Database',
        },
        { value: `database:${plain}`, label: 'Rate 50 Plan', kind: 'database', avatarUrl: '', description: 'Database' },
        {
          value: `table:${invoices.tableId}`,
          label: 'Invoices',
          kind: 'table',
          avatarUrl: '',
          description: 'Table in Rate 50% Plan',
        },
        {
          value: `table:${underscore.tableId}`,
          label: 'Under_Score',
          kind: 'table',
          avatarUrl: '',
          description: 'Table in Rate 50 Plan',
        },
        {
          value: `table:${lookalike.tableId}`,
          label: 'UnderXScore',
          kind: 'table',
          avatarUrl: '',
          description: 'Table in Rate 50 Plan',
        },
      ].sort(byValue),
    );
    // Each value is a `resource` the feed accepts.
    for (const option of result.data) expect((await page({ resource: option.value })).data.length).toBeGreaterThan(0);
  });

  it('searches resources by name, with % and _ taken literally', async () => {
    const { percent, underscore, invoices } = await workspace();
    const values = async (q: string) =>
      (await filterOptions({ type: 'resources', q })).data.map((option) => option.value);
    expect(await values('50%')).toEqual([`database:${percent}`]);
    expect(await values('R_S')).toEqual([`table:${underscore.tableId}`]);
    expect(await values('INVOICES')).toEqual([`table:${invoices.tableId}`]);
    expect(await values('Quiet')).toEqual([]);
    const first = await filterOptions({ type: 'resources', q: 'rate', limit: 1 });
    expect({ count: first.data.length, hasMore: first.hasMore }).toEqual({ count: 1, hasMore: true });
  });

  it('is readable by a viewer and a read-only team key, and 404 to another org', async () => {
    const { viewer } = await workspace();
    const expected = await filterOptions({ type: 'resources' });
    expect(await filterOptions({ type: 'resources' }, viewer.apiKey)).toEqual(expected);
    expect(
      await filterOptions({ type: 'resources' }, await createTeamKey(suite.server.prisma, suite.org, 'read')),
    ).toEqual(expected);
    const stranger = await createOrg(suite.server.prisma);
    expectError(await options({ type: 'actors' }, stranger.adminKey), 404, 'RESOURCE_NOT_FOUND');
  });

  it.each<[string, Query, (string | number)[]]>([
    ['a missing type', {}, ['query', 'type']],
    ['an unknown type', { type: 'users' }, ['query', 'type']],
    ['q of 201 characters', { type: 'actors', q: 'q'.repeat(201) }, ['query', 'q']],
    ['limit 0', { type: 'actors', limit: 0 }, ['query', 'limit']],
    ['limit 101', { type: 'actors', limit: 101 }, ['query', 'limit']],
    ['limit x', { type: 'actors', limit: 'x' }, ['query', 'limit']],
    ['an unknown parameter', { type: 'actors', cursor: 'abc' }, ['query']],
  ])('rejects %s with 422', async (_name, query, path) => {
    const response = await options(query);
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [path]);
  });

  it('accepts q of 200 characters and limits 1 and 100', async () => {
    expect(await filterOptions({ type: 'resources', q: 'q'.repeat(200) })).toEqual({ data: [], hasMore: false });
    expect((await filterOptions({ type: 'actors', limit: 1 })).data).toHaveLength(1);
    expect((await filterOptions({ type: 'actors', limit: 100 })).hasMore).toBe(false);
  });
});
