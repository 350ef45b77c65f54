import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import type { TransactionClient } from './prisma.ts';

/**
 * The smallest interface both of our SQL paths share: a Prisma transaction and a `pg` client both run a statement
 * with bound parameters and return its rows. Idempotency bookkeeping is written once against it.
 */
export interface SqlExecutor {
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  /** Runs a statement a builder returned (`sql.run(insertJob(…))`): its rows. */
  run<Row = Record<string, unknown>>(statement: SqlStatement): Promise<Row[]>;
  /** Runs statements one after another: the rows of the last (none for an empty list). */
  runEach<Row = Record<string, unknown>>(statements: readonly SqlStatement[]): Promise<Row[]>;
}

/** A statement and its bound values, as the builders of data/, catalog/ and jobs/ return them. */
export interface SqlStatement {
  sql: string;
  params: readonly unknown[];
}

type Query = SqlExecutor['query'];

/** An executor from its one primitive: `run` and `runEach` are `query` on a built statement. */
function executorOf(query: Query): SqlExecutor {
  const run = <Row>(statement: SqlStatement) => query<Row>(statement.sql, statement.params);
  return {
    query,
    run,
    runEach: async <Row>(statements: readonly SqlStatement[]) => {
      let rows: Row[] = [];
      for (const statement of statements) rows = await run<Row>(statement);
      return rows;
    },
  };
}

/** A Prisma transaction, or the client itself outside one. */
export function prismaExecutor(tx: Pick<TransactionClient, '$queryRawUnsafe'>): SqlExecutor {
  return executorOf((sql, params = []) => tx.$queryRawUnsafe(sql, ...params));
}

/**
 * Statement names by SQL text. A named statement is parsed and planned once per connection instead of on every
 * call; for the data plane's row writes (one long statement per table and schema version) that is a large part of
 * PostgreSQL's work. Bounded, because every connection keeps each prepared statement until it closes.
 */
const preparedNames = new Map<string, string>();
const MAX_PREPARED = 2_000;

function preparedName(sql: string): string | undefined {
  let name = preparedNames.get(sql);
  if (name === undefined && preparedNames.size < MAX_PREPARED) {
    name = `wds_${preparedNames.size}`;
    preparedNames.set(sql, name);
  }
  return name;
}

export function pgExecutor(client: pg.PoolClient | pg.Pool): SqlExecutor {
  return executorOf(async <Row>(sql: string, params: readonly unknown[] = []) => {
    const name = preparedName(sql);
    const config =
      name === undefined
        ? { text: sql, values: params as unknown[] }
        : { name, text: sql, values: params as unknown[] };
    return (await client.query(config)).rows as Row[];
  });
}

/** An executor on one connection, which can also feed a `COPY … FROM STDIN`. */
export interface PgClientExecutor extends SqlExecutor {
  /**
   * Runs `sql` (a COPY FROM STDIN) with `chunks`, in COPY's text format, as its input. A chunk is pulled when
   * the connection takes more, so producing the next chunk overlaps PostgreSQL's work on the last.
   */
  copyIn(sql: string, chunks: Iterable<string>): Promise<void>;
  /**
   * Runs `select` (at most one row of one bytea column; parameter-free, built from ids and integers only) as a binary
   * `COPY … TO STDOUT` and hands the value's bytes to `onPiece` as the socket delivers them (tens of KiB each). A
   * plain query of a 4 MiB bytea arrives as one 8 MiB hex message that `pg` assembles, decodes and parses in one go:
   * 200-290 ms of blocked event loop on the shared 2-core machine (docs/decisions/exports.md, "Downloads").
   */
  copyOutValue(select: string, onPiece: (piece: Buffer) => void): Promise<void>;
}

/**
 * Binary COPY's framing before the one value of a one-column row: the signature (11 bytes), flags (4), header
 * extension length (4, always 0 from PostgreSQL), the row's field count (2) and the value's length (4, −1 for null).
 * The trailer after the value (field count −1, 2 bytes) is not part of it.
 */
const BINARY_PREFIX = 25;

/** A Writable for a binary COPY of one value: passes on the value's bytes, dropping the framing around them. */
function binaryValue(onPiece: (piece: Buffer) => void): Writable {
  let prefix = Buffer.alloc(0);
  let left = -1;
  return new Writable({
    write(piece: Buffer, _encoding, done) {
      let data = piece;
      if (left < 0) {
        prefix = Buffer.concat([prefix, piece]);
        if (prefix.length < BINARY_PREFIX) return done();
        // A header with an extension, or no row (the trailer follows the header): no value.
        const oneField = prefix.readUInt32BE(15) === 0 && prefix.readInt16BE(19) === 1;
        left = oneField ? Math.max(0, prefix.readInt32BE(21)) : 0;
        data = prefix.subarray(BINARY_PREFIX);
      }
      const value = data.subarray(0, left);
      left -= value.length;
      if (value.length > 0) onPiece(value);
      done();
    },
  });
}

/** COPY frames each chunk by its length in bytes, so chunks go to it as bytes. */
function* utf8(chunks: Iterable<string>): Generator<Buffer> {
  for (const chunk of chunks) yield Buffer.from(chunk, 'utf8');
}

export function pgClientExecutor(client: pg.PoolClient): PgClientExecutor {
  return {
    ...pgExecutor(client),
    copyIn: (sql, chunks) => pipeline(Readable.from(utf8(chunks)), client.query(copyFrom(sql))),
    copyOutValue: (select, onPiece) =>
      pipeline(client.query(copyTo(`COPY (${select}) TO STDOUT (FORMAT binary)`)), binaryValue(onPiece)),
  };
}

/** What a transaction's work returns: its value, and optionally a statement to send with COMMIT. */
export interface TransactionResult<T> {
  value: T;
  /**
   * Sent in the same simple-protocol round trip as COMMIT: parameter-free SQL built from IDs, digests and
   * integers only, which must raise (not merely do nothing) when the transaction must not commit.
   */
  finalStatement?: string;
}

/** A connection taken from the pool for several statements; `broken` means it must not go back for reuse. */
export interface HeldConnection {
  client: pg.PoolClient;
  broken: boolean;
}

/** Runs `use` on one pooled connection, then gives it back, or discards it when a ROLLBACK on it failed. */
export async function withPgConnection<T>(pool: pg.Pool, use: (held: HeldConnection) => Promise<T>): Promise<T> {
  const held: HeldConnection = { client: await pool.connect(), broken: false };
  try {
    return await use(held);
  } finally {
    held.client.release(held.broken);
  }
}

/** Runs `work` on one pooled connection outside any transaction (CREATE INDEX CONCURRENTLY refuses one). */
export function outsideTransaction<T>(pool: pg.Pool, work: (sql: SqlExecutor) => Promise<T>): Promise<T> {
  return withPgConnection(pool, (held) => work(pgExecutor(held.client)));
}

/**
 * BEGIN … COMMIT on one pooled connection; any error rolls back and is rethrown. `opening` statements
 * (parameter-free, same rule as `finalStatement`) travel with BEGIN in one round trip; each gets its own snapshot
 * (READ COMMITTED), and their rows are handed to the work in order.
 */
export async function inPgTransaction<T>(
  pool: pg.Pool,
  opening: readonly string[],
  work: (executor: PgClientExecutor, opened: Record<string, unknown>[][]) => Promise<TransactionResult<T>>,
): Promise<T> {
  return withPgConnection(pool, (held) => inPgTransactionOn(held, opening, work));
}

/** The same transaction on a connection already held (see withPgConnection). */
export async function inPgTransactionOn<T>(
  held: HeldConnection,
  opening: readonly string[],
  work: (executor: PgClientExecutor, opened: Record<string, unknown>[][]) => Promise<TransactionResult<T>>,
): Promise<T> {
  const { client } = held;
  try {
    const results = (await client.query(['BEGIN', ...opening].join('; '))) as unknown as
      | pg.QueryResult
      | pg.QueryResult[];
    const opened = (Array.isArray(results) ? results.slice(1) : []).map(
      (result) => result.rows as Record<string, unknown>[],
    );
    const { value, finalStatement } = await work(pgClientExecutor(client), opened);
    await client.query(finalStatement ? `${finalStatement}; COMMIT` : 'COMMIT');
    return value;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {
      held.broken = true;
    });
    throw error;
  }
}
