import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, inject, vi } from 'vitest';
import { ChangeHeadResponse, ChangePageResponse } from '../src/contracts/changes.ts';
import { columnOf, historyTableOf, rowsTableOf, schemaOf } from '../src/data/identifiers.ts';
import { newId } from '../src/kernel/ids.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Issue 27: a reader waiting on an armed feed is woken by the first writer that commits, and misses no other commit.
 * Writers committing while the feed is armed do not queue on the arm: the first to lock its row disarms it and
 * notifies, the others skip the locked row (`FOR UPDATE SKIP LOCKED` in `wds_changes_committed`). A writer that
 * skipped may commit after the notification went out; the reader's next arm waits for it (the writers' shared
 * advisory lock), so the read after that arm sees it. The test holds each writer inside its COMMIT, after the COMMIT
 * trigger, with a test-only deferred trigger that waits on an advisory lock the test holds, and interleaves them.
 * Not on Citus: there readers poll, nobody arms (docs/decisions/citus.md).
 */
const onCitus = inject('databaseNodes').length > 1;
const suite = useServerWithOrg();
let pool: pg.Pool;
let control: pg.Client;
let table: TestTable;

/** Advisory key class of the test's holds (the feed's arm uses 27). */
const HOLD = 28;

beforeAll(async () => {
  pool = new pg.Pool({ connectionString: suite.server.database.url, max: 4 });
  control = new pg.Client({ connectionString: suite.server.database.url });
  await control.connect();
  table = await createTable(suite.server, suite.org, [{ name: 'Code', type: 'text', required: true }]);
  const schema = schemaOf(table.databaseId);
  // Fires after `committed` (same event, triggers fire in name order), so the writer holds the arm row if it took it.
  await control.query(`CREATE FUNCTION ${schema}.test_hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF coalesce(current_setting('wds_test.hold', true), '') <> '' THEN
        PERFORM pg_advisory_xact_lock(${HOLD}, current_setting('wds_test.hold')::int);
      END IF;
      RETURN NULL;
    END $$`);
  await control.query(`CREATE CONSTRAINT TRIGGER test_hold_commit AFTER INSERT ON ${schema}.change_commits
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ${schema}.test_hold_commit()`);
});
afterAll(async () => {
  await control?.end();
  await pool?.end();
});

const feedPath = () => `/v1/orgs/${suite.org.orgId}/databases/${table.databaseId}/changes`;

/** A transaction that created one row (row and history, as the service writes them), left open. */
async function openWriter(hold: number): Promise<{ client: pg.PoolClient; rowId: string }> {
  const client = await pool.connect();
  const rowId = newId();
  await client.query('BEGIN');
  await client.query(`SELECT set_config('wds_test.hold', $1, true)`, [String(hold)]);
  await client.query(
    `INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)} (id, created_at, updated_at, ${columnOf(table.fields.Code!)})
     VALUES ($1, now(), now(), 'x')`,
    [rowId],
  );
  await client.query(
    `INSERT INTO ${historyTableOf(table.databaseId, table.tableId)}
       (row_id, version, field_id, operation, value, mutation_id, actor_id, actor_kind, actor_name, changed_at)
     VALUES ($1, 1, $2, 'create', '"x"', $1, $3, 'user', 'Writer', now())`,
    [rowId, table.fields.Code, suite.org.adminUserId],
  );
  return { client, rowId };
}

/** True once a session waits, not granted, for the advisory lock (classId, objId). */
async function waitsFor(classId: number, objId: string): Promise<boolean> {
  const { rows } = await control.query(
    `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
        AND classid::bigint = $1::bigint AND objid::bigint = $2::bigint`,
    [classId, objId],
  );
  return rows[0].n > 0;
}

async function isArmed(): Promise<boolean> {
  const { rows } = await control.query(`SELECT armed FROM ${schemaOf(table.databaseId)}.change_arm`);
  return rows[0].armed;
}

describe.skipIf(onCitus)('waking a reader while two writers commit on an armed feed', () => {
  it('the writer that skipped the arm row (another was disarming it) is not missed: the next arm waits for its commit', async () => {
    const headed = await suite.server.request('GET', `${feedPath()}/head`, { token: suite.org.adminKey });
    const start = ChangeHeadResponse.parse(headed.body).cursor;
    await control.query('SELECT pg_advisory_lock($1, 1), pg_advisory_lock($1, 2)', [HOLD]);
    const first = await openWriter(1);
    const second = await openWriter(2);
    let firstCommit: Promise<unknown> | undefined;
    let secondCommit: Promise<unknown> | undefined;
    try {
      const waiting = suite.server.request('GET', `${feedPath()}?wait=25&after=${start}`, {
        token: suite.org.adminKey,
      });
      await vi.waitFor(async () => expect(await isArmed()).toBe(true), { timeout: 20_000, interval: 20 });

      // The first writer disarms the feed in its COMMIT and holds the arm row there.
      firstCommit = first.client.query('COMMIT');
      await vi.waitFor(async () => expect(await waitsFor(HOLD, '1')).toBe(true), { timeout: 20_000, interval: 20 });
      expect(await isArmed()).toBe(true);
      // The second finds the arm row locked and goes on (it would queue on the row lock if it did not skip it).
      secondCommit = second.client.query('COMMIT');
      await vi.waitFor(async () => expect(await waitsFor(HOLD, '2')).toBe(true), { timeout: 20_000, interval: 20 });

      // The first commits and notifies: the waiting reader wakes with its row (the second is not committed yet).
      await control.query('SELECT pg_advisory_unlock($1, 1)', [HOLD]);
      await firstCommit;
      const woken = await waiting;
      expect(woken.status, woken.text).toBe(200);
      const page = ChangePageResponse.parse(woken.body);
      expect(page.data.map((change) => change.rowId)).toEqual([first.rowId]);

      // Waiting again, the reader re-arms; the arm waits for the second writer's commit, then the read sees it.
      const again = suite.server.request('GET', `${feedPath()}?wait=25&after=${page.nextCursor}`, {
        token: suite.org.adminKey,
      });
      // pg_locks shows the lock's second key as an oid: hashtext's int4, read unsigned.
      const { rows } = await control.query('SELECT hashtext($1)::bigint & 4294967295 AS key', [table.databaseId]);
      await vi.waitFor(async () => expect(await waitsFor(27, String(rows[0].key))).toBe(true), {
        timeout: 20_000,
        interval: 20,
      });
      await control.query('SELECT pg_advisory_unlock($1, 2)', [HOLD]);
      await secondCommit;
      const next = await again;
      expect(next.status, next.text).toBe(200);
      expect(ChangePageResponse.parse(next.body).data.map((change) => change.rowId)).toEqual([second.rowId]);
    } finally {
      await control.query('SELECT pg_advisory_unlock_all()');
      await Promise.allSettled([firstCommit, secondCommit]);
      first.client.release();
      second.client.release();
    }
  });
});
