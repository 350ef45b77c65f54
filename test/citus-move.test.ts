import pg from 'pg';
import { describe, expect, inject, it } from 'vitest';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';
import type { ApiResponse } from './helpers/server.ts';

/**
 * A workspace database is one distributed schema on one Citus worker (docs/decisions/citus.md). Moving it to the
 * other worker while clients write must lose no acknowledged write, and every request must keep answering: a
 * brief 503 is acceptable, a 500 is not. Runs only on a cluster (`npm run test:citus`).
 */
const onCitus = inject('databaseNodes').length > 1;

/** Answers a client may get while the schema moves: success, or a 503 that says to retry. */
const RETRYABLE = new Set(['QUERY_TIMEOUT', 'DEPENDENCY_UNAVAILABLE']);

interface Placement {
  nodeport: number;
  shardid: string;
}

async function placements(url: string, databaseId: string): Promise<Placement[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<Placement>(
      `SELECT nodeport, shardid::text AS shardid FROM citus_shards WHERE table_name::text LIKE $1 ORDER BY shardid`,
      [`d_${databaseId.toLowerCase()}.%`],
    );
    return rows;
  } finally {
    await client.end();
  }
}

describe.skipIf(!onCitus)('a database schema moving between Citus workers (needs Citus: npm run test:citus)', () => {
  const suite = useServerWithOrg({ QUERY_TIMEOUT_MS: '10000' });

  it('keeps every acknowledged write and answers every request with success or a retryable 503', async () => {
    const table: TestTable = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    const url = suite.server.database.url;
    const before = await placements(url, table.databaseId);
    // The rows and history tables and the change feed's tables: one schema, all on one worker.
    expect(before.length).toBeGreaterThanOrEqual(2);
    expect(new Set(before.map((placement) => placement.nodeport)).size).toBe(1);
    const source = before[0]!.nodeport;
    const target = inject('databaseNodes')
      .slice(1)
      .map((node) => Number(new URL(node).port))
      .find((port) => port !== source)!;

    const acknowledged: string[] = [];
    const unexpected: ApiResponse[] = [];
    let moving = false;
    let moved = false;
    let writesDuringMove = 0;
    let writesAfterMove = 0;
    const check = (response: ApiResponse, success: number): boolean => {
      if (response.status === success) return true;
      if (response.status !== 503 || !RETRYABLE.has(response.body?.error?.code)) unexpected.push(response);
      return false;
    };
    const writer = async (name: string) => {
      for (let i = 0; !moved || writesAfterMove < 20; i += 1) {
        const response = await createRow(suite.server, suite.org.adminKey, table, { Name: `${name} ${i}` });
        if (check(response, 201)) {
          acknowledged.push(response.body.row.id);
          if (moved) writesAfterMove += 1;
          else if (moving) writesDuringMove += 1;
        }
      }
    };
    const reader = async () => {
      while (!moved || writesAfterMove < 20) {
        check(await suite.server.request('GET', `${table.path}/rows?limit=5`, { token: suite.org.adminKey }), 200);
      }
    };
    const clients = [writer('a'), writer('b'), reader()];

    await expect.poll(() => acknowledged.length, { timeout: 60_000, interval: 50 }).toBeGreaterThanOrEqual(20);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      moving = true;
      await admin.query(
        `SELECT citus_move_shard_placement($1::bigint, '127.0.0.1', $2, '127.0.0.1', $3, shard_transfer_mode => 'force_logical')`,
        [before[0]!.shardid, source, target],
      );
    } finally {
      moved = true;
      await admin.end();
    }
    await Promise.all(clients);

    expect(unexpected.map((response) => `${response.status} ${response.text}`)).toEqual([]);
    // The move copies the schema by logical replication and blocks writes only for its final catch-up.
    expect(writesDuringMove).toBeGreaterThan(0);
    const after = await placements(url, table.databaseId);
    expect(after.map((placement) => placement.nodeport)).toEqual(before.map(() => target));
    const stored = new pg.Client({ connectionString: url });
    await stored.connect();
    try {
      const { rows } = await stored.query<{ id: string }>(
        `SELECT id FROM d_${table.databaseId.toLowerCase()}.t_${table.tableId.toLowerCase()}`,
      );
      const present = new Set(rows.map((row) => row.id));
      expect(acknowledged.filter((id) => !present.has(id))).toEqual([]);
    } finally {
      await stored.end();
    }
    const listed = await suite.server.request('GET', `${table.path}/rows?limit=1`, { token: suite.org.adminKey });
    expect(listed.status, listed.text).toBe(200);
  });
});
