import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeChangeCursor, FEED_START } from '../src/catalog/changes.ts';
import { ChangePageResponse } from '../src/contracts/changes.ts';
import { openEventStream } from './helpers/event-stream.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { type Receiver, startReceiver } from './helpers/receiver.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createDatabase, createRow, createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Issue 48: a table in the trash is 404 everywhere, so the change feed must not keep serving its rows' values. Its
 * row changes leave every reader's view (REST pages, GraphQL, event streams) while it is trashed and come back, at
 * the same cursors, when it is restored; its table changes stay.
 */
const suite = useServerWithOrg({ WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8', WEBHOOK_ALLOW_HTTP: 'true' });
let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(() => receiver.close());
const admin = () => suite.org.adminKey;
const feedPath = (databaseId: string) => `/v1/orgs/${suite.org.orgId}/databases/${databaseId}/changes`;
const send = (method: string, path: string, body?: unknown) =>
  suite.server.request(method, path, {
    token: admin(),
    idempotencyKey: idempotencyKey(),
    ...(body === undefined ? {} : { body }),
  });

interface Seen {
  kind: string;
  tableId: string;
  rowId: string | null;
  cursor: string;
  values: unknown;
}

/** Every change of the database from the start, following nextCursor in pages of 2. */
async function allChanges(databaseId: string, query = ''): Promise<Seen[]> {
  const changes: Seen[] = [];
  let after = '';
  for (;;) {
    const response = await suite.server.request('GET', `${feedPath(databaseId)}?limit=2${query}${after}`, {
      token: admin(),
    });
    expect(response.status, response.text).toBe(200);
    const page = ChangePageResponse.parse(response.body);
    changes.push(...(page.data as Seen[]));
    if (!page.hasMore) return changes;
    after = `&after=${page.nextCursor}`;
  }
}

async function written(table: TestTable, code: string): Promise<string> {
  const response = await createRow(suite.server, admin(), table, { Code: code });
  expect(response.status, response.text).toBe(201);
  return response.body.row.id;
}

async function trash(table: TestTable): Promise<void> {
  const current = await suite.server.request('GET', table.path, { token: admin() });
  expect(current.status, current.text).toBe(200);
  const deleted = await send('DELETE', table.path, { expectedVersion: current.body.version });
  expect(deleted.status, deleted.text).toBe(200);
}

/** A database with a table to trash (two rows, one updated) and a table that stays (one row). */
async function twoTables() {
  const databaseId = await createDatabase(suite.server, suite.org);
  const fields = [{ name: 'Code', type: 'text' as const }];
  const trashed = await createTable(suite.server, suite.org, fields, { databaseId });
  const kept = await createTable(suite.server, suite.org, fields, { databaseId });
  const rows = [await written(trashed, 'secret-1'), await written(trashed, 'secret-2')];
  const updated = await send('PATCH', `${trashed.path}/rows/${rows[0]}`, {
    expectedVersion: '1',
    values: { Code: 'x' },
  });
  expect(updated.status, updated.text).toBe(200);
  const keptRow = await written(kept, 'public');
  return { databaseId, trashed, kept, rows, keptRow };
}

const rowChangesOf = (changes: Seen[], tableId: string) =>
  changes.filter((change) => change.tableId === tableId && change.rowId !== null);

describe('the change feed of a database with a table in the trash', () => {
  it('serves none of its row changes while it is trashed, keeps its table changes, and shows them again once restored', async () => {
    const { databaseId, trashed, kept, keptRow } = await twoTables();
    const before = await allChanges(databaseId);
    const trashedRows = rowChangesOf(before, trashed.tableId);
    expect(trashedRows.map((change) => change.kind)).toEqual(['row.created', 'row.created', 'row.updated']);

    await trash(trashed);
    const during = await allChanges(databaseId);
    expect(rowChangesOf(during, trashed.tableId)).toEqual([]);
    expect(JSON.stringify(during)).not.toContain('secret-');
    expect(rowChangesOf(during, kept.tableId).map((change) => change.rowId)).toEqual([keptRow]);
    expect(during.filter((change) => change.tableId === trashed.tableId).map((change) => change.kind)).toEqual([
      'table.created',
      'table.trashed',
    ]);
    // Asking for the trashed table alone: its table changes only.
    expect((await allChanges(databaseId, `&tableId=${trashed.tableId}`)).map((change) => change.kind)).toEqual([
      'table.created',
      'table.trashed',
    ]);

    const restored = await send('POST', `/v1/orgs/${suite.org.orgId}/trash/${trashed.tableId}/restore`);
    expect(restored.status, restored.text).toBe(200);
    const after = await allChanges(databaseId);
    // Positions are stable: the same changes at the same cursors as before the trash.
    expect(rowChangesOf(after, trashed.tableId)).toEqual(trashedRows);
    expect(after.filter((change) => change.tableId === trashed.tableId).map((change) => change.kind)).toEqual([
      'table.created',
      'row.created',
      'row.created',
      'row.updated',
      'table.trashed',
      'table.restored',
    ]);
  });

  it('hides them from GraphQL pages and from an event stream read from the start too', async () => {
    const { databaseId, trashed, kept } = await twoTables();
    await trash(trashed);
    const graph = await suite.server.graphql(
      `query ($orgId: ID!, $databaseId: ID!) {
        databaseChanges(orgId: $orgId, databaseId: $databaseId, limit: 100) { data { kind tableId rowId values } }
      }`,
      { orgId: suite.org.orgId, databaseId },
      { token: admin() },
    );
    expect(graph.body.errors).toBeUndefined();
    const pageChanges = graph.body.data.databaseChanges.data as Seen[];
    expect(rowChangesOf(pageChanges, trashed.tableId)).toEqual([]);
    expect(rowChangesOf(pageChanges, kept.tableId)).toHaveLength(1);

    const start = encodeChangeCursor(databaseId, FEED_START);
    const stream = await openEventStream(`${suite.server.url}${feedPath(databaseId)}?after=${start}`, {
      headers: { authorization: `Bearer ${admin()}`, accept: 'text/event-stream' },
    });
    expect(stream.status).toBe(200);
    // A row written after the trash marks the end of what the stream has to show.
    const last = await written(kept, 'last');
    const streamed: Seen[] = [];
    for (;;) {
      const event = await stream.next();
      expect(event).not.toBeNull();
      streamed.push(event!.data);
      if (event!.data.rowId === last) break;
    }
    stream.close();
    expect(rowChangesOf(streamed, trashed.tableId)).toEqual([]);
    expect(rowChangesOf(streamed, kept.tableId)).toHaveLength(2);
  });

  it('delivers none of them to a webhook replayed from the oldest retained change', async () => {
    const { databaseId, trashed, kept, keptRow } = await twoTables();
    await trash(trashed);
    const created = await send('POST', `/v1/orgs/${suite.org.orgId}/webhooks`, {
      url: receiver.url,
      events: ['*'],
      databaseId,
    });
    expect(created.status, created.text).toBe(201);
    const replay = await send('POST', `/v1/orgs/${suite.org.orgId}/webhooks/${created.body.id}/replay`, {});
    expect(replay.status, replay.text).toBe(202);
    const last = await written(kept, 'last');
    const delivered = () => receiver.messages().map((message) => message.json.data as Seen);
    await expect
      .poll(() => delivered().some((change) => change.rowId === last), { timeout: 15_000, interval: 50 })
      .toBe(true);
    expect(rowChangesOf(delivered(), trashed.tableId)).toEqual([]);
    expect(JSON.stringify(delivered())).not.toContain('secret-');
    expect(rowChangesOf(delivered(), kept.tableId).map((change) => change.rowId)).toEqual([keptRow, last]);
  });
});
