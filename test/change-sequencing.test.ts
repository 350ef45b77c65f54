import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SharedSequencer } from '../src/catalog/change-sequencing.ts';
import { sequenceChanges } from '../src/catalog/changes.ts';
import { pgExecutor, type SqlExecutor } from '../src/db/sql.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Issue 27: a process's readers of one database share its sequencer calls (src/catalog/change-sequencing.ts), and a
 * reader never takes the answer of a call that was already running when it asked.
 */
const suite = useServerWithOrg();
let pool: pg.Pool;
let table: TestTable;

beforeAll(async () => {
  pool = new pg.Pool({ connectionString: suite.server.database.url, max: 4 });
  table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
});
afterAll(() => pool.end());

const SEQUENCER_SQL = () => sequenceChanges(table.databaseId).sql;

/** The pool's executor, counting the sequencer's calls and able to hold a call's rows back once it has run. */
function instrumented() {
  const sql = pgExecutor(pool);
  const seen = { calls: 0, hold: null as Promise<void> | null };
  const executor: SqlExecutor = {
    ...sql,
    query: async <Row>(text: string, params?: readonly unknown[]) => {
      if (text === SEQUENCER_SQL()) seen.calls += 1;
      const rows = await sql.query<Row>(text, params);
      if (seen.hold) await seen.hold;
      return rows;
    },
    run: (statement) => executor.query(statement.sql, statement.params),
  };
  return { executor, seen };
}

async function created(name: string) {
  const response = await createRow(suite.server, suite.org.adminKey, table, { Name: name });
  expect(response.status, response.text).toBe(201);
}

describe('shared sequencer calls', () => {
  it('twenty readers asking at once share at most two calls, and all see every commit before they asked', async () => {
    for (const name of ['a', 'b', 'c']) await created(name);
    const { executor, seen } = instrumented();
    const sequencer = new SharedSequencer(executor);
    const states = await Promise.all(Array.from({ length: 20 }, () => sequencer.sequence(table.databaseId)));
    expect(seen.calls).toBeLessThanOrEqual(2);
    const head = (await pgExecutor(pool).run<{ headPosition: string }>(sequenceChanges(table.databaseId)))[0]!;
    for (const state of states) expect(state.head.position).toBe(BigInt(head.headPosition));
  });

  it('a reader that asks while a call runs gets the next call, which sees a commit made meanwhile', async () => {
    const { executor, seen } = instrumented();
    const sequencer = new SharedSequencer(executor);
    let release!: () => void;
    seen.hold = new Promise((resolve) => {
      release = resolve;
    });
    const running = sequencer.sequence(table.databaseId);
    await expect.poll(() => seen.calls).toBe(1);
    await created('meanwhile');
    const asked = sequencer.sequence(table.databaseId);
    seen.hold = null;
    release();
    const [before, after] = await Promise.all([running, asked]);
    expect(seen.calls).toBe(2);
    // The running call's snapshot predates the commit; the reader that asked after it sees it.
    expect(after.head.position).toBe(before.head.position + 1n);
  });

  it('a failed call fails its readers only; the readers queued behind it get a call of their own', async () => {
    const sql = pgExecutor(pool);
    let failures = 1;
    const executor: SqlExecutor = {
      ...sql,
      query: async <Row>(text: string, params?: readonly unknown[]) => {
        if (text === SEQUENCER_SQL() && failures-- > 0) {
          await new Promise((resolve) => setTimeout(resolve, 50));
          throw new Error('connection lost');
        }
        return sql.query<Row>(text, params);
      },
      run: (statement) => executor.query(statement.sql, statement.params),
    };
    const sequencer = new SharedSequencer(executor);
    const failed = sequencer.sequence(table.databaseId);
    const queued = sequencer.sequence(table.databaseId);
    await expect(failed).rejects.toThrow('connection lost');
    expect((await queued).head.position).toBeGreaterThan(0n);
  });
});
