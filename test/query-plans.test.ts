import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { selectFeedPage } from '../src/data/activity.ts';
import { resolvedOptions, type FieldDefinition } from '../src/data/field-types.ts';
import { deleteRow, rowGuardState, selectHistoryPage, selectRow, selectRowPage, updateRow, type RowEvent } from '../src/data/rows.ts';
import type { Statement } from '../src/data/sql.ts';
import { newId } from '../src/ids.ts';
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
  fields = [{ id: table.fields.Name!, name: 'Name', type: 'text', required: false, options: resolvedOptions('text', {}), position: 0 }];
  rowId = (await createRow(suite.server, suite.org.adminKey, table, { Name: 'a' })).body.row.id;
});
afterAll(() => client.end());

async function plan(statement: Statement): Promise<string> {
  const { rows } = await client.query(`EXPLAIN ${statement.sql}`, statement.params as unknown[]);
  return rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
}

const physical = () => ({ databaseId: table.databaseId, tableId: table.tableId, fields });
const event = (): RowEvent => ({
  orgId: suite.org.orgId, mutationId: newId(), activityId: newId(), summary: 's', at: new Date().toISOString(),
  actor: { id: suite.org.adminUserId, kind: 'user', name: 'Ada', key: null },
});

describe('id lookups use their indexes', () => {
  it.each([
    ['a row by id', () => selectRow(physical(), rowId)],
    ['the guard row of a table', () => rowGuardState(table.tableId)],
    ['a row update', () => updateRow(physical(), { rowId, expectedVersion: 1n, values: new Map([[fields[0]!.id, 'b']]), schemaVersion: 1, event: event() })],
    ['a row delete', () => deleteRow(physical(), { rowId, expectedVersion: 1n, schemaVersion: 1, event: event() })],
    ['a row page after a position', () => selectRowPage(physical(), { filter: null, keys: [], after: { values: [], rowId }, limit: 10 })],
    ['a row’s history', () => selectHistoryPage(physical(), rowId, { version: '2', fieldId: fields[0]!.id }, 10)],
    ['the activity of a table', () => selectFeedPage({ orgId: suite.org.orgId, tableId: table.tableId }, new Date().toISOString(), null, 10)],
    ['the activity of an org', () => selectFeedPage({ orgId: suite.org.orgId }, new Date().toISOString(), { occurredAt: new Date().toISOString(), id: newId() }, 10)],
  ])('%s', async (_name, statement) => {
    expect(await plan(statement())).not.toMatch(/Seq Scan on (t_|h_|data_tables|activity_events)/);
  });
});
