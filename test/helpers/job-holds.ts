import pg from 'pg';
import { vi } from 'vitest';

/**
 * Holds that stop a job at a chosen point with a lock the test owns, so that a cancel, a write or a kill lands at
 * that point on any machine, however fast or loaded.
 */

/** Polls (every 25 ms, up to 60 s) until the count query answers more than zero. */
export async function waitFor(client: pg.Client, countSql: string, params: unknown[] = []): Promise<void> {
  await vi.waitFor(
    async () => {
      const { rows } = await client.query<{ n: number }>(countSql, params);
      if (rows[0]!.n === 0) throw new Error(`timed out waiting for: ${countSql}`);
    },
    { timeout: 60_000, interval: 25 },
  );
}

async function connect(databaseUrl: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  return client;
}

/** A connection of its own for the length of `work`: SQL beside the service's pools, which a hold may keep busy. */
export async function withClient<T>(databaseUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = await connect(databaseUrl);
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/**
 * pg_locks and pg_stat_activity show the whole cluster, where other test files (and other people's runs) hold
 * locks too: every look is narrowed to this database.
 */
const HERE = 'database = (SELECT oid FROM pg_database WHERE datname = current_database())';

/**
 * Resolves once a statement of this database waits for a row or table lock, or for a job's step lock (a cancel
 * queued behind the step in progress, src/jobs/engine/sql/queue.ts); not for another advisory lock, such as the
 * holds' own.
 */
export const lockWaiter = (client: pg.Client) =>
  waitFor(
    client,
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
        AND (wait_event <> 'advisory' OR query LIKE '%''job-step:''%')`,
  );

export interface JobUpdateHold {
  /** Resolves once a matching UPDATE waits on the hold (its transaction holds the job row meanwhile). */
  reached(): Promise<void>;
  /** Resolves once another statement waits for a row lock or a step lock, e.g. a cancel queued behind the held step. */
  queuedBehind(): Promise<void>;
  /** Lets the held UPDATE (and any later match) go on; the trigger stays until `release`. */
  unlock(): Promise<void>;
  /** Unlocks, then removes the trigger (which waits for the transactions that updated `public.jobs` to end). */
  release(): Promise<void>;
}

let holds = 0;

/**
 * Makes every UPDATE of a `public.jobs` row that matches `when` (a trigger's WHEN condition over OLD and NEW) wait
 * on an advisory lock this test holds: a step's checkpoint, or a cancel request. Each hold has its own lock and
 * trigger, so a test may hold two points of one job.
 */
export async function holdJobUpdate(databaseUrl: string, when: string): Promise<JobUpdateHold> {
  holds += 1;
  const lock = 615_243 + holds;
  const name = `test_hold_${holds}`;
  const client = await connect(databaseUrl);
  await client.query(`SELECT pg_advisory_lock(${lock})`);
  await client.query(`CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql
    AS $$ BEGIN PERFORM pg_advisory_xact_lock(${lock}); RETURN NEW; END $$`);
  await client.query(
    `CREATE TRIGGER ${name} BEFORE UPDATE ON public.jobs FOR EACH ROW WHEN (${when}) EXECUTE FUNCTION ${name}()`,
  );
  let locked = true;
  const unlock = async () => {
    if (locked) await client.query(`SELECT pg_advisory_unlock(${lock})`);
    locked = false;
  };
  return {
    reached: () =>
      waitFor(
        client,
        `SELECT count(*)::int AS n FROM pg_locks WHERE ${HERE} AND locktype = 'advisory' AND objid = ${lock} AND NOT granted`,
      ),
    queuedBehind: () => lockWaiter(client),
    unlock,
    release: async () => {
      await unlock();
      await client.query(`DROP TRIGGER ${name} ON public.jobs`);
      await client.query(`DROP FUNCTION ${name}()`);
      await client.end();
    },
  };
}

/** SQL: true while a statement of this database waits for a lock on one of the tables. */
export function lockWaitOn(tables: string[]): string {
  return `EXISTS (SELECT 1 FROM pg_locks WHERE ${HERE} AND relation = ANY(ARRAY[${tables.map((table) => `'${table}'::regclass`).join(', ')}]) AND NOT granted)`;
}

export interface TableHold {
  /** Resolves once a statement waits to read one of the tables. */
  reached(): Promise<void>;
  /** Ends the lock; again, nothing. */
  release(): Promise<void>;
}

/** Locks tables ACCESS EXCLUSIVE in an open transaction: a job's COPY of one waits until `release`. */
export async function holdTables(databaseUrl: string, tables: string[]): Promise<TableHold> {
  const client = await connect(databaseUrl);
  await client.query('BEGIN');
  await client.query(`LOCK TABLE ${tables.join(', ')} IN ACCESS EXCLUSIVE MODE`);
  let released = false;
  return {
    reached: () => waitFor(client, `SELECT (${lockWaitOn(tables)})::int AS n`),
    release: async () => {
      if (released) return;
      released = true;
      await client.query('ROLLBACK');
      await client.end();
    },
  };
}
