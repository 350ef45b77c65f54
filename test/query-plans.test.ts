import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { selectFeedPage } from '../src/catalog/activity-feed.ts';
import { FEED_START, selectChangeTextPage, sequenceChanges } from '../src/catalog/changes.ts';
import { resolvedOptions, type FieldDefinition } from '../src/data/field-types.ts';
import { lookupRows } from '../src/data/lookup.ts';
import { createSortIndex } from '../src/data/sort-indexes.ts';
import {
  deleteRow,
  rowGuardState,
  selectHistoryPage,
  selectRow,
  selectRowPage,
  updateRow,
  type RowEvent,
} from '../src/data/rows.ts';
import type { Statement } from '../src/data/statement.ts';
import { grantAuthenticatedAt, selectGrantPage } from '../src/identity/oauth/grants.ts';
import { newId } from '../src/kernel/ids.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Every lookup by id must be able to use its index. With sequential scans disabled, PostgreSQL still picks one
 * only when no index applies — which is what `char(26) = text` did to every id lookup until ids were bound as
 * bpchar. (On small test tables the planner would prefer a sequential scan anyway, hence the setting.)
 */
const suite = useServerWithOrg();
let client: pg.Client;
let table: TestTable;
let fields: FieldDefinition[];
let rowId: string;

beforeAll(async () => {
  client = new pg.Client({ connectionString: suite.server.database.url });
  await client.connect();
  await client.query('SET enable_seqscan = off');
  table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
  fields = [
    {
      id: table.fields.Name!,
      name: 'Name',
      type: 'text',
      required: false,
      options: resolvedOptions('text', {}),
      position: 0,
    },
  ];
  rowId = (await createRow(suite.server, suite.org.adminKey, table, { Name: 'a' })).body.row.id;
});
afterAll(() => client.end());

async function plan(statement: Statement): Promise<string> {
  const { rows } = await client.query(`EXPLAIN ${statement.sql}`, statement.params as unknown[]);
  return rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
}

const physical = () => ({ databaseId: table.databaseId, tableId: table.tableId, fields });
const event = (): RowEvent => ({
  orgId: suite.org.orgId,
  mutationId: newId(),
  activityId: newId(),
  summary: 's',
  at: new Date().toISOString(),
  actor: { id: suite.org.adminUserId, kind: 'user', name: 'Ada', key: null },
});

describe('id lookups use their indexes', () => {
  it.each([
    ['a row by id', () => selectRow(physical(), rowId)],
    ['the guard row of a table', () => rowGuardState(table.tableId)],
    [
      'a row update',
      () =>
        updateRow(physical(), {
          rowId,
          expectedVersion: 1n,
          values: new Map([[fields[0]!.id, 'b']]),
          schemaVersion: 1,
          event: event(),
        }),
    ],
    ['a row delete', () => deleteRow(physical(), { rowId, expectedVersion: 1n, schemaVersion: 1, event: event() })],
    [
      'a row page after a position',
      () => selectRowPage(physical(), { filter: null, keys: [], after: { values: [], rowId }, limit: 10 }),
    ],
    [
      'a guarded row page through a view',
      () =>
        selectRowPage(physical(), {
          guard: {
            orgId: suite.org.orgId,
            databaseId: table.databaseId,
            tableId: table.tableId,
            schemaVersion: 1,
            view: { id: newId(), version: '1', userId: suite.org.adminUserId },
          },
          filter: null,
          keys: [],
          after: { values: [], rowId },
          limit: 10,
        }),
    ],
    ['a row’s history', () => selectHistoryPage(physical(), rowId, { version: '2', fieldId: fields[0]!.id }, 10)],
    [
      'the activity of a table, with its scope',
      () => selectFeedPage({ orgId: suite.org.orgId, tableId: table.tableId }, new Date().toISOString(), null, 10),
    ],
    [
      'the activity of an org',
      () =>
        selectFeedPage(
          { orgId: suite.org.orgId },
          new Date().toISOString(),
          { occurredAt: new Date().toISOString(), id: newId() },
          10,
        ),
    ],
  ])('%s', async (_name, statement) => {
    expect(await plan(statement())).not.toMatch(
      /Seq Scan on (t_|h_|data_tables|databases|saved_views|activity_events)/,
    );
  });
});

describe('a guarded lookup by key', () => {
  // This table has no unique rule, so the key match itself scans it; what is checked is the guard's table head.
  it('reads the table head by its index', async () => {
    const statement = lookupRows(physical(), { ruleId: newId(), fields, enforcement: 'btree' }, [['a']], fields, {
      orgId: suite.org.orgId,
      databaseId: table.databaseId,
      tableId: table.tableId,
      schemaVersion: 1,
      view: null,
    });
    const text = await plan(statement);
    expect(text).toMatch(/data_tables/);
    expect(text).not.toMatch(/Seq Scan on data_tables/);
  });
});

describe('a change page walks the feed by position (issue 27)', () => {
  // Planned as the feed is between two ANALYZEs (sequential scans allowed, statistics of a feed that has grown
  // since): a join of commits and changes would hash every change after the cursor and sort them for one page.
  it.each([
    ['every table', null],
    ['one table', () => [table.tableId]],
  ])('%s: commits by their position index, each one’s changes by key, no hash of the feed', async (_name, tables) => {
    await client.query('SET enable_seqscan = on');
    try {
      const statement = selectChangeTextPage(table.databaseId, FEED_START, 1000, {
        only: tables ? tables() : null,
        active: [table.tableId],
      });
      const text = await plan(statement);
      expect(text).toMatch(/Index Scan using change_commits_position_key/);
      expect(text).toMatch(/Nested Loop/);
      expect(text).not.toMatch(/Hash Join|Merge Join|Seq Scan on changes/);
    } finally {
      await client.query('SET enable_seqscan = off');
    }
  });
});

describe('the sequencer walks the unpositioned commits by plain index scans (issue 27)', () => {
  // Each positioned commit leaves a dead entry in `change_commits_unpositioned` until a vacuum. A bitmap scan (the
  // planner's pick for `position IS NULL` while a new feed has no statistics) visits every one of them on every
  // call, and never marks them; a plain index scan marks each as it passes, so the next call skips it.
  it('reads them one by one in txid order from the partial index (the first and each next one)', async () => {
    await client.query('SET enable_seqscan = on');
    try {
      const text = await plan(sequenceChanges(table.databaseId));
      const walk = text
        .split('\n')
        .filter((line) => /Recursive Union|-> +Limit|using change_commits_unpositioned/.test(line));
      expect(walk[0]).toMatch(/Recursive Union/);
      expect(walk.slice(1, 5)).toEqual([
        expect.stringMatching(/-> +Limit/),
        expect.stringMatching(/-> +Index (Only )?Scan using change_commits_unpositioned/),
        expect.stringMatching(/-> +Limit/),
        expect.stringMatching(/-> +Index (Only )?Scan using change_commits_unpositioned/),
      ]);
    } finally {
      await client.query('SET enable_seqscan = off');
    }
  });
});

describe('OAuth grant lookups use their indexes', () => {
  it('a token’s grant reaches its authorization code through the code’s family_id', async () => {
    expect(await plan(grantAuthenticatedAt(newId()))).not.toMatch(/Seq Scan on oauth_(codes|tokens)/);
  });

  it('a user’s grant page is a range of the (user_id, family_id) index, not a pass over every user’s tokens', async () => {
    const text = await plan(selectGrantPage(suite.org.adminUserId, 'ZZZZZZZZZZZZZZZZZZZZZZZZZZ', 51));
    expect(text).toMatch(/Index (Only )?Scan (Backward )?using oauth_tokens_user_id_family_id_idx on oauth_tokens t/);
    expect(text).not.toMatch(/Seq Scan on oauth_tokens/);
  });
});

describe('sorted pages use their sort index (issue 14)', () => {
  const keys = () => [{ field: fields[0]!, direction: 'asc' as const }];
  const descending = () => [{ field: fields[0]!, direction: 'desc' as const }];

  beforeAll(async () => {
    const indexId = newId();
    const statement = createSortIndex(table.databaseId, table.tableId, indexId, [
      { fieldId: fields[0]!.id, direction: 'asc' },
    ]);
    await client.query(statement.sql);
    await client.query(
      createSortIndex(table.databaseId, table.tableId, newId(), [{ fieldId: fields[0]!.id, direction: 'desc' }]).sql,
    );
  });

  it('the first page reads the index in order (no sort of the table)', async () => {
    const text = await plan(
      selectRowPage(physical(), { filter: null, keys: keys(), after: null, limit: 10, indexed: true }),
    );
    expect(text).toMatch(/Index Scan using "?i_/);
    expect(text).not.toMatch(/Sort Key/);
  });

  it.each([
    [
      'ascending, after a value',
      () =>
        selectRowPage(physical(), {
          filter: null,
          keys: keys(),
          after: { values: ['a'], rowId },
          limit: 10,
          indexed: true,
        }),
      3,
    ],
    [
      'ascending, inside the NULLs',
      () =>
        selectRowPage(physical(), {
          filter: null,
          keys: keys(),
          after: { values: [null], rowId },
          limit: 10,
          indexed: true,
        }),
      1,
    ],
    [
      'descending, after a value',
      () =>
        selectRowPage(physical(), {
          filter: null,
          keys: descending(),
          after: { values: ['a'], rowId },
          limit: 10,
          indexed: true,
        }),
      2,
    ],
    [
      'descending, inside the NULLs',
      () =>
        selectRowPage(physical(), {
          filter: null,
          keys: descending(),
          after: { values: [null], rowId },
          limit: 10,
          indexed: true,
        }),
      2,
    ],
  ])('a later page starts each range scan at the cursor: %s', async (_name, statement, ranges) => {
    const text = await plan(statement());
    expect(text).not.toMatch(/Seq Scan/);
    expect(text.match(/Index Scan using "?i_/g)).toHaveLength(ranges);
    expect(text.match(/Index Cond/g)).toHaveLength(ranges);
    expect(text).not.toMatch(/Filter:/);
  });

  // A batch commits its changes together: a page inside it must read the changes it answers, not the whole commit
  // (and the next commit) to sort them (pageStatement's inner LIMIT).
  it('a page inside a large commit reads about as many changes as it answers', async () => {
    const batched = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    const response = await suite.server.request('POST', `${batched.path}/rows/batch`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: {
        expectedSchemaVersion: batched.schemaVersion,
        operations: Array.from({ length: 300 }, (_, index) => ({ op: 'create', values: { Name: `n${index}` } })),
      },
    });
    expect(response.status, response.text).toBe(200);
    await client.query(sequenceChanges(batched.databaseId).sql);
    const statement = selectChangeTextPage(batched.databaseId, FEED_START, 10, {
      only: null,
      active: [batched.tableId],
    });
    const { rows } = await client.query(
      `EXPLAIN (ANALYZE, FORMAT JSON) ${statement.sql}`,
      statement.params as unknown[],
    );
    expect(changesRead(rows[0]['QUERY PLAN'][0].Plan)).toBeLessThanOrEqual(3 * 11);
  });
});

interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  Plans?: PlanNode[];
}

/** The rows the plan's scans of `changes` produced, over all their loops. */
function changesRead(node: PlanNode): number {
  const own = node['Relation Name'] === 'changes' ? node['Actual Rows'] * node['Actual Loops'] : 0;
  return own + (node.Plans ?? []).reduce((sum, child) => sum + changesRead(child), 0);
}
