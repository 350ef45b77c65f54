import { describe, expect, it } from 'vitest';
import { ActivityPageResponse } from '../src/contracts/activity.ts';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { addMember, createOrg, createTeamKey, idempotencyKey, type TestOrg } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import {
  addForeignKey,
  addUniqueRule,
  createDatabase,
  createRow,
  createTable,
  refreshSchemaVersion,
} from './helpers/workspace.ts';

/** Endpoint 11: the events each mutation writes, the page and entry shape, paging, cursors, validation, access. */
const suite = useServerWithOrg();

type Page = ReturnType<typeof ActivityPageResponse.parse>;
type Query = Record<string, string | number>;

const admin = () => suite.org.adminKey;
const queryString = (query: Query) => {
  const text = new URLSearchParams(Object.entries(query).map(([name, value]) => [name, String(value)])).toString();
  return text === '' ? '' : `?${text}`;
};
const feed = (query: Query = {}, token = admin(), org: TestOrg = suite.org) =>
  suite.server.request('GET', `/v1/orgs/${org.orgId}/activity${queryString(query)}`, { token });

async function page(query: Query = {}, token = admin(), org: TestOrg = suite.org): Promise<Page> {
  const response = await feed(query, token, org);
  expect(response.status, response.text).toBe(200);
  return ActivityPageResponse.parse(response.body);
}

/** Every page of a query, following nextCursor; asserts each page keeps the first page's asOf. */
async function walk(query: Query, token = admin(), org: TestOrg = suite.org): Promise<Page[]> {
  const pages = [await page(query, token, org)];
  while (pages.at(-1)!.nextCursor) pages.push(await page({ ...query, cursor: pages.at(-1)!.nextCursor! }, token, org));
  for (const later of pages) expect(later.asOf).toBe(pages[0]!.asOf);
  return pages;
}
const idsOf = (pages: Page[]) => pages.flatMap((each) => each.data.map((entry) => entry.id));
const prefixOf = (token: string) => token.split('_')[1]!;

/** Two linked tables in their own database; every kind of event the service writes today, made through REST. */
async function fullHistory() {
  const { server, org } = suite;
  const databaseName = `Ledger ${Date.now()}`;
  const databaseId = await createDatabase(server, org, databaseName);
  const invoices = await createTable(server, org, [{ name: 'Code', type: 'text', options: { maxLength: 20 } }], {
    databaseId,
    name: 'Invoices',
  });
  const payments = await createTable(
    server,
    org,
    [{ name: 'Invoice code', type: 'text', options: { maxLength: 20 } }],
    { databaseId, name: 'Payments' },
  );
  const rule = await addUniqueRule(server, admin(), invoices, { fieldIds: ['Code'] });
  expect(rule.job.state, JSON.stringify(rule.job)).toBe('succeeded');
  const key = await addForeignKey(server, admin(), payments, {
    fieldIds: ['Invoice code'],
    referencedTableId: invoices.tableId,
    referencedRuleId: rule.ruleId,
  });
  expect(key.job.state, JSON.stringify(key.job)).toBe('succeeded');
  const unlinked = await server.request('DELETE', `${payments.path}/foreign-keys/${key.foreignKeyId}`, {
    token: admin(),
    idempotencyKey: idempotencyKey(),
  });
  expect(unlinked.status, unlinked.text).toBe(200);
  const created = await createRow(server, admin(), await refreshSchemaVersion(server, admin(), invoices), {
    Code: 'A-1',
  });
  expect(created.status, created.text).toBe(201);
  const rowPath = `${invoices.path}/rows/${created.body.row.id}`;
  const changed = await server.request('PATCH', rowPath, {
    token: admin(),
    idempotencyKey: idempotencyKey(),
    body: { expectedVersion: '1', values: { Code: 'A-2' } },
  });
  expect(changed.status, changed.text).toBe(200);
  const removed = await server.request('DELETE', rowPath, {
    token: admin(),
    idempotencyKey: idempotencyKey(),
    body: { expectedVersion: '2' },
  });
  expect(removed.status, removed.text).toBe(200);
  return {
    databaseId,
    databaseName,
    invoices,
    payments,
    rowId: created.body.row.id as string,
    ruleJobId: rule.job.jobId as string,
    keyJobId: key.job.jobId as string,
  };
}

const ENTRY_KEYS = [
  'actor',
  'affectedRows',
  'category',
  'database',
  'destination',
  'event',
  'fileName',
  'id',
  'jobId',
  'occurredAt',
  'rowId',
  'status',
  'summary',
  'table',
];

describe('GET /v1/orgs/{orgId}/activity: the events each mutation writes', () => {
  it('records database, table, rule, foreign-key and row events with exactly the members spec 2.10 lists', async () => {
    const history = await fullHistory();
    const result = await page({ databaseId: history.databaseId });
    const active = (id: string, name: string) => ({ id, name, state: 'active' });
    const database = active(history.databaseId, history.databaseName);
    const [invoices, payments] = [
      active(history.invoices.tableId, 'Invoices'),
      active(history.payments.tableId, 'Payments'),
    ];
    const actor = { id: suite.org.adminUserId, key: prefixOf(admin()), kind: 'user', name: 'Ada Admin', avatarUrl: '' };
    const none = { rowId: null, affectedRows: null, jobId: null, fileName: null, destination: null };
    const schema = (event: string, summary: string, table: typeof invoices | null) => ({
      category: 'schema',
      event,
      summary,
      database,
      table,
      ...none,
    });
    const row = (summary: string) => ({
      category: 'records',
      event: 'records.changed',
      summary,
      database,
      table: invoices,
      ...none,
      rowId: history.rowId,
      affectedRows: 1,
    });
    // Rules and keys are jobs: queued at request time, then the worker's event (with the job's id) at the cutover.
    const ofJob = (jobId: string, event: string, summary: string, table: typeof invoices) => ({
      ...schema(event, summary, table),
      jobId,
    });
    const expected = [
      schema('database.create', `Created database ${history.databaseName}`, null),
      schema('table.create', 'Created table Invoices', invoices),
      schema('table.create', 'Created table Payments', payments),
      ofJob(history.ruleJobId, 'job.createUniqueRule.queued', 'Queued: Create a unique rule on Code', invoices),
      ofJob(history.ruleJobId, 'rule.create', 'Create a unique rule on Code: succeeded', invoices),
      ofJob(history.keyJobId, 'job.createForeignKey.queued', 'Queued: Link Invoice code to Invoices', payments),
      ofJob(history.keyJobId, 'foreign-key.create', 'Link Invoice code to Invoices: succeeded', payments),
      schema('foreign-key.delete', 'Removed a foreign key', payments),
      row('Created 1 row'),
      row('Updated 1 row'),
      row('Deleted 1 row'),
    ].map((entry) => ({
      ...entry,
      status: 'requested',
      actor,
      id: expect.any(String),
      occurredAt: expect.any(String),
    }));
    // Compared as a set: two events of one request sequence may share a millisecond, so the order is not theirs to fix.
    const bySummary = (a: { summary: string }, b: { summary: string }) => a.summary.localeCompare(b.summary);
    expect([...result.data].sort(bySummary)).toEqual(expected.sort(bySummary));
    for (const entry of result.data) expect(Object.keys(entry).sort()).toEqual(ENTRY_KEYS);
    expect(new Set(result.data.map((entry) => entry.id)).size).toBe(11);
    expect(result).toMatchObject({
      hasMore: false,
      nextCursor: null,
      availableCategories: ['records', 'schema', 'imports', 'exports', 'backups', 'restores', 'webhooks'],
    });
  });

  it('names a team key and a member as the actor of the rows they write', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Note', type: 'text' }]);
    const teamKey = await createTeamKey(suite.server.prisma, suite.org, 'write');
    const member = await addMember(suite.server.prisma, suite.org.orgId, 'member', 'Grace Hopper');
    for (const token of [teamKey, member.apiKey])
      expect((await createRow(suite.server, token, table, { Note: 'x' })).status).toBe(201);
    const rows = await page({ tableId: table.tableId, category: 'records' });
    const keyId = (await suite.server.prisma.apiKey.findUniqueOrThrow({ where: { prefix: prefixOf(teamKey) } })).id;
    expect(rows.data.map((entry) => entry.actor).sort((a, b) => a.name.localeCompare(b.name))).toEqual([
      { id: member.userId, key: prefixOf(member.apiKey), kind: 'user', name: 'Grace Hopper', avatarUrl: '' },
      { id: keyId, key: prefixOf(teamKey), kind: 'team-key', name: 'Team key', avatarUrl: '' },
    ]);
  });
});

describe('GET /v1/orgs/{orgId}/activity: names that JSON must escape', () => {
  // Entries are JSON text PostgreSQL concatenates (src/data/statement.ts jsonObject): each name must come back exactly.
  it('answers a database and table named with quotes, a backslash, a tab and characters beyond the BMP exactly', async () => {
    const name = `Ledger "Q" \\ tab\there ü 😀 ${Date.now()}`;
    const databaseId = await createDatabase(suite.server, suite.org, name);
    const table = await createTable(suite.server, suite.org, [{ name: 'Note', type: 'text' }], {
      databaseId,
      name: 'Notes "draft" \\ 😀',
    });
    const result = await page({ tableId: table.tableId });
    expect(result.data.map((entry) => [entry.summary, entry.database, entry.table])).toEqual([
      [
        'Created table Notes "draft" \\ 😀',
        { id: databaseId, name, state: 'active' },
        { id: table.tableId, name: 'Notes "draft" \\ 😀', state: 'active' },
      ],
    ]);
  });
});

describe('ordering and keyset paging', () => {
  it('answers newest first, and limit=2 pages walk every event exactly once in the same order as one big page', async () => {
    await fullHistory();
    const whole = await page({ limit: 100 });
    expect(whole.data.length).toBeGreaterThan(10);
    const positions = whole.data.map((entry) => `${entry.occurredAt} ${entry.id}`);
    expect(positions).toEqual([...positions].sort().reverse());
    const pages = await walk({ limit: 2 });
    expect(idsOf(pages)).toEqual(whole.data.map((entry) => entry.id));
    for (const each of pages.slice(0, -1))
      expect(each).toMatchObject({ hasMore: true, nextCursor: expect.any(String) });
    expect(pages.at(-1)).toMatchObject({ hasMore: false, nextCursor: null });
    expect(
      pages
        .map((each) => each.data.length)
        .slice(0, -1)
        .every((length) => length === 2),
    ).toBe(true);
  });

  it('keeps the first page’s cutoff: events written while paging never appear, a fresh request sees them', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Note', type: 'text' }]);
    for (const note of ['a', 'b', 'c'])
      expect((await createRow(suite.server, admin(), table, { Note: note })).status).toBe(201);
    const query = { databaseId: table.databaseId, limit: 2 };
    const before = (await page({ ...query, limit: 100 })).data.map((entry) => entry.id);
    expect(before).toHaveLength(5); // database.create, table.create, three rows

    const first = await page(query);
    const added = [];
    for (const note of ['d', 'e'])
      added.push((await createRow(suite.server, admin(), table, { Note: note })).body.row.id);
    const pages = [first];
    while (pages.at(-1)!.nextCursor) pages.push(await page({ ...query, cursor: pages.at(-1)!.nextCursor! }));
    expect(idsOf(pages)).toEqual(before);
    for (const each of pages) expect(each.asOf).toBe(first.asOf);

    // The start cursor re-reads from the top under the same cutoff; the limit is not part of the binding.
    const restart = await page({ ...query, limit: 100, cursor: first.startCursor });
    expect(restart.data.map((entry) => entry.id)).toEqual(before);
    expect(restart.asOf).toBe(first.asOf);

    const fresh = await page({ ...query, limit: 100 });
    expect(fresh.asOf > first.asOf).toBe(true);
    expect(fresh.data).toHaveLength(7);
    expect(
      fresh.data
        .slice(0, 2)
        .map((entry) => entry.rowId)
        .sort(),
    ).toEqual([...added].sort());
  });
});

describe('cursors', () => {
  async function cursorFor(query: Query): Promise<string> {
    const first = await page({ ...query, limit: 1 });
    expect(first.nextCursor, 'the query needs more than one event').not.toBeNull();
    return first.nextCursor!;
  }
  const flipped = (text: string, index: number) =>
    `${text.slice(0, index)}${text[index] === 'A' ? 'B' : 'A'}${text.slice(index + 1)}`;

  it('refuses a cursor with any changed character in its body or signature with 400 CURSOR_INVALID', async () => {
    await fullHistory();
    const cursor = await cursorFor({});
    expect((await feed({ limit: 1, cursor })).status).toBe(200);
    for (const index of [0, 5, cursor.indexOf('.') - 1, cursor.indexOf('.') + 1]) {
      expectError(await feed({ limit: 1, cursor: flipped(cursor, index) }), 400, 'CURSOR_INVALID');
    }
    for (const forged of ['x', 'abc.def', `${cursor}.x`, cursor.replace('.', ''), 'A'.repeat(200)]) {
      expectError(await feed({ cursor: forged }), 400, 'CURSOR_INVALID');
    }
  });

  it('refuses a cursor reused with other filters, and accepts it with another limit', async () => {
    const history = await fullHistory();
    const cursor = await cursorFor({ databaseId: history.databaseId });
    const others: Query[] = [
      {},
      { tableId: history.invoices.tableId },
      { databaseId: history.databaseId, category: 'schema' },
      { databaseId: history.databaseId, q: 'Ledger' },
      { databaseId: history.databaseId, from: '2000-01-01T00:00:00.000Z' },
    ];
    for (const filters of others) expectError(await feed({ ...filters, cursor }), 400, 'CURSOR_INVALID');
    expect((await page({ databaseId: history.databaseId, limit: 100, cursor })).data).toHaveLength(10);
  });

  it('refuses a cursor minted for another org', async () => {
    const other = await createOrg(suite.server.prisma);
    for (const name of ['One', 'Two']) await createDatabase(suite.server, other, `${name} ${Date.now()}`);
    const foreign = (await page({ limit: 1 }, other.adminKey, other)).nextCursor!;
    expectError(await feed({ limit: 1, cursor: foreign }), 400, 'CURSOR_INVALID');
  });
});

describe('query parameter validation (422 VALIDATION_FAILED naming the parameter)', () => {
  const ULID = '01ARZ3NDEKTSV4RRFFQ69G5FAV';
  it.each<[string, Query, (string | number)[]]>([
    ['limit 0', { limit: 0 }, ['query', 'limit']],
    ['limit 101', { limit: 101 }, ['query', 'limit']],
    ['limit x', { limit: 'x' }, ['query', 'limit']],
    ['limit 1.5', { limit: 1.5 }, ['query', 'limit']],
    ['empty q', { q: '' }, ['query', 'q']],
    ['q of 257 characters', { q: 'q'.repeat(257) }, ['query', 'q']],
    ['resource without kind', { resource: ULID }, ['query', 'resource']],
    ['resource of another kind', { resource: `row:${ULID}` }, ['query', 'resource']],
    ['resource with a short id', { resource: `table:${ULID.slice(1)}` }, ['query', 'resource']],
    ['resource in lower case', { resource: `database:${ULID.toLowerCase()}` }, ['query', 'resource']],
    ['cursor of 201 characters', { cursor: 'A'.repeat(201) }, ['query', 'cursor']],
    ['empty cursor', { cursor: '' }, ['query', 'cursor']],
    ['from as a date', { from: '2024-01-01' }, ['query', 'from']],
    ['from without milliseconds', { from: '2024-01-01T00:00:00Z' }, ['query', 'from']],
    ['from with an offset', { from: '2024-01-01T00:00:00.000+01:00' }, ['query', 'from']],
    ['from in year 0000', { from: '0000-01-01T00:00:00.000Z' }, ['query', 'from']],
    ['from in month 13', { from: '2024-13-01T00:00:00.000Z' }, ['query', 'from']],
    ['to on February 30', { to: '2024-02-30T00:00:00.000Z' }, ['query', 'to']],
    ['to at hour 24', { to: '2024-01-01T24:00:00.000Z' }, ['query', 'to']],
    ['from equal to to', { from: '2024-01-01T00:00:00.000Z', to: '2024-01-01T00:00:00.000Z' }, ['query', 'to']],
    ['from after to', { from: '2024-01-02T00:00:00.000Z', to: '2024-01-01T00:00:00.000Z' }, ['query', 'to']],
    ['unknown category', { category: 'jobs' }, ['query', 'category']],
    ['unknown event', { event: 'row.create' }, ['query', 'event']],
    ['malformed databaseId', { databaseId: 'abc' }, ['query', 'databaseId']],
    ['malformed tableId', { tableId: ULID.toLowerCase() }, ['query', 'tableId']],
    ['unknown parameter', { page: 2 }, ['query']],
  ])('rejects %s', async (_name, query, path) => {
    const response = await feed(query);
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [path]);
  });

  it('accepts each limit at its boundary and defaults to 50', async () => {
    for (let index = 0; index < 3; index += 1) await fullHistory(); // well over 50 events
    expect((await page({ limit: 1 })).data).toHaveLength(1);
    expect((await page()).data).toHaveLength(50);
    expect((await page({ limit: 100 })).data.length).toBeGreaterThan(50);
    expect((await page({ q: 'q'.repeat(256) })).data).toEqual([]);
    expect((await page({ from: '2000-01-01T00:00:00.000Z', to: '2000-01-01T00:00:00.001Z' })).data).toEqual([]);
    expect((await page({ event: 'job.importRows.partially_completed', category: 'imports' })).data).toEqual([]);
  });
});

describe('who may read which events', () => {
  it('lets a viewer and a read-only team key read the same feed as the admin', async () => {
    await fullHistory();
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    const teamKey = await createTeamKey(suite.server.prisma, suite.org, 'read');
    const expected = idsOf(await walk({ limit: 100 }));
    expect(idsOf(await walk({ limit: 100 }, viewer.apiKey))).toEqual(expected);
    expect(idsOf(await walk({ limit: 100 }, teamKey))).toEqual(expected);
  });

  it('never shows another org’s events, and answers 404 for its database, table or org', async () => {
    const other = await createOrg(suite.server.prisma);
    const foreign = await createTable(suite.server, other, [{ name: 'Secret', type: 'text' }]);
    expect((await createRow(suite.server, other.adminKey, foreign, { Secret: 'x' })).status).toBe(201);
    await fullHistory();

    const theirs = await walk({ limit: 100 }, other.adminKey, other);
    expect(
      theirs
        .flatMap((each) => each.data)
        .map((entry) => entry.event)
        .sort(),
    ).toEqual(['database.create', 'records.changed', 'table.create']);
    const ours = new Set(idsOf(await walk({ limit: 100 })));
    expect(ours.size).toBeGreaterThan(0);
    for (const id of idsOf(theirs)) expect(ours.has(id)).toBe(false);

    const foreignScopes: Query[] = [
      { databaseId: foreign.databaseId },
      { tableId: foreign.tableId },
      { resource: `database:${foreign.databaseId}` },
      { resource: `table:${foreign.tableId}` },
    ];
    for (const query of foreignScopes) expectError(await feed(query), 404, 'RESOURCE_NOT_FOUND');
    expectError(await feed({}, other.adminKey), 404, 'RESOURCE_NOT_FOUND');
    expectError(await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/activity`), 401, 'UNAUTHENTICATED');
  });
});
