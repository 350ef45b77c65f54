import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Change } from '../src/catalog/changes.ts';
import { ChangePageResponse } from '../src/contracts/changes.ts';
import type { FieldDefinition } from '../src/data/field-types.ts';
import { historyTableOf, rowsTableOf } from '../src/data/identifiers.ts';
import { updateRow, type PhysicalTable } from '../src/data/rows.ts';
import { newId } from '../src/kernel/ids.ts';
import { addMember, idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Issue 27's guarantee: a reader that follows nextCursor while 8 writers commit at once sees every committed change
 * exactly once, in commit order, checked against the rows' cell history. Besides the 8 HTTP writers, two writers on
 * raw connections hold transactions open across the reader's pages (their changes get their `seq` early and commit
 * late, which a read by insert order would skip) and update rows only after they have their transaction id (so xid
 * order is not version order). Checked by mutation: positions taken at insert, or a batch ordered by xid, fail it.
 */
const suite = useServerWithOrg({
  // The slow writers hold rows on purpose across the reader's pages, and HTTP writers updating those rows wait for
  // them: at a high load on Citus that wait outlasted the 5 s statement budget (a 503), which is not under test here.
  QUERY_TIMEOUT_MS: '60000',
  // More connections than the 8 writers and the reader: the slow writers commit only after the reader has read on,
  // and HTTP writers updating their rows wait for them holding a connection each. With the suites' pool of 5, five
  // such waits left the reader no connection: each side waited for the other until a request's 10 s body timeout
  // answered 408 (a Citus run on a slow machine, twice in two sessions).
  DATABASE_POOL_SIZE: '16',
  RATE_LIMIT_RPS: '0',
  RATE_LIMIT_BURST: '0',
  CONCURRENCY_LIMIT: '0',
  ORG_CONCURRENCY_LIMIT: '0',
});
const WRITERS = 8;
const ROUNDS = 30;
let pool: pg.Pool;
let table: TestTable;
let physical: PhysicalTable;
const keys: string[] = [];

beforeAll(async () => {
  pool = new pg.Pool({ connectionString: suite.server.database.url, max: 6 });
  table = await createTable(suite.server, suite.org, [
    { name: 'Code', type: 'text', required: true },
    { name: 'Qty', type: 'integer' },
  ]);
  const schema = await suite.server.request('GET', `${table.path}/schema`, { token: suite.org.adminKey });
  physical = { databaseId: table.databaseId, tableId: table.tableId, fields: schema.body.fields as FieldDefinition[] };
  for (let index = 0; index < WRITERS; index += 1)
    keys.push((await addMember(suite.server.prisma, suite.org.orgId, 'member')).apiKey);
});
afterAll(() => pool.end());

const shared: { id: string; version: string }[] = [];
/** Pages the reader has read so far: the slow writers commit only after it read on. */
let pagesRead = 0;

async function httpWriter(token: string, seed: number): Promise<void> {
  for (let round = 0; round < ROUNDS; round += 1) {
    const pick = shared[(seed * 7 + round * 13) % Math.max(shared.length, 1)];
    if (round % 3 === 0 || !pick) {
      const response = await createRow(suite.server, token, table, { Code: `w${seed}-${round}`, Qty: round });
      expect(response.status, response.text).toBe(201);
      shared.push({ id: response.body.row.id, version: '1' });
    } else {
      const response = await suite.server.request('PATCH', `${table.path}/rows/${pick.id}`, {
        token,
        idempotencyKey: idempotencyKey(),
        body: { expectedVersion: pick.version, values: { Qty: seed * 1000 + round } },
      });
      if (response.status === 200) pick.version = response.body.row.version;
      else if (response.status === 409) pick.version = response.body.error.details.currentVersion;
      else expect(response.status, response.text).toBe(200);
    }
  }
}

/**
 * Holds each transaction open after its first write (so that write's `seq` is old when it commits) until the reader
 * has read two more pages.
 */
async function slowWriter(rounds: number): Promise<void> {
  for (let round = 0; round < rounds; round += 1) {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_current_xact_id()');
      await client.query('SELECT pg_sleep(0.03)');
      const target = shared[(round * 5) % Math.max(shared.length, 1)];
      if (target) {
        const [current] = (
          await client.query(
            `SELECT version::text AS version FROM ${rowsTableOf(table.databaseId, table.tableId)} WHERE id = $1 FOR UPDATE`,
            [target.id],
          )
        ).rows;
        const statement = updateRow(physical, {
          rowId: target.id,
          expectedVersion: BigInt(current.version),
          schemaVersion: table.schemaVersion,
          values: new Map([[physical.fields[1]!.id, 100_000 + round]]),
          event: {
            orgId: suite.org.orgId,
            mutationId: newId(),
            activityId: newId(),
            summary: 'slow',
            at: new Date().toISOString(),
            actor: { id: suite.org.adminUserId, kind: 'user', name: 'Slow', key: null },
          },
        });
        await client.query(statement.sql, statement.params as unknown[]);
      }
      // Open across two of the reader's pages, while the HTTP writers commit: a feed that handed out this
      // transaction's place before its COMMIT would let the reader pass it.
      const pagesBefore = pagesRead;
      await vi.waitFor(() => expect(pagesRead).toBeGreaterThanOrEqual(pagesBefore + 2), {
        timeout: 60_000,
        interval: 5,
      });
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  }
}

async function page(after: string | null) {
  const response = await suite.server.request(
    'GET',
    `/v1/orgs/${suite.org.orgId}/databases/${table.databaseId}/changes?limit=7${after ? `&after=${after}` : ''}`,
    { token: suite.org.adminKey },
  );
  expect(response.status, response.text).toBe(200);
  return ChangePageResponse.parse(response.body);
}

describe('the change feed under concurrent writers', () => {
  it('a reader following nextCursor sees every committed change once, in commit order (versions ascending per row)', async () => {
    for (let index = 0; index < 4; index += 1) {
      const response = await createRow(suite.server, suite.org.adminKey, table, { Code: `seed${index}` });
      shared.push({ id: response.body.row.id, version: '1' });
    }
    const seen: ReturnType<typeof ChangePageResponse.parse>['data'] = [];
    let done = false;
    const reader = (async () => {
      let cursor: string | null = null;
      for (;;) {
        const finished = done;
        const next = await page(cursor);
        pagesRead += 1;
        seen.push(...next.data);
        cursor = next.nextCursor;
        if (finished && next.data.length === 0) return;
      }
    })();
    await Promise.all([...keys.map((key, index) => httpWriter(key, index)), slowWriter(25), slowWriter(25)]);
    done = true;
    await reader;

    const rowChanges = seen.filter((change) => change.kind.startsWith('row.'));
    const history = await pool.query<{ row_id: string; version: string; operation: string }>(
      `SELECT row_id, version::text AS version, min(operation) AS operation FROM ${historyTableOf(table.databaseId, table.tableId)}
        GROUP BY row_id, version ORDER BY row_id, version`,
    );
    const key = (change: { rowId?: string | null; row_id?: string; version?: string | null }) =>
      `${change.rowId ?? change.row_id}@${change.version}`;
    const feedKeys = rowChanges.map(key);
    expect(new Set(feedKeys).size, 'no change twice').toBe(feedKeys.length);
    expect([...feedKeys].sort()).toEqual(history.rows.map(key).sort());
    const kinds: Record<string, Change['kind']> = { create: 'row.created', update: 'row.updated' };
    const byKey = new Map(rowChanges.map((change) => [key(change), change]));
    for (const row of history.rows) expect(byKey.get(key(row))!.kind).toBe(kinds[row.operation]);
    const last = new Map<string, bigint>();
    for (const change of rowChanges) {
      const previous = last.get(change.rowId!) ?? 0n;
      expect(BigInt(change.version!), `row ${change.rowId} in version order`).toBeGreaterThan(previous);
      last.set(change.rowId!, BigInt(change.version!));
    }
    // The feed's values are the history's: each update's Qty is what the history recorded for that version.
    const qty = physical.fields[1]!.id;
    const cells = await pool.query<{ key: string; value: unknown }>(
      `SELECT row_id || '@' || version AS key, value FROM ${historyTableOf(table.databaseId, table.tableId)} WHERE field_id = $1`,
      [qty],
    );
    for (const cell of cells.rows) expect(byKey.get(cell.key)!.values![qty]).toEqual(cell.value);
    expect(rowChanges.length).toBeGreaterThan(WRITERS * ROUNDS * 0.9);
    // 240 HTTP writes and 50 slow transactions that each wait for two of the reader's pages: ~20 s alone, more when
    // the machine is shared.
  }, 120_000);
});
