import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { encodeChangeCursor } from '../src/catalog/changes.ts';
import { ChangeHeadResponse, ChangePageResponse } from '../src/contracts/changes.ts';
import { pgExecutor } from '../src/db/sql.ts';
import { rowsTableOf, schemaOf } from '../src/data/identifiers.ts';
import { pruneChangeFeed } from '../src/jobs/kinds/changes/pruneChanges.ts';
import { countFeedArms } from './helpers/feed-arms.ts';
import { openEventStream, type StreamEvent } from './helpers/event-stream.ts';
import { expectError } from './helpers/expectations.ts';
import { addMember, createOrg, idempotencyKey, type TestOrg } from './helpers/factories.ts';
import { importPreviewed, preview } from './helpers/jobs.ts';
import { appliedChange } from './helpers/schema-changes.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import {
  addForeignKey,
  addUniqueRule,
  createDatabase,
  createRow,
  createTable,
  refreshSchemaVersion,
  type TestTable,
} from './helpers/workspace.ts';

/** Issue 27: the change feed — every write path records its change, and the feed's API over REST and GraphQL. */
const suite = useServerWithOrg();
const onCitus = inject('databaseNodes').length > 1;
const admin = () => suite.org.adminKey;
let pool: pg.Pool;
let actorId: string;

beforeAll(async () => {
  pool = new pg.Pool({ connectionString: suite.server.database.url, max: 4 });
  actorId = suite.org.adminUserId;
});
afterAll(() => pool.end());

const feedPath = (databaseId: string, orgId = suite.org.orgId) => `/v1/orgs/${orgId}/databases/${databaseId}/changes`;

async function feed(databaseId: string, query = '', token = admin()) {
  const response = await suite.server.request('GET', `${feedPath(databaseId)}${query}`, { token });
  expect(response.status, response.text).toBe(200);
  return ChangePageResponse.parse(response.body);
}

/** Every change of the database from the start, following nextCursor. */
async function allChanges(databaseId: string) {
  const changes = [];
  let page = await feed(databaseId, '?limit=3');
  changes.push(...page.data);
  while (page.hasMore) {
    page = await feed(databaseId, `?limit=3&after=${page.nextCursor}`);
    changes.push(...page.data);
  }
  return changes;
}

async function head(databaseId: string) {
  const response = await suite.server.request('GET', `${feedPath(databaseId)}/head`, { token: admin() });
  expect(response.status, response.text).toBe(200);
  return ChangeHeadResponse.parse(response.body).cursor;
}

/** The changes committed after `cursor`. */
async function changesAfter(databaseId: string, cursor: string) {
  return (await feed(databaseId, `?limit=1000&after=${cursor}`)).data;
}

async function codedTable(databaseId?: string) {
  return createTable(
    suite.server,
    suite.org,
    [
      { name: 'Code', type: 'text', required: true, options: { maxLength: 100 } },
      { name: 'Qty', type: 'integer' },
    ],
    databaseId ? { databaseId } : {},
  );
}

async function created(table: TestTable, values: Record<string, unknown>) {
  const response = await createRow(suite.server, admin(), table, values);
  expect(response.status, response.text).toBe(201);
  return response.body as { row: { id: string; version: string }; mutationId: string };
}

describe('row changes, by every write path', () => {
  it('single create, update and delete: values after, changed cells before, the whole row before a delete', async () => {
    const table = await codedTable();
    const [Code, Qty] = [table.fields.Code!, table.fields.Qty!];
    const start = await head(table.databaseId);
    const row = await created(table, { Code: 'a', Qty: 1 });
    const patched = await suite.server.request('PATCH', `${table.path}/rows/${row.row.id}`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1', values: { Qty: 2 } },
    });
    expect(patched.status, patched.text).toBe(200);
    const deleted = await suite.server.request('DELETE', `${table.path}/rows/${row.row.id}`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '2' },
    });
    expect(deleted.status, deleted.text).toBe(200);

    const changes = await changesAfter(table.databaseId, start);
    expect(changes.map(({ kind, rowId, version }) => ({ kind, rowId, version }))).toEqual([
      { kind: 'row.created', rowId: row.row.id, version: '1' },
      { kind: 'row.updated', rowId: row.row.id, version: '2' },
      { kind: 'row.deleted', rowId: row.row.id, version: '3' },
    ]);
    expect(changes[0]).toMatchObject({
      tableId: table.tableId,
      mutationId: row.mutationId,
      actor: { id: actorId, kind: 'user' },
      values: { [Code]: 'a', [Qty]: 1 },
      previous: null,
      schemaVersion: null,
    });
    expect(changes[1]).toMatchObject({
      values: { [Code]: 'a', [Qty]: 2 },
      previous: { [Qty]: 1 },
      mutationId: patched.body.mutationId,
    });
    expect(changes[2]).toMatchObject({ values: null, previous: { [Code]: 'a', [Qty]: 2 } });
    expect(new Set(changes.map((change) => change.cursor)).size).toBe(3);
  });

  it('a batch with upserts: one change per row, in request order', async () => {
    const { table, ruleId } = await (async () => {
      const plain = await codedTable();
      const rule = await addUniqueRule(suite.server, admin(), plain, { fieldIds: ['Code'] });
      return { table: rule.table, ruleId: rule.ruleId };
    })();
    const a = await created(table, { Code: 'a', Qty: 1 });
    const b = await created(table, { Code: 'b', Qty: 2 });
    const c = await created(table, { Code: 'c', Qty: 3 });
    const start = await head(table.databaseId);
    const response = await suite.server.request('POST', `${table.path}/rows/batch`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: {
        expectedSchemaVersion: table.schemaVersion,
        operations: [
          { op: 'create', values: { Code: 'new', Qty: 10 } },
          { op: 'update', rowId: a.row.id, expectedVersion: '1', values: { Qty: 11 } },
          { op: 'delete', rowId: b.row.id, expectedVersion: '1' },
          { op: 'upsert', matchOn: ruleId, values: { Code: 'c', Qty: 33 } },
          { op: 'upsert', matchOn: ruleId, values: { Code: 'd', Qty: 4 } },
        ],
      },
    });
    expect(response.status, response.text).toBe(200);
    const changes = await changesAfter(table.databaseId, start);
    const ids = response.body.results.map((result: { row: { id: string } }) => result.row.id);
    expect(
      changes
        .map(({ kind, rowId, version }) => ({ kind, rowId, version }))
        .sort((x, y) => `${x.rowId}${x.version}`.localeCompare(`${y.rowId}${y.version}`)),
    ).toEqual(
      [
        { kind: 'row.created', rowId: ids[0], version: '1' },
        { kind: 'row.updated', rowId: a.row.id, version: '2' },
        { kind: 'row.updated', rowId: c.row.id, version: '2' },
        { kind: 'row.deleted', rowId: b.row.id, version: '2' },
        { kind: 'row.created', rowId: ids[4], version: '1' },
      ].sort((x, y) => `${x.rowId}${x.version}`.localeCompare(`${y.rowId}${y.version}`)),
    );
    expect(new Set(changes.map((change) => change.mutationId))).toEqual(new Set([response.body.mutationId]));
  });

  it('a row restore records row.restored with the restored values', async () => {
    const table = await codedTable();
    const row = await created(table, { Code: 'a', Qty: 1 });
    const deleted = await suite.server.request('DELETE', `${table.path}/rows/${row.row.id}`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1' },
    });
    expect(deleted.status, deleted.text).toBe(200);
    const start = await head(table.databaseId);
    const restored = await suite.server.request('POST', `${table.path}/rows/${row.row.id}/restore`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '2' },
    });
    expect(restored.status, restored.text).toBe(200);
    const changes = await changesAfter(table.databaseId, start);
    expect(changes).toHaveLength(1);
    expect(changes[0]).toMatchObject({
      kind: 'row.restored',
      rowId: row.row.id,
      version: restored.body.row.version,
      values: { [table.fields.Code!]: 'a', [table.fields.Qty!]: 1 },
    });
  });

  it('an import commit (a job) records row.created for every imported row, under the importer', async () => {
    const table = await codedTable();
    const start = await head(table.databaseId);
    const previewed = await preview(suite.server, admin(), table, {
      content: 'code,qty\nx,1\ny,2\nz,3\n',
      header: true,
      mapping: [
        { source: 'code', fieldId: table.fields.Code! },
        { source: 'qty', fieldId: table.fields.Qty! },
      ],
    });
    expect(previewed.state, JSON.stringify(previewed)).toBe('succeeded');
    const job = await importPreviewed(suite.server, admin(), table, previewed.jobId, 'valid-rows-only');
    expect(job.state, JSON.stringify(job)).toBe('succeeded');
    const changes = await changesAfter(table.databaseId, start);
    expect(changes.map((change) => change.kind)).toEqual(['row.created', 'row.created', 'row.created']);
    expect(changes.map((change) => change.values?.[table.fields.Code!]).sort()).toEqual(['x', 'y', 'z']);
    expect(changes.every((change) => change.actor.id === actorId)).toBe(true);
  });
});

describe('table and schema changes', () => {
  it('table created, renamed, trashed and restored from the trash, under the caller', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const start = await head(databaseId);
    const table = await codedTable(databaseId);
    const current = await suite.server.request('GET', table.path, { token: admin() });
    const renamed = await suite.server.request('PATCH', table.path, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: current.body.version, name: 'Renamed' },
    });
    expect(renamed.status, renamed.text).toBe(200);
    const trashed = await suite.server.request('DELETE', table.path, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: renamed.body.version },
    });
    expect(trashed.status, trashed.text).toBe(200);
    const restored = await suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/trash/${table.tableId}/restore`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
    });
    expect(restored.status, restored.text).toBe(200);
    const changes = await changesAfter(databaseId, start);
    expect(changes.map(({ kind, tableId, schemaVersion }) => ({ kind, tableId, schemaVersion }))).toEqual([
      { kind: 'table.created', tableId: table.tableId, schemaVersion: 1 },
      { kind: 'table.renamed', tableId: table.tableId, schemaVersion: 1 },
      { kind: 'table.trashed', tableId: table.tableId, schemaVersion: 1 },
      { kind: 'table.restored', tableId: table.tableId, schemaVersion: 1 },
    ]);
    expect(changes[1]!.values).toEqual({ name: 'Renamed' });
    expect(changes.every((change) => change.actor.id === actorId && change.rowId === null)).toBe(true);
  });

  it('fields added, changed, reordered and removed; unique rules and foreign keys added and removed: schema.changed each', async () => {
    const table0 = await codedTable();
    const start = await head(table0.databaseId);
    let table = await appliedChange(suite, table0, { kind: 'add_field', field: { name: 'Note', type: 'text' } });
    table = await appliedChange(suite, table, { kind: 'rename_field', fieldId: table.fields.Note, name: 'Remark' });
    table = await appliedChange(suite, table, {
      kind: 'reorder_fields',
      fieldIds: [table.fields.Remark, table.fields.Code, table.fields.Qty],
    });
    table = await appliedChange(suite, table, { kind: 'delete_field', fieldId: table.fields.Remark });
    const rule = await addUniqueRule(suite.server, admin(), table, { fieldIds: ['Code'] });
    expect(rule.job.state).toBe('succeeded');
    table = rule.table;
    const child = await createTable(
      suite.server,
      suite.org,
      [{ name: 'Ref', type: 'text', options: { maxLength: 100 } }],
      { databaseId: table.databaseId },
    );
    const key = await addForeignKey(suite.server, admin(), child, {
      fieldIds: ['Ref'],
      referencedTableId: table.tableId,
      referencedRuleId: rule.ruleId,
    });
    expect(key.job.state, JSON.stringify(key.job)).toBe('succeeded');
    const droppedKey = await suite.server.request('DELETE', `${child.path}/foreign-keys/${key.foreignKeyId}`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedSchemaVersion: key.table.schemaVersion },
    });
    expect([200, 202]).toContain(droppedKey.status);
    if (droppedKey.status === 202) await importWait(droppedKey.body.statusUrl);
    table = await refreshSchemaVersion(suite.server, admin(), table);
    const droppedRule = await suite.server.request('DELETE', `${table.path}/unique-rules/${rule.ruleId}`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedSchemaVersion: table.schemaVersion },
    });
    expect([200, 202]).toContain(droppedRule.status);
    if (droppedRule.status === 202) await importWait(droppedRule.body.statusUrl);

    const changes = await changesAfter(table0.databaseId, start);
    const ofParent = changes.filter((change) => change.tableId === table0.tableId);
    expect(ofParent.map((change) => change.kind)).toEqual(Array(6).fill('schema.changed'));
    expect(ofParent.map((change) => change.schemaVersion)).toEqual([2, 3, 4, 5, 6, 7]);
    const ofChild = changes.filter((change) => change.tableId === child.tableId);
    expect(ofChild.map((change) => change.kind)).toEqual(['table.created', 'schema.changed', 'schema.changed']);
    expect(changes.every((change) => change.actor.id === actorId)).toBe(true);
  });
});

async function importWait(statusUrl: string) {
  const { waitForJob } = await import('./helpers/jobs.ts');
  const job = await waitForJob(suite.server, admin(), statusUrl);
  expect(job.state, JSON.stringify(job)).toBe('succeeded');
}

describe('what is not committed is not recorded', () => {
  it('a write refused by a rule (409) records nothing', async () => {
    const plain = await codedTable();
    const rule = await addUniqueRule(suite.server, admin(), plain, { fieldIds: ['Code'] });
    await created(rule.table, { Code: 'a' });
    const start = await head(plain.databaseId);
    const duplicate = await createRow(suite.server, admin(), rule.table, { Code: 'a' });
    expect(duplicate.status).toBe(409);
    expect(await changesAfter(plain.databaseId, start)).toEqual([]);
  });

  it('a transaction that rolls back after writing rows and history records nothing', async () => {
    const table = await codedTable();
    const start = await head(table.databaseId);
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)} (id, created_at, updated_at, f_${table.fields.Code!.toLowerCase()})
        VALUES ('01ARZ3NDEKTSV4RRFFQ69G5FAV', now(), now(), 'x')`);
      await client.query(
        `INSERT INTO ${rowsTableOf(table.databaseId, table.tableId).replace('"t_', '"h_')}
        (row_id, version, field_id, operation, value, mutation_id, actor_id, actor_kind, actor_name, changed_at)
        VALUES ('01ARZ3NDEKTSV4RRFFQ69G5FAV', 1, $1, 'create', '"x"', '01ARZ3NDEKTSV4RRFFQ69G5FAV', $2, 'user', 'A', now())`,
        [table.fields.Code, actorId],
      );
      const inside = await client.query(
        `SELECT count(*)::int AS n FROM ${schemaOf(table.databaseId)}.changes WHERE txid = pg_current_xact_id()`,
      );
      expect(inside.rows[0].n).toBe(1);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect(await changesAfter(table.databaseId, start)).toEqual([]);
  });
});

describe("the triggers' static statements (run under the schema's search_path)", () => {
  it('record into the schema’s feed whatever the writer’s search_path, and put that search_path back', async () => {
    const table = await codedTable();
    const start = await head(table.databaseId);
    const rowId = '01ARZ3NDEKTSV4RRFFQ69G5FAW';
    const client = await pool.connect();
    try {
      const schema = schemaOf(table.databaseId);
      await client.query('BEGIN');
      // Tables of the session's own, named and shaped like the feed's and first in its search_path: the triggers
      // must write past them into the schema's feed.
      await client.query(`CREATE TEMP TABLE changes (LIKE ${schema}.changes INCLUDING DEFAULTS) ON COMMIT DROP`);
      await client.query(
        `CREATE TEMP TABLE change_commits (LIKE ${schema}.change_commits INCLUDING ALL) ON COMMIT DROP`,
      );
      await client.query('SET LOCAL search_path = pg_temp, public');
      await client.query(
        `INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)} (id, created_at, updated_at, f_${table.fields.Code!.toLowerCase()})
        VALUES ($1, now(), now(), 'x')`,
        [rowId],
      );
      await client.query(
        `INSERT INTO ${rowsTableOf(table.databaseId, table.tableId).replace('"t_', '"h_')}
        (row_id, version, field_id, operation, value, mutation_id, actor_id, actor_kind, actor_name, changed_at)
        VALUES ($3, 1, $1, 'create', '"x"', $3, $2, 'user', 'A', now())`,
        [table.fields.Code, actorId, rowId],
      );
      const inside = await client.query(
        `SELECT current_setting('search_path') AS path, (SELECT count(*)::int FROM pg_temp.changes) AS captured`,
      );
      expect(inside.rows[0]).toEqual({ path: 'pg_temp, public', captured: 0 });
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect((await changesAfter(table.databaseId, start)).map(({ kind, rowId }) => ({ kind, rowId }))).toEqual([
      { kind: 'row.created', rowId },
    ]);
  });
});

describe('GET …/changes: pages, cursors and retention', () => {
  it('follows nextCursor through every change once, oldest first, and filters by tableId', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const first = await codedTable(databaseId);
    const second = await codedTable(databaseId);
    for (const value of ['a', 'b', 'c']) await created(first, { Code: value });
    for (const value of ['d', 'e']) await created(second, { Code: value });
    const changes = await allChanges(databaseId);
    expect(changes.map((change) => change.kind)).toEqual([
      'table.created',
      'table.created',
      ...Array(5).fill('row.created'),
    ]);
    expect(
      changes
        .slice(2)
        .map((change) => change.values?.[change.tableId === first.tableId ? first.fields.Code! : second.fields.Code!]),
    ).toEqual(['a', 'b', 'c', 'd', 'e']);
    const filtered = await feed(databaseId, `?tableId=${second.tableId}`);
    expect(filtered.data.map((change) => change.kind)).toEqual(['table.created', 'row.created', 'row.created']);
    expect(filtered.hasMore).toBe(false);
    const end = await feed(databaseId, `?after=${changes.at(-1)!.cursor}`);
    expect(end).toEqual({ data: [], nextCursor: changes.at(-1)!.cursor, hasMore: false });
    expect(await head(databaseId)).toBe(changes.at(-1)!.cursor);
  });

  it('a page that ends exactly at the limit has no more; one change more and it has, its cursor the last kept', async () => {
    const table = await codedTable();
    const start = await head(table.databaseId);
    for (const value of ['a', 'b', 'c']) await created(table, { Code: value });
    const exact = await feed(table.databaseId, `?limit=3&after=${start}`);
    expect(exact.data.map((change) => change.values?.[table.fields.Code!])).toEqual(['a', 'b', 'c']);
    expect(exact).toMatchObject({ nextCursor: exact.data[2]!.cursor, hasMore: false });
    const short = await feed(table.databaseId, `?limit=2&after=${start}`);
    expect(short.data).toEqual(exact.data.slice(0, 2));
    expect(short).toMatchObject({ nextCursor: exact.data[1]!.cursor, hasMore: true });
    expect(await feed(table.databaseId, `?limit=2&after=${short.nextCursor}`)).toEqual({
      data: [exact.data[2]],
      nextCursor: exact.data[2]!.cursor,
      hasMore: false,
    });
    expect(await feed(table.databaseId, `?limit=1&after=${exact.nextCursor}`)).toEqual({
      data: [],
      nextCursor: exact.nextCursor,
      hasMore: false,
    });
  });

  it('a reader sees a write committed after its last full page: a page read ahead that reached the end is not answered', async () => {
    const table = await codedTable();
    const start = await head(table.databaseId);
    for (const value of ['a', 'b', 'c']) await created(table, { Code: value });
    const codes = (page: { data: { values?: Record<string, unknown> | null }[] }) =>
      page.data.map((change) => change.values?.[table.fields.Code!]);
    // Two full pages in a row: the reader follows, so the page after (c, the feed's end) is read ahead at once
    // (src/catalog/change-read-ahead.ts).
    const first = await feed(table.databaseId, `?limit=1&after=${start}`);
    const second = await feed(table.databaseId, `?limit=1&after=${first.nextCursor}`);
    expect([...codes(first), ...codes(second), second.hasMore]).toEqual(['a', 'b', true]);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await created(table, { Code: 'd' });
    const third = await feed(table.databaseId, `?limit=1&after=${second.nextCursor}`);
    expect(codes(third)).toEqual(['c']);
    expect(third.hasMore).toBe(true);
    const fourth = await feed(table.databaseId, `?limit=1&after=${third.nextCursor}`);
    expect(codes(fourth)).toEqual(['d']);
  });

  it('answers 400 CURSOR_INVALID for a malformed cursor or one of another database, 422 for a limit out of range', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const other = await createDatabase(suite.server, suite.org);
    for (const cursor of ['nonsense', encodeChangeCursor(other, { position: 1n, seq: 1n }), 'YzEuWFhY']) {
      const response = await suite.server.request('GET', `${feedPath(databaseId)}?after=${cursor}`, { token: admin() });
      expectError(response, 400, 'CURSOR_INVALID');
    }
    for (const limit of ['0', '1001', 'x']) {
      expectError(
        await suite.server.request('GET', `${feedPath(databaseId)}?limit=${limit}`, { token: admin() }),
        422,
        'VALIDATION_FAILED',
      );
    }
  });

  it('prunes past the retention; a cursor from before answers 410 CURSOR_INVALID saying to resynchronise', async () => {
    const table = await codedTable();
    const start = await head(table.databaseId);
    await created(table, { Code: 'old' });
    const old = await head(table.databaseId);
    const removed = await pruneChangeFeed(pgExecutor(pool), 7, new Date(Date.now() + 8 * 86_400_000));
    expect(removed).toBeGreaterThanOrEqual(2);
    const stale = await suite.server.request('GET', `${feedPath(table.databaseId)}?after=${start}`, { token: admin() });
    expectError(stale, 410, 'CURSOR_INVALID');
    expect(stale.body.error.message).toMatch(/Resynchronise/);
    expect(await feed(table.databaseId, `?after=${old}`)).toEqual({ data: [], nextCursor: old, hasMore: false });
    expect(await feed(table.databaseId)).toEqual({ data: [], nextCursor: old, hasMore: false });
    expect(await head(table.databaseId)).toBe(old);
    await created(table, { Code: 'new' });
    expect((await feed(table.databaseId, `?after=${old}`)).data.map((change) => change.kind)).toEqual(['row.created']);
  });
});

describe("the answer: each change's JSON, written whole", () => {
  const MEMBERS = [
    'cursor',
    'kind',
    'tableId',
    'rowId',
    'version',
    'schemaVersion',
    'mutationId',
    'actor',
    'committedAt',
    'values',
    'previous',
  ];
  const EVERY_MEMBER =
    'cursor kind tableId rowId version schemaVersion mutationId actor { id kind } committedAt values previous';
  const pageQuery = (selection: string) =>
    `query ($orgId: ID!, $databaseId: ID!, $after: String) { databaseChanges(orgId: $orgId, databaseId: $databaseId, after: $after, limit: 1000) { ${selection} nextCursor hasMore } }`;

  async function graphPage(databaseId: string, selection: string, after?: string) {
    const response = await suite.server.graphql(
      pageQuery(selection),
      { orgId: suite.org.orgId, databaseId, ...(after ? { after } : {}) },
      { token: admin() },
    );
    expect(response.status, response.text).toBe(200);
    expect(response.body.errors).toBeUndefined();
    return response.body.data.databaseChanges;
  }

  it('answers every member in order, null where it does not apply, the cursor as encodeChangeCursor writes it', async () => {
    const table = await codedTable();
    const schema = schemaOf(table.databaseId);
    // Positions and seqs of 18-19 digits, the largest a feed reaches: the cursor (longer than base64's 76-character
    // lines) is still the one encodeChangeCursor writes, spliced in front of the JSON PostgreSQL built.
    await pool.query(`SELECT setval('${schema}.change_seq', 1234567890123456789)`);
    await pool.query(`UPDATE ${schema}.change_feed SET head_position = 987654321012345678`);
    const start = await head(table.databaseId);
    const row = await created(table, { Code: 'a "quoted" \\ line\nbreak', Qty: 7 });
    const response = await suite.server.request('GET', `${feedPath(table.databaseId)}?after=${start}`, {
      token: admin(),
    });
    expect(response.status, response.text).toBe(200);
    expect(Object.keys(response.body)).toEqual(['data', 'nextCursor', 'hasMore']);
    const [change] = ChangePageResponse.parse(response.body).data;
    expect(Object.keys(response.body.data[0])).toEqual(MEMBERS);
    const {
      rows: [stored],
    } = await pool.query(
      `SELECT cc.position::text AS position, c.seq::text AS seq FROM ${schema}.changes c JOIN ${schema}.change_commits cc USING (txid) WHERE c.row_id = $1`,
      [row.row.id],
    );
    const cursor = encodeChangeCursor(table.databaseId, { position: BigInt(stored.position), seq: BigInt(stored.seq) });
    expect(cursor.length).toBeGreaterThan(76);
    expect(change).toEqual({
      cursor,
      kind: 'row.created',
      tableId: table.tableId,
      rowId: row.row.id,
      version: '1',
      schemaVersion: null,
      mutationId: row.mutationId,
      actor: { id: actorId, kind: 'user' },
      committedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      values: { [table.fields.Code!]: 'a "quoted" \\ line\nbreak', [table.fields.Qty!]: 7 },
      previous: null,
    });
    expect(response.body.nextCursor).toBe(cursor);
  });

  it('/graphql answers only the members a selection names; dataJson is the REST page’s data', async () => {
    const table = await codedTable();
    const start = await head(table.databaseId);
    await created(table, { Code: 'a', Qty: 1 });
    await created(table, { Code: 'b' });
    const some = await graphPage(table.databaseId, 'data { kind values }', start);
    expect(some.data).toEqual([
      { kind: 'row.created', values: { [table.fields.Code!]: 'a', [table.fields.Qty!]: 1 } },
      { kind: 'row.created', values: { [table.fields.Code!]: 'b', [table.fields.Qty!]: null } },
    ]);
    const aliased = await graphPage(table.databaseId, 'data { at: committedAt who: actor { kind } }', start);
    expect(aliased.data.map((change: Record<string, unknown>) => Object.keys(change))).toEqual([
      ['at', 'who'],
      ['at', 'who'],
    ]);
    const rest = await feed(table.databaseId, `?after=${start}&limit=1000`);
    const every = await graphPage(table.databaseId, `data { ${EVERY_MEMBER} } dataJson`, start);
    expect(every.data).toEqual(rest.data);
    expect(every.dataJson).toEqual(rest.data);
    expect(every.nextCursor).toBe(rest.nextCursor);
  });
});

describe('waiting for changes', () => {
  it('wait holds an empty page until a change commits, and answers it', async () => {
    const table = await codedTable();
    const cursor = await head(table.databaseId);
    const polled = suite.server.request('GET', `${feedPath(table.databaseId)}?wait=20&after=${cursor}`, {
      token: admin(),
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const row = await created(table, { Code: 'late' });
    const response = await polled;
    expect(response.status, response.text).toBe(200);
    expect(response.body.data.map((change: { rowId: string }) => change.rowId)).toEqual([row.row.id]);
  });

  it('wait answers an empty page with the same cursor when nothing commits in time', async () => {
    const table = await codedTable();
    const cursor = await head(table.databaseId);
    expect(await feed(table.databaseId, `?wait=1&after=${cursor}`)).toEqual({
      data: [],
      nextCursor: cursor,
      hasMore: false,
    });
  });

  it('streams server-sent events with id = cursor, and resumes after Last-Event-ID', async () => {
    const table = await codedTable();
    const cursor = await head(table.databaseId);
    const headers = { authorization: `Bearer ${admin()}`, accept: 'text/event-stream' };
    const stream = await openEventStream(`${suite.server.url}${feedPath(table.databaseId)}?after=${cursor}`, {
      headers,
    });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const rows = [];
    for (const value of ['a', 'b', 'c']) rows.push(await created(table, { Code: value }));
    const first = await stream.next();
    const second = await stream.next();
    stream.close();
    expect(first).toMatchObject({ event: 'message', data: { kind: 'row.created', rowId: rows[0]!.row.id } });
    expect(first!.id).toBe(first!.data.cursor);
    expect(second!.data.rowId).toBe(rows[1]!.row.id);
    // Each event is the change exactly as a page answers it: every member, null where it does not apply.
    expect([first!.data, second!.data]).toEqual((await changesAfter(table.databaseId, cursor)).slice(0, 2));

    const resumed = await openEventStream(`${suite.server.url}${feedPath(table.databaseId)}`, {
      headers: { ...headers, 'last-event-id': second!.id! },
    });
    const third = await resumed.next();
    resumed.close();
    expect(third).toMatchObject({ id: third!.data.cursor, data: { kind: 'row.created', rowId: rows[2]!.row.id } });
  });

  // Not on Citus: there readers poll, nobody arms (docs/decisions/citus.md).
  it.skipIf(onCitus)(
    'a stream reads a feed being written without arming it, misses nothing, and arms once the writes stop',
    async () => {
      const table = await codedTable();
      const arms = await countFeedArms(pool, table.databaseId);
      const cursor = await head(table.databaseId);
      const stream = await openEventStream(`${suite.server.url}${feedPath(table.databaseId)}?after=${cursor}`, {
        headers: { authorization: `Bearer ${admin()}`, accept: 'text/event-stream' },
      });
      const events: StreamEvent[] = [];
      const reading = (async () => {
        for (;;) {
          const event = await stream.next();
          if (!event) return;
          events.push(event);
        }
      })();
      // The reader arms while it waits for the first change; then three writers commit for 800 ms, a commit every
      // few milliseconds: every read of the feed finds new changes, 16 or more of them at the reader's 50 ms pace.
      const first = await created(table, { Code: 'first' });
      await vi.waitFor(() => expect(events).toHaveLength(1));
      const armedBefore = await arms();
      const writes: string[] = [];
      const until = Date.now() + 800;
      await Promise.all(
        [1, 2, 3].map(async (writer) => {
          for (let index = 0; Date.now() < until; index += 1) {
            writes.push((await created(table, { Code: `w${writer}-${index}` })).row.id);
          }
        }),
      );
      await vi.waitFor(() => expect(events).toHaveLength(1 + writes.length), { timeout: 5_000 });
      const armedWhileWritten = (await arms()) - armedBefore;
      // Polled, not armed: a read finds nothing, and the stream arms, only where two commits were about 50 ms or
      // more apart, which a loaded machine's writers leave now and then; every read arming would be ~16 arms.
      const commitTimes = events.slice(1).map((event) => Date.parse(event.data.committedAt));
      const pauses = commitTimes.filter((time, index) => index > 0 && time - commitTimes[index - 1]! >= 40).length;
      expect(armedWhileWritten).toBeLessThanOrEqual(2 + pauses);
      // Quiet again: the reader arms and is woken by the next commit.
      await vi.waitFor(async () => expect(await arms()).toBeGreaterThan(armedBefore + armedWhileWritten));
      const last = await created(table, { Code: 'last' });
      await vi.waitFor(() => expect(events).toHaveLength(2 + writes.length));
      stream.close();
      await reading.catch(() => undefined);

      expect(writes.length).toBeGreaterThan(20);
      const rowIds = events.map((event) => event.data.rowId);
      expect(new Set(rowIds).size).toBe(rowIds.length);
      expect(new Set(rowIds)).toEqual(new Set([first.row.id, ...writes, last.row.id]));
      expect(rowIds.at(-1)).toBe(last.row.id);
      const cursors = events.map((event) => event.id!);
      expect(cursors).toEqual((await changesAfter(table.databaseId, cursor)).map((change) => change.cursor));
    },
  );

  it('four streams of one database in one process, sharing their reads, each see every change once and in order', async () => {
    const table = await codedTable();
    const cursor = await head(table.databaseId);
    const streams = await Promise.all(
      [1, 2, 3, 4].map(() =>
        openEventStream(`${suite.server.url}${feedPath(table.databaseId)}?after=${cursor}`, {
          headers: { authorization: `Bearer ${admin()}`, accept: 'text/event-stream' },
        }),
      ),
    );
    const received: StreamEvent[][] = streams.map(() => []);
    const reading = streams.map(async (stream, index) => {
      for (;;) {
        const event = await stream.next();
        if (!event) return;
        received[index]!.push(event);
      }
    });
    const writes: string[] = [];
    const until = Date.now() + 800;
    await Promise.all(
      [1, 2, 3].map(async (writer) => {
        for (let index = 0; Date.now() < until; index += 1)
          writes.push((await created(table, { Code: `s${writer}-${index}` })).row.id);
      }),
    );
    for (const events of received)
      await vi.waitFor(() => expect(events).toHaveLength(writes.length), { timeout: 5_000 });
    for (const stream of streams) stream.close();
    await Promise.allSettled(reading);

    const feedCursors = (await changesAfter(table.databaseId, cursor)).map((change) => change.cursor);
    expect(feedCursors).toHaveLength(writes.length);
    for (const events of received) expect(events.map((event) => event.id)).toEqual(feedCursors);
  });

  it('refuses a stream from a stale cursor with the 410 before any event', async () => {
    const table = await codedTable();
    const stale = encodeChangeCursor(table.databaseId, { position: 0n, seq: 0n });
    await pool.query(`UPDATE ${schemaOf(table.databaseId)}.change_feed SET pruned_position = 1, pruned_seq = 1`);
    const response = await suite.server.request('GET', feedPath(table.databaseId), {
      token: admin(),
      headers: { accept: 'text/event-stream', 'last-event-id': stale },
    });
    expectError(response, 410, 'CURSOR_INVALID');
  });

  it('the rowChanges subscription over /graphql sends changes as they commit, filtered by table', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const watched = await codedTable(databaseId);
    const other = await codedTable(databaseId);
    const events = await openEventStream(`${suite.server.url}/graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin()}`, accept: 'text/event-stream', 'content-type': 'application/json' },
      body: JSON.stringify({
        query:
          'subscription ($orgId: ID!, $databaseId: ID!, $tableId: ID) { rowChanges(orgId: $orgId, databaseId: $databaseId, tableId: $tableId) { kind tableId rowId values } }',
        variables: { orgId: suite.org.orgId, databaseId, tableId: watched.tableId },
      }),
    });
    expect(events.status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await created(other, { Code: 'ignored' });
    const row = await created(watched, { Code: 'seen' });
    const event = await events.next();
    events.close();
    expect(event).toEqual({
      event: 'next',
      data: {
        data: {
          rowChanges: {
            kind: 'row.created',
            tableId: watched.tableId,
            rowId: row.row.id,
            values: { [watched.fields.Code!]: 'seen', [watched.fields.Qty!]: null },
          },
        },
      },
    });
  });
  it('the rowChangesJson subscription sends each change whole, as a page answers it', async () => {
    const table = await codedTable();
    const cursor = await head(table.databaseId);
    const events = await openEventStream(`${suite.server.url}/graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin()}`, accept: 'text/event-stream', 'content-type': 'application/json' },
      body: JSON.stringify({
        query:
          'subscription ($orgId: ID!, $databaseId: ID!, $after: String) { rowChangesJson(orgId: $orgId, databaseId: $databaseId, after: $after) }',
        variables: { orgId: suite.org.orgId, databaseId: table.databaseId, after: cursor },
      }),
    });
    expect(events.status).toBe(200);
    const row = await created(table, { Code: 'whole' });
    const patched = await suite.server.request('PATCH', `${table.path}/rows/${row.row.id}`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1', values: { Code: 'changed' } },
    });
    expect(patched.status, patched.text).toBe(200);
    const received = [await events.next(), await events.next()];
    events.close();
    const page = await changesAfter(table.databaseId, cursor);
    expect(page.map((change) => change.kind)).toEqual(['row.created', 'row.updated']);
    expect(received).toEqual(page.map((change) => ({ event: 'next', data: { data: { rowChangesJson: change } } })));
  });
});

describe('authority', () => {
  let outsider: TestOrg;
  beforeAll(async () => {
    outsider = await createOrg(suite.server.prisma);
  });

  it('every member who can read rows may read the feed; a viewer included', async () => {
    const table = await codedTable();
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    expect((await feed(table.databaseId, '', viewer.apiKey)).data[0]!.kind).toBe('table.created');
  });

  it('another org’s database, an unknown one and a trashed one answer 404; no credential 401', async () => {
    const table = await codedTable();
    for (const path of [feedPath(table.databaseId), `${feedPath(table.databaseId)}/head`]) {
      expectError(await suite.server.request('GET', path, { token: outsider.adminKey }), 404, 'RESOURCE_NOT_FOUND');
      expectError(
        await suite.server.request('GET', path.replace(suite.org.orgId, outsider.orgId), { token: outsider.adminKey }),
        404,
        'RESOURCE_NOT_FOUND',
      );
      expect((await suite.server.request('GET', path)).status).toBe(401);
    }
    const unknown = await createDatabase(suite.server, outsider);
    expectError(await suite.server.request('GET', feedPath(unknown), { token: admin() }), 404, 'RESOURCE_NOT_FOUND');
    const databaseId = await createDatabase(suite.server, suite.org);
    const database = await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/databases/${databaseId}`, {
      token: admin(),
    });
    const trashed = await suite.server.request('DELETE', `/v1/orgs/${suite.org.orgId}/databases/${databaseId}`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: database.body.version },
    });
    expect(trashed.status, trashed.text).toBe(200);
    expectError(await suite.server.request('GET', feedPath(databaseId), { token: admin() }), 404, 'RESOURCE_NOT_FOUND');
  });
});
