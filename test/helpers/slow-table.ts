import pg from 'pg';
import { vi } from 'vitest';
import { columnOf, rowsTableOf } from '../../src/data/identifiers.ts';
import type { TestOrg } from './factories.ts';
import type { TestServer } from './server.ts';
import { createTable, type TestTable } from './workspace.ts';

/**
 * `count` iContains conditions on Name with distinct values (PostgreSQL folds identical OR arms into one, which would
 * make the scan cheap). 25 is the most the cost budget allows.
 */
export const textSearches = (count: number) => ({
  or: Array.from({ length: count }, (_item, index) => ({ field: 'Name', op: 'iContains', value: `zqNx${index}` })),
});

/** A read that matches nothing and must scan every row with 25 text searches each: seconds of real work. */
export const slowRowsPath = (table: TestTable) =>
  `${table.path}/rows?limit=1&where=${encodeURIComponent(JSON.stringify(textSearches(25)))}`;

/**
 * A one-field table (Name, text) holding `rows` rows, seeded in one statement on a connection of our own (the
 * service's connections carry the statement budget, which may be set low).
 */
export async function createSlowTable(server: TestServer, org: TestOrg, rows = 200_000): Promise<TestTable> {
  const table = await createTable(server, org, [{ name: 'Name', type: 'text', options: { maxLength: 100 } }], {
    name: 'Big',
  });
  const client = new pg.Client({ connectionString: server.database.url });
  await client.connect();
  try {
    const target = rowsTableOf(table.databaseId, table.tableId);
    await client.query(
      `
      INSERT INTO ${target} (id, version, created_at, updated_at, ${columnOf(table.fields.Name!)})
      SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), md5(g::text) || ' customer ' || g FROM generate_series(1, $1::int) AS g`,
      [rows],
    );
    await client.query(`ANALYZE ${target}`);
  } finally {
    await client.end();
  }
  return table;
}

/**
 * Holds the table's rows locked (ACCESS EXCLUSIVE, on a connection of our own) until `release`: every read of it
 * then waits, holding its pooled connection, without burning the CPU that scanning `createSlowTable`'s rows takes
 * (12 such scans cost a loaded 2-core machine over a minute). For tests of what waiting reads may hold, not of
 * how long a read may take.
 */
export async function holdTable(server: TestServer, table: TestTable): Promise<{ release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: server.database.url });
  await client.connect();
  await client.query(`BEGIN; LOCK TABLE ${rowsTableOf(table.databaseId, table.tableId)} IN ACCESS EXCLUSIVE MODE`);
  return {
    release: async () => {
      await client.query('COMMIT');
      await client.end();
    },
  };
}

/**
 * Polls PostgreSQL (every 25 ms, on one connection of our own, up to `deadlineMs`) until the number of the service's
 * statements scanning this table with a text search satisfies `holds`; returns that number.
 */
export async function waitForScans(
  server: TestServer,
  table: TestTable,
  holds: (count: number) => boolean,
  deadlineMs = 30_000,
): Promise<number> {
  const client = new pg.Client({ connectionString: server.database.url });
  await client.connect();
  try {
    return await vi.waitFor(
      async () => {
        const { rows } = await client.query<{ count: number }>(
          `SELECT count(*)::int AS count FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE $1`,
          [`%FROM ${rowsTableOf(table.databaseId, table.tableId)}%ILIKE%`],
        );
        const count = rows[0]!.count;
        if (holds(count)) return count;
        throw new Error(`scans of the table stayed at ${count}`);
      },
      { timeout: deadlineMs, interval: 25 },
    );
  } finally {
    await client.end();
  }
}
