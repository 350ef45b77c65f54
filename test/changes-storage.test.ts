import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readChanges } from '../src/catalog/changes.ts';
import { pgExecutor } from '../src/db/sql.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

const suite = useServerWithOrg();
let pool: pg.Pool;
let table: TestTable;

beforeAll(async () => {
  pool = new pg.Pool({ connectionString: suite.server.database.url, max: 4 });
  table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text', required: true }, { name: 'Age', type: 'integer' }]);
});
afterAll(() => pool.end());

describe('change feed storage', () => {
  it('records a table and a row create in commit order', async () => {
    const created = await createRow(suite.server, suite.org.adminKey, table, { Name: 'Ada', Age: 36 });
    expect(created.status, created.text).toBe(201);
    const page = await readChanges(pgExecutor(pool), { databaseId: table.databaseId, after: null, limit: 10 });
    expect(page.data.map((change) => change.kind)).toEqual(['table.created', 'row.created']);
    expect(page.data[1]).toMatchObject({
      tableId: table.tableId, rowId: created.body.row.id, version: '1',
      values: { [table.fields.Name!]: 'Ada', [table.fields.Age!]: 36 },
    });
  });
});
