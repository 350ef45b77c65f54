import { beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/kernel/ids.ts';
import { Page } from '../src/contracts/pages.ts';
import { SavedViewResponse, ViewDeletionResponse } from '../src/contracts/views.ts';
import { expectError, expectProblemPaths, expectTimestamp } from './helpers/expectations.ts';
import { addMember, createOrg, createTeamKey, idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/** Saved views (issue 4, endpoints 1 and 2): create, read, update, delete, who may do what, and capacity. */
const suite = useServerWithOrg();

const ViewPage = Page(SavedViewResponse);
type View = ReturnType<typeof SavedViewResponse.parse>;
type User = Awaited<ReturnType<typeof addMember>>;

const admin = () => suite.org.adminKey;

let table: TestTable;
let member: User;
let otherMember: User;
let viewer: User;
let teamKey: string;

beforeAll(async () => {
  table = await createTable(suite.server, suite.org, [
    { name: 'Name', type: 'text', options: { maxLength: 40 } },
    { name: 'Score', type: 'number' },
    { name: 'Data', type: 'json' },
  ]);
  [member, otherMember, viewer] = [
    await addMember(suite.server.prisma, suite.org.orgId, 'member', 'Mia Member'),
    await addMember(suite.server.prisma, suite.org.orgId, 'member'),
    await addMember(suite.server.prisma, suite.org.orgId, 'viewer', 'Vic Viewer'),
  ];
  teamKey = await createTeamKey(suite.server.prisma, suite.org);
});

const field = (name: string) => table.fields[name]!;
const definition = (overrides: Record<string, unknown> = {}) => ({
  columnOrder: [],
  columnWidths: {},
  frozenColumns: 0,
  hiddenColumns: [],
  query: {},
  ...overrides,
});
const viewsUrl = (on: TestTable = table) => `${on.path}/views`;

function postView(token: string, body: Record<string, unknown> = {}, key = idempotencyKey(), on: TestTable = table) {
  return suite.server.request('POST', viewsUrl(on), {
    token,
    idempotencyKey: key,
    body: {
      expectedSchemaVersion: on.schemaVersion,
      name: 'My view',
      visibility: 'personal',
      definition: definition(),
      ...body,
    },
  });
}

async function createView(token: string, body: Record<string, unknown> = {}, on: TestTable = table): Promise<View> {
  const response = await postView(token, body, idempotencyKey(), on);
  expect(response.status, response.text).toBe(201);
  return SavedViewResponse.parse(response.body);
}

const getView = (token: string, id: string) => suite.server.request('GET', `${viewsUrl()}/${id}`, { token });
const patchView = (token: string, id: string, body: unknown) =>
  suite.server.request('PATCH', `${viewsUrl()}/${id}`, { token, idempotencyKey: idempotencyKey(), body });
const deleteView = (token: string, id: string, expectedVersion: string) =>
  suite.server.request('DELETE', `${viewsUrl()}/${id}`, {
    token,
    idempotencyKey: idempotencyKey(),
    body: { expectedVersion },
  });

async function listedIds(token: string): Promise<string[]> {
  const response = await suite.server.request('GET', `${viewsUrl()}?limit=100`, { token });
  expect(response.status, response.text).toBe(200);
  return ViewPage.parse(response.body).data.map((view) => view.id);
}

describe('POST …/views (endpoint 1)', () => {
  it('answers 201 with exactly the spec 2.2 saved view, readable again by GET', async () => {
    const saved = definition({
      columnOrder: [field('Score'), field('Name')],
      columnWidths: { [field('Name')]: 240 },
      frozenColumns: 1,
      hiddenColumns: [field('Data')],
      query: {
        where: {
          and: [
            { field: 'Score', op: 'gte', value: 2 },
            { field: field('Name'), op: 'prefix', value: 'A' },
          ],
        },
        orderBy: [{ field: 'Score', direction: 'desc' }],
      },
    });
    const response = await postView(member.apiKey, { name: 'Top scores', definition: saved });
    expect(response.status, response.text).toBe(201);
    const view = SavedViewResponse.parse(response.body);
    expect(view).toEqual({
      id: expect.any(String),
      tableId: table.tableId,
      name: 'Top scores',
      visibility: 'personal',
      ownerUserId: member.userId,
      ownerName: 'Mia Member',
      version: '1',
      schemaVersion: table.schemaVersion,
      canEdit: true,
      canChangeVisibility: true,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      definition: saved,
      validationErrors: [],
    });
    expectTimestamp(view.createdAt);
    expectTimestamp(view.updatedAt);
    const again = await getView(member.apiKey, view.id);
    expect(again.status, again.text).toBe(200);
    expect(SavedViewResponse.parse(again.body)).toEqual(view);
  });

  it('replays the same Idempotency-Key without a second view, and refuses it with another body', async () => {
    const key = idempotencyKey();
    const first = await postView(member.apiKey, { name: 'Replayed' }, key);
    const replay = await postView(member.apiKey, { name: 'Replayed' }, key);
    expect(replay.status).toBe(201);
    expect(replay.text).toBe(first.text);
    expect(await suite.server.prisma.savedView.count({ where: { tableId: table.tableId, name: 'Replayed' } })).toBe(1);
    expectError(await postView(member.apiKey, { name: 'Changed' }, key), 409, 'IDEMPOTENCY_CONFLICT');
  });

  it('answers 409 SCHEMA_VERSION_CONFLICT for a stale expectedSchemaVersion', async () => {
    const response = await postView(member.apiKey, { expectedSchemaVersion: table.schemaVersion + 1 });
    expectError(response, 409, 'SCHEMA_VERSION_CONFLICT');
  });

  it.each<[string, () => Record<string, unknown>, (string | number)[]]>([
    [
      'an unknown column in columnOrder',
      () => ({ columnOrder: [field('Name'), newId()] }),
      ['definition', 'columnOrder', 1],
    ],
    [
      'a column hidden twice',
      () => ({ hiddenColumns: [field('Score'), field('Score')] }),
      ['definition', 'hiddenColumns', 1],
    ],
    [
      'a width for an unknown column',
      () => ({ columnWidths: { UNKNOWN_COLUMN: 100 } }),
      ['definition', 'columnWidths', 'UNKNOWN_COLUMN'],
    ],
    [
      'a filter on an unknown field',
      () => ({ query: { where: { field: 'Nope', op: 'eq', value: 1 } } }),
      ['definition', 'query', 'where', 'field'],
    ],
    [
      'prefix on a number field',
      () => ({ query: { where: { field: 'Score', op: 'prefix', value: '1' } } }),
      ['definition', 'query', 'where', 'op'],
    ],
    [
      'a sort on a json field',
      () => ({ query: { orderBy: [{ field: 'Data', direction: 'asc' }] } }),
      ['definition', 'query', 'orderBy', 0, 'field'],
    ],
  ])('answers 422 VALIDATION_FAILED for %s, at its path under definition', async (_case, overrides, path) => {
    const response = await postView(member.apiKey, { definition: definition(overrides()) });
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [path]);
    expect(response.body.error.details.problems).toHaveLength(1);
  });
});

describe('authority over views', () => {
  it('lets a viewer save a personal view (owner only: no visibility change) but not a shared one', async () => {
    const personal = await createView(viewer.apiKey);
    expect(personal).toMatchObject({
      ownerUserId: viewer.userId,
      ownerName: 'Vic Viewer',
      canEdit: true,
      canChangeVisibility: false,
    });
    expectError(await postView(viewer.apiKey, { visibility: 'shared' }), 403, 'FORBIDDEN');
  });

  it('lets a member save a shared view; a team key saves shared views as itself but no personal one', async () => {
    const shared = await createView(member.apiKey, { visibility: 'shared' });
    expect(shared).toMatchObject({
      visibility: 'shared',
      ownerUserId: member.userId,
      canEdit: true,
      canChangeVisibility: true,
    });
    expectError(await postView(teamKey), 403, 'PERSONAL_IDENTITY_REQUIRED');
    const byKey = await createView(teamKey, { visibility: 'shared' });
    expect(byKey).toMatchObject({
      visibility: 'shared',
      ownerUserId: null,
      ownerName: 'Team key',
      canEdit: true,
      canChangeVisibility: false,
    });
  });

  it('answers 404 to another organisation, under either organisation’s path', async () => {
    const other = await createOrg(suite.server.prisma);
    expectError(await postView(other.adminKey), 404, 'RESOURCE_NOT_FOUND');
    const view = await createView(member.apiKey, { visibility: 'shared' });
    expectError(await getView(other.adminKey, view.id), 404, 'RESOURCE_NOT_FOUND');
    const foreignPath = `/v1/orgs/${other.orgId}/databases/${table.databaseId}/tables/${table.tableId}/views`;
    expectError(await suite.server.request('GET', foreignPath, { token: other.adminKey }), 404, 'RESOURCE_NOT_FOUND');
  });

  it('hides a personal view from everyone but its owner, admins included', async () => {
    const view = await createView(member.apiKey, { name: 'Private' });
    for (const token of [admin(), otherMember.apiKey, viewer.apiKey, teamKey]) {
      expectError(await getView(token, view.id), 404, 'RESOURCE_NOT_FOUND');
      expectError(await patchView(token, view.id, { expectedVersion: '1', name: 'Taken' }), 404, 'RESOURCE_NOT_FOUND');
      expectError(await deleteView(token, view.id, '1'), 404, 'RESOURCE_NOT_FOUND');
      expect(await listedIds(token)).not.toContain(view.id);
    }
    expect(await listedIds(member.apiKey)).toContain(view.id);
    expect(SavedViewResponse.parse((await getView(member.apiKey, view.id)).body)).toEqual(view);
  });

  it('lists a shared view for every member, with canEdit and canChangeVisibility as each caller’s authority allows', async () => {
    const view = await createView(member.apiKey, { visibility: 'shared', name: 'Team view' });
    const expectations: [string, boolean, boolean][] = [
      [member.apiKey, true, true],
      [otherMember.apiKey, true, false],
      [admin(), true, false],
      [viewer.apiKey, false, false],
      [teamKey, true, false],
    ];
    for (const [token, canEdit, canChangeVisibility] of expectations) {
      expect(await listedIds(token)).toContain(view.id);
      const read = await getView(token, view.id);
      expect(read.status, read.text).toBe(200);
      expect(SavedViewResponse.parse(read.body)).toEqual({ ...view, canEdit, canChangeVisibility });
    }
  });
});

describe('PATCH …/views/{viewId}', () => {
  it('renames, incrementing the version', async () => {
    const view = await createView(member.apiKey);
    const response = await patchView(member.apiKey, view.id, { expectedVersion: '1', name: 'Renamed' });
    expect(response.status, response.text).toBe(200);
    expect(SavedViewResponse.parse(response.body)).toEqual({
      ...view,
      name: 'Renamed',
      version: '2',
      updatedAt: expect.any(String),
    });
  });

  it('replaces the definition only together with expectedSchemaVersion', async () => {
    const view = await createView(member.apiKey);
    const replaced = definition({
      hiddenColumns: [field('Data')],
      query: { where: { field: 'Score', op: 'isNotNull' } },
    });
    const without = await patchView(member.apiKey, view.id, { expectedVersion: '1', definition: replaced });
    expectError(without, 422, 'VALIDATION_FAILED');
    expectProblemPaths(without, [['body', 'expectedSchemaVersion']]);
    const stale = await patchView(member.apiKey, view.id, {
      expectedVersion: '1',
      expectedSchemaVersion: table.schemaVersion + 1,
      definition: replaced,
    });
    expectError(stale, 409, 'SCHEMA_VERSION_CONFLICT');
    const misfit = await patchView(member.apiKey, view.id, {
      expectedVersion: '1',
      expectedSchemaVersion: table.schemaVersion,
      definition: definition({ columnOrder: [newId()] }),
    });
    expectError(misfit, 422, 'VALIDATION_FAILED');
    expectProblemPaths(misfit, [['definition', 'columnOrder', 0]]);

    const response = await patchView(member.apiKey, view.id, {
      expectedVersion: '1',
      expectedSchemaVersion: table.schemaVersion,
      definition: replaced,
    });
    expect(response.status, response.text).toBe(200);
    expect(SavedViewResponse.parse(response.body)).toMatchObject({
      version: '2',
      definition: replaced,
      validationErrors: [],
    });
  });

  it('lets an owner with row write authority share a personal view; a viewer owner gets 403', async () => {
    const view = await createView(member.apiKey);
    const shared = await patchView(member.apiKey, view.id, { expectedVersion: '1', visibility: 'shared' });
    expect(shared.status, shared.text).toBe(200);
    expect(SavedViewResponse.parse(shared.body)).toMatchObject({
      visibility: 'shared',
      version: '2',
      ownerUserId: member.userId,
    });
    expect(await listedIds(viewer.apiKey)).toContain(view.id);

    const mine = await createView(viewer.apiKey);
    expectError(
      await patchView(viewer.apiKey, mine.id, { expectedVersion: '1', visibility: 'shared' }),
      403,
      'FORBIDDEN',
    );
    expect(SavedViewResponse.parse((await getView(viewer.apiKey, mine.id)).body)).toEqual(mine);
  });

  it('answers 409 ROW_VERSION_CONFLICT with both versions for a stale expectedVersion, and changes nothing', async () => {
    const view = await createView(member.apiKey);
    expect((await patchView(member.apiKey, view.id, { expectedVersion: '1', name: 'Second' })).status).toBe(200);
    const stale = await patchView(member.apiKey, view.id, { expectedVersion: '1', name: 'Lost update' });
    expectError(stale, 409, 'ROW_VERSION_CONFLICT');
    expect(stale.body.error.details).toEqual({ expectedVersion: '1', currentVersion: '2' });
    expect((await getView(member.apiKey, view.id)).body.name).toBe('Second');
  });
});

describe('DELETE …/views/{viewId} (endpoint 2)', () => {
  it('answers {id, deleted, version} with the next version, after which the view is gone and the rows untouched', async () => {
    expect((await createRow(suite.server, admin(), table, { Name: 'kept', Score: 1 })).status).toBe(201);
    const rowsBefore = await suite.server.request('GET', `${table.path}/rows?limit=100`, { token: admin() });
    const view = await createView(member.apiKey, {
      definition: definition({ query: { where: { field: 'Name', op: 'eq', value: 'kept' } } }),
    });
    const response = await deleteView(member.apiKey, view.id, '1');
    expect(response.status, response.text).toBe(200);
    expect(ViewDeletionResponse.parse(response.body)).toEqual({ id: view.id, deleted: true, version: '2' });
    expectError(await getView(member.apiKey, view.id), 404, 'RESOURCE_NOT_FOUND');
    expect(await listedIds(member.apiKey)).not.toContain(view.id);
    const rowsAfter = await suite.server.request('GET', `${table.path}/rows?limit=100`, { token: admin() });
    expect(rowsAfter.text).toBe(rowsBefore.text);
  });

  it.each(['2', '9999999999999999999'])(
    'answers 409 ROW_VERSION_CONFLICT for expectedVersion %s of a version-1 view',
    async (expectedVersion) => {
      const view = await createView(member.apiKey);
      const response = await deleteView(member.apiKey, view.id, expectedVersion);
      expectError(response, 409, 'ROW_VERSION_CONFLICT');
      expect(response.body.error.details).toEqual({ expectedVersion, currentVersion: '1' });
      expect((await getView(member.apiKey, view.id)).status).toBe(200);
    },
  );

  it('refuses a viewer deleting a shared view with 403 FORBIDDEN; a member may', async () => {
    const view = await createView(member.apiKey, { visibility: 'shared' });
    expectError(await deleteView(viewer.apiKey, view.id, '1'), 403, 'FORBIDDEN');
    const response = await deleteView(otherMember.apiKey, view.id, '1');
    expect(response.status, response.text).toBe(200);
    expect(ViewDeletionResponse.parse(response.body)).toEqual({ id: view.id, deleted: true, version: '2' });
  });
});

describe('100 views per scope', () => {
  let roomy: TestTable;
  beforeAll(async () => {
    roomy = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
  });

  /** Fills a scope directly in the catalog, so that only the views at the boundary go through HTTP. */
  async function prefill(count: number, owner: User | null) {
    await suite.server.prisma.savedView.createMany({
      data: Array.from({ length: count }, (_, index) => ({
        id: newId(),
        orgId: suite.org.orgId,
        tableId: roomy.tableId,
        name: `Prefilled ${index}`,
        visibility: owner ? 'personal' : 'shared',
        ownerUserId: owner?.userId ?? null,
        ownerName: 'Prefilled',
        schemaVersion: roomy.schemaVersion,
        definition: definition(),
      })),
    });
  }

  const post = (token: string, visibility = 'personal') => postView(token, { visibility }, idempotencyKey(), roomy);

  function expectFull(response: Awaited<ReturnType<typeof post>>, scope: string) {
    expectError(response, 409, 'CAPACITY_LIMIT');
    expect(response.body.error.details).toEqual({ limit: 100, scope });
  }

  it('accepts the 100th personal view of a user and refuses the 101st, while other scopes still accept', async () => {
    const user = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    await prefill(98, user);
    expect((await post(user.apiKey)).status).toBe(201);
    expect((await post(user.apiKey)).status).toBe(201);
    expectFull(await post(user.apiKey), 'personal');
    expect((await post(otherMember.apiKey)).status).toBe(201);
    expect((await post(user.apiKey, 'shared')).status).toBe(201);
  });

  it('refuses the 101st shared view of a table', async () => {
    const shared = () =>
      suite.server.prisma.savedView.count({ where: { tableId: roomy.tableId, visibility: 'shared' } });
    await prefill(99 - (await shared()), null);
    expect((await post(member.apiKey, 'shared')).status).toBe(201);
    expectFull(await post(member.apiKey, 'shared'), 'shared');
    expect(await shared()).toBe(100);
  });

  it('lets exactly two of six concurrent creates fill the last two places', async () => {
    const user = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    await prefill(98, user);
    const responses = await Promise.all(Array.from({ length: 6 }, () => post(user.apiKey)));
    const created = responses.filter((response) => response.status === 201);
    expect(created).toHaveLength(2);
    for (const response of responses.filter((response) => response.status !== 201)) expectFull(response, 'personal');
    expect(
      await suite.server.prisma.savedView.count({ where: { tableId: roomy.tableId, ownerUserId: user.userId } }),
    ).toBe(100);
  });
});
