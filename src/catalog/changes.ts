import type { SqlExecutor } from '../db/sql.ts';
import { schemaOf } from '../data/identifiers.ts';
import { utcTimestamp, type Statement } from '../data/statement.ts';
import { DomainError } from '../kernel/errors.ts';
import { RawJson } from '../kernel/raw-json.ts';

/**
 * The change feed of a database (issue 27, docs/decisions/changes.md), stored in the database's own schema
 * (`d_<id>.changes`, `change_commits`, `change_feed`). Triggers record every change in the writer's transaction
 * (prisma/migrations/*_change_feed_per_database); this module sequences the feed, reads it, encodes its cursors,
 * arms its NOTIFY and prunes it. No GraphQL here: resolvers read through `readChangesAsJson`, the worker (webhooks)
 * through `readChanges`.
 *
 * Order: a transaction's `position` is handed out after it committed, by the reader that first sees it
 * (`sequenceChanges`), always above every position handed out before; `seq` orders the changes of one transaction.
 * A reader that follows `nextCursor` therefore sees every committed change once, in commit order.
 */

export const CHANGE_KINDS = [
  'row.created',
  'row.updated',
  'row.deleted',
  'row.restored',
  'schema.changed',
  'table.created',
  'table.renamed',
  'table.trashed',
  'table.restored',
] as const;
export type ChangeKind = (typeof CHANGE_KINDS)[number];

/** NOTIFY channel: the first transaction to commit changes in an armed feed sends its database id. */
export const CHANGES_CHANNEL = 'wds_changes';

export interface Change {
  cursor: string;
  kind: ChangeKind;
  tableId: string;
  rowId?: string;
  /** The row's version after the change, as a decimal string. */
  version?: string;
  /** The table's schema version after a table or schema change. */
  schemaVersion?: number;
  mutationId: string;
  actor: { id: string; kind: string };
  committedAt: string;
  /** The row after the change (created, updated, restored), every current field by id; a table's `{name}`. */
  values?: Record<string, unknown>;
  /** The changed cells before an update; the whole row before a delete. */
  previous?: Record<string, unknown>;
}

export interface ChangePage {
  data: Change[];
  nextCursor: string;
  hasMore: boolean;
}

/** A change as the API answers it: every member present, null where it does not apply (`ChangeResponse`). */
export interface ChangeAnswer {
  cursor: string;
  kind: ChangeKind;
  tableId: string;
  rowId: string | null;
  version: string | null;
  schemaVersion: number | null;
  mutationId: string;
  actor: { id: string; kind: string };
  committedAt: string;
  values: Record<string, unknown> | null;
  previous: Record<string, unknown> | null;
}

/** A page whose changes are each a `ChangeAnswer` as JSON text (`readChangesAsJson`). */
export interface ChangeJsonPage {
  data: ChangeJson[];
  nextCursor: string;
  hasMore: boolean;
}

/**
 * A change as the JSON text of its answer, with its cursor beside it: a stream names each event by its cursor
 * (SSE `id:`, src/http/rest/event-stream.ts) without parsing the text for it.
 */
export class ChangeJson extends RawJson {
  constructor(
    text: string,
    readonly cursor: string,
  ) {
    super(text);
  }
}

/** Where a reader stands: everything up to and including (position, seq) was seen. */
export interface FeedPosition {
  position: bigint;
  seq: bigint;
}

export const FEED_START: FeedPosition = { position: 0n, seq: 0n };

export const MAX_CHANGE_PAGE = 1000;

const CURSOR_VERSION = 'c1';
const CURSOR_TEXT = /^c1\.([0-7][0-9A-HJKMNP-TV-Z]{25})\.(\d{1,19})\.(\d{1,19})$/;

/**
 * Opaque (base64url) but not secret: a cursor names a database and a place in its feed, and reading still needs
 * the authority to read that database. Binding the database makes a cursor of another feed a 400, not a misread.
 */
export function encodeChangeCursor(databaseId: string, at: FeedPosition): string {
  return Buffer.from(`${CURSOR_VERSION}.${databaseId}.${at.position}.${at.seq}`).toString('base64url');
}

/**
 * `encodeChangeCursor` for the many changes of one page, from their position and seq as PostgreSQL prints them.
 * The text before the position, `c1.<databaseId>.`, is 30 bytes, whole base64 groups, so its encoding starts every
 * cursor of the database and is made once per page: encoding each cursor whole was 4.6 % of the service's CPU per
 * page of 1,000 changes (BENCH_PROFILE=1, bench/changes.bench.ts row 3).
 */
export function changeCursorEncoder(databaseId: string): (position: string, seq: string) => string {
  const head = `${CURSOR_VERSION}.${databaseId}.`;
  if (Buffer.byteLength(head) % 3 !== 0)
    return (position, seq) => encodeChangeCursor(databaseId, { position: BigInt(position), seq: BigInt(seq) });
  const prefix = Buffer.from(head).toString('base64url');
  return (position, seq) => prefix + Buffer.from(`${position}.${seq}`).toString('base64url');
}

export function invalidChangeCursor(): DomainError {
  return new DomainError(
    'CURSOR_INVALID',
    'The cursor is malformed or belongs to another database; start again without it.',
  );
}

export function expiredChangeCursor(retentionDays: number): DomainError {
  return new DomainError(
    'CURSOR_INVALID',
    `The cursor is older than the change feed's retention (${retentionDays} days): changes after it were pruned. ` +
      'Resynchronise (read the current rows), then follow the feed from GET …/changes/head.',
    { status: 410 },
  );
}

/** The position inside `cursor`; CURSOR_INVALID (400) when it is malformed or minted for another database. */
export function decodeChangeCursor(databaseId: string, cursor: string): FeedPosition {
  const text = /^[A-Za-z0-9_-]{1,200}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('latin1') : '';
  const match = CURSOR_TEXT.exec(text);
  if (!match || match[1] !== databaseId) throw invalidChangeCursor();
  const position = BigInt(match[2]!);
  const seq = BigInt(match[3]!);
  if (position > 9_223_372_036_854_775_807n || seq > 9_223_372_036_854_775_807n) throw invalidChangeCursor();
  return { position, seq };
}

interface ChangeRecord {
  position: string;
  seq: string;
  kind: ChangeKind;
  table_id: string;
  row_id: string | null;
  version: string | null;
  schema_version: number | null;
  mutation_id: string;
  actor_id: string;
  actor_kind: string;
  committed_at: string;
  values: Record<string, unknown> | null;
  previous: Record<string, unknown> | null;
}

/**
 * The changes after `after`, in feed order, `limit + 1` of them (one more tells whether there are more). The
 * commits are walked by position and each one's changes read by its key (LATERAL): a plain join lets the planner
 * hash every change after the cursor and sort them all for one page — the plan it picks for a feed written since
 * its last ANALYZE (20,200 changes read for a page of 1,000), O(feed) per page for a reader catching up. No commit
 * gives a page more than `limit + 1` changes, and saying so (the inner LIMIT) makes its changes an ordered walk of
 * the key that stops there: without it the planner read and sorted every change of each commit the page touched,
 * and of the next one (the sort above needs that one's first change), so a stream's page of 100 inside a batch of
 * 1,000 read 1,001 changes (2.1-2.9 ms of PostgreSQL, against 0.6 with the LIMIT; a first page of 1, 1.7 ms
 * against 0.05; docs/decisions/changes.md).
 */
function pageStatement(
  databaseId: string,
  after: FeedPosition,
  limit: number,
  tables: PageTables,
  columns: string,
): Statement {
  const schema = schemaOf(databaseId);
  const only = tables.only ? ' AND c.table_id = ANY($5::bpchar[])' : '';
  return {
    sql: `SELECT ${columns}
            FROM ${schema}.change_commits cc
           CROSS JOIN LATERAL (
             SELECT * FROM ${schema}.changes c
              WHERE c.txid = cc.txid AND (cc.position > $1::bigint OR c.seq > $2::bigint)
                AND (c.row_id IS NULL OR c.table_id = ANY($4::bpchar[]))${only}
              ORDER BY c.seq LIMIT $3::int) c
           WHERE cc.position >= $1::bigint
           ORDER BY cc.position, c.seq
           LIMIT $3::int`,
    params: [
      after.position.toString(),
      after.seq.toString(),
      limit + 1,
      tables.active,
      ...(tables.only ? [tables.only] : []),
    ],
  };
}

/**
 * Which tables' changes a page holds: `only` the ones a reader asked for (null: all), and of row changes only those
 * of the database's `active` tables. A table in the trash, being purged or purged is 404 everywhere else, so its rows'
 * values leave the feed too while it is there; its table changes (`table.trashed`, `table.restored`, renames,
 * `schema.changed`) carry no cell and stay, so a follower learns where it went (docs/decisions/changes.md, "Trashed
 * tables").
 */
export interface PageTables {
  only: readonly string[] | null;
  active: readonly string[];
}

/**
 * The database's active tables, read from the catalog as a statement of its own before each page: joined into the
 * page's statement, it would mix a coordinator table into a worker's statement on Citus.
 */
export function selectActiveTableIds(databaseId: string): Statement {
  return {
    sql: `SELECT id FROM public.data_tables WHERE database_id = $1::bpchar AND state = 'active'`,
    params: [databaseId],
  };
}

/** One page of changes after `after`, each as its columns (`values` and `previous` parsed by the driver). */
export function selectChangePage(
  databaseId: string,
  after: FeedPosition,
  limit: number,
  tables: PageTables,
): Statement {
  return pageStatement(
    databaseId,
    after,
    limit,
    tables,
    `cc.position::text AS position, c.seq::text AS seq, c.kind, c.table_id, c.row_id, c.version::text AS version,
     c.schema_version, c.mutation_id, c.actor_id, c.actor_kind, ${utcTimestamp('cc.committed_at')} AS committed_at,
     c."values", c.previous`,
  );
}

/** A change's columns as `pg` hands them over as text: `values` and `previous` as PostgreSQL prints jsonb. */
interface ChangeTextRecord extends Omit<ChangeRecord, 'values' | 'previous'> {
  values: string | null;
  previous: string | null;
}

/**
 * The same page for answers that pass each change on as JSON text (`readChangesAsJson`): the same columns, but
 * `values` and `previous` as text, which the driver hands over without parsing them.
 */
export function selectChangeTextPage(
  databaseId: string,
  after: FeedPosition,
  limit: number,
  tables: PageTables,
): Statement {
  return pageStatement(
    databaseId,
    after,
    limit,
    tables,
    `cc.position::text AS position, c.seq::text AS seq, c.kind, c.table_id, c.row_id, c.version::text AS version,
     c.schema_version, c.mutation_id, c.actor_id, c.actor_kind, ${utcTimestamp('cc.committed_at')} AS committed_at,
     c."values"::text AS "values", c.previous::text AS previous`,
  );
}

const quotedOrNull = (text: string | null) => (text === null ? 'null' : `"${text}"`);

/**
 * A change as the JSON text of its answer (`ChangeAnswer`, members in `ChangeResponse`'s order), written from its
 * columns without parsing or resolving any of them. Ids are `char(26)` ULIDs and `kind` one of `CHANGE_KINDS` (only
 * the feed's triggers write it), a version a bigint and a timestamp `utcTimestamp`'s: none needs escaping. The
 * actor's kind is copied from the cell history, which a backup restore brings back from its archive, so it is
 * escaped. Built in PostgreSQL instead (concatenated pieces), the page cost 1.7 ms more of PostgreSQL per 1,000
 * changes than these columns, and the service's read of it 6.7 against 5.4-6.0 ms (docs/decisions/changes.md).
 */
function changeJsonText(cursor: string, record: ChangeTextRecord): string {
  return (
    `{"cursor":"${cursor}","kind":"${record.kind}","tableId":"${record.table_id}",` +
    `"rowId":${quotedOrNull(record.row_id)},"version":${quotedOrNull(record.version)},` +
    `"schemaVersion":${record.schema_version ?? 'null'},"mutationId":"${record.mutation_id}",` +
    `"actor":{"id":"${record.actor_id}","kind":${JSON.stringify(record.actor_kind)}},` +
    `"committedAt":"${record.committed_at}","values":${record.values ?? 'null'},"previous":${record.previous ?? 'null'}}`
  );
}

/**
 * The sequencer: gives the database's newly committed transactions their positions, after every position handed
 * out before, and answers the feed's head and retention watermark. Writers take no position (no lock, no
 * serialisation at COMMIT); a reader runs this before it reads, so a position exists only once its transaction is
 * visible, and every position handed out later is larger: a reader that follows the positions never skips one.
 * Among the transactions that became visible together, the order is their last write's `clock_timestamp()`: a
 * transaction that waited for another's row (the only way one can depend on another) wrote after that one
 * committed, so a row's versions keep their order. That last write is read by key, each commit's newest `seq` (a
 * batch commits 1,000 changes): joined and aggregated instead, the planner hashed the whole feed while its statistics
 * were missing (a fresh database; 7.7 ms a call, 3.2 by key, docs/decisions/changes.md). The unpositioned commits
 * are walked one at a time (`ORDER BY txid LIMIT 1`, recursively), which is always a plain scan of the partial index:
 * every positioned commit leaves a dead entry there until a vacuum, a plain scan marks each one it passes so that
 * the next call skips it, and a bitmap scan (what the planner picked for the whole set) visits all of them on every
 * call, without marking any. The UPDATE finds them by txid for the same reason. Concurrent sequencers queue on the
 * feed row (FOR UPDATE re-reads it after the wait); commits the later one still saw unpositioned are skipped by the
 * UPDATE's re-check. An
 * unchanged feed costs one index probe and takes no lock. `committed_at` is that last write, kept non-decreasing
 * along the positions, so retention removes a prefix.
 */
export function sequenceChanges(databaseId: string): Statement {
  const schema = schemaOf(databaseId);
  return {
    sql: `WITH RECURSIVE pending AS (
            (SELECT cc.txid FROM ${schema}.change_commits cc WHERE cc.position IS NULL ORDER BY cc.txid LIMIT 1)
            UNION ALL
            (SELECT next.txid FROM pending p CROSS JOIN LATERAL (
               SELECT cc.txid FROM ${schema}.change_commits cc
                WHERE cc.position IS NULL AND cc.txid > p.txid ORDER BY cc.txid LIMIT 1) next)
          ), fresh AS (
            SELECT p.txid, coalesce(last.recorded_at, now()) AS last_at, coalesce(last.seq, 0) AS last_seq
              FROM pending p
              LEFT JOIN LATERAL (
                SELECT c.recorded_at, c.seq FROM ${schema}.changes c WHERE c.txid = p.txid ORDER BY c.seq DESC LIMIT 1
              ) last ON true
          ), feed AS (
            SELECT f.head_position, f.head_committed_at FROM ${schema}.change_feed f
             WHERE EXISTS (SELECT 1 FROM fresh) FOR UPDATE
          ), ordered AS (
            SELECT fresh.txid, fresh.last_seq,
                   feed.head_position + row_number() OVER (ORDER BY fresh.last_at, fresh.txid) AS position,
                   greatest(fresh.last_at, feed.head_committed_at) AS committed_at
              FROM fresh, feed
          ), assigned AS (
            UPDATE ${schema}.change_commits cc SET position = o.position, committed_at = o.committed_at
              FROM ordered o
             WHERE cc.txid = ANY (ARRAY(SELECT txid FROM ordered)) AND cc.txid = o.txid AND cc.position IS NULL
          ), moved AS (
            UPDATE ${schema}.change_feed f
               SET head_position = last.position, head_seq = last.last_seq, head_committed_at = last.committed_at
              FROM (SELECT * FROM ordered ORDER BY position DESC LIMIT 1) last
            RETURNING f.head_position, f.head_seq, f.pruned_position, f.pruned_seq
          )
          SELECT head_position::text AS "headPosition", head_seq::text AS "headSeq",
                 pruned_position::text AS "prunedPosition", pruned_seq::text AS "prunedSeq" FROM moved
          UNION ALL
          SELECT head_position::text, head_seq::text, pruned_position::text, pruned_seq::text FROM ${schema}.change_feed
           WHERE NOT EXISTS (SELECT 1 FROM moved)`,
    params: [],
  };
}

/**
 * Asks the database's next committing writer to NOTIFY (once; it disarms the feed as it does). The exclusive lock
 * waits for the commits in progress (writers hold the shared lock from their COMMIT's start to its end, see
 * `wds_changes_committed`), so a read made after this statement sees every commit that missed the arm, or that
 * skipped the arm row because another writer was disarming it. Readers arm only when they are about to wait, so a
 * feed nobody waits on costs its writers no NOTIFY.
 */
export function armChangeFeed(databaseId: string): Statement {
  return {
    sql: `WITH waited AS (SELECT pg_advisory_xact_lock(27, hashtext($1::text)))
          UPDATE ${schemaOf(databaseId)}.change_arm SET armed = true FROM waited`,
    params: [databaseId],
  };
}

/**
 * Whether the service runs on a Citus coordinator, where a feed's COMMIT trigger notifies on the worker that holds
 * the database's schema, out of the reach of the service's LISTEN: then readers poll (src/catalog/change-arming.ts).
 */
export function selectFeedWakeUps(): Statement {
  return { sql: `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS polled`, params: [] };
}

const before = (a: FeedPosition, b: FeedPosition) =>
  a.position < b.position || (a.position === b.position && a.seq < b.seq);

function toChange(databaseId: string, record: ChangeRecord): Change {
  const change: Change = {
    cursor: encodeChangeCursor(databaseId, { position: BigInt(record.position), seq: BigInt(record.seq) }),
    kind: record.kind,
    tableId: record.table_id,
    mutationId: record.mutation_id,
    actor: { id: record.actor_id, kind: record.actor_kind },
    committedAt: record.committed_at,
  };
  if (record.row_id !== null) change.rowId = record.row_id;
  if (record.version !== null) change.version = record.version;
  if (record.schema_version !== null) change.schemaVersion = record.schema_version;
  if (record.values !== null) change.values = record.values;
  if (record.previous !== null) change.previous = record.previous;
  return change;
}

export interface FeedState {
  head: FeedPosition;
  pruned: FeedPosition;
}

/** Runs the sequencer for readers: `sequenceFeed` itself, or a process's shared calls of it (`SharedSequencer`). */
export interface FeedSequencer {
  /** The feed's state after a sequencer call that started after this call did. */
  sequence(databaseId: string): Promise<FeedState>;
}

/** Sequences what committed since the last read, then answers the head and the retention watermark. */
export async function sequenceFeed(client: SqlExecutor, databaseId: string): Promise<FeedState> {
  const [row] = await client.run<{ headPosition: string; headSeq: string; prunedPosition: string; prunedSeq: string }>(
    sequenceChanges(databaseId),
  );
  if (!row) throw new Error(`The change feed of database ${databaseId} is missing`);
  return {
    head: { position: BigInt(row.headPosition), seq: BigInt(row.headSeq) },
    pruned: { position: BigInt(row.prunedPosition), seq: BigInt(row.prunedSeq) },
  };
}

/**
 * The newest committed change of the database (the retention watermark when nothing newer is kept); through the
 * process's shared sequencer calls when given (streams opening together).
 */
export async function readHead(
  client: SqlExecutor,
  databaseId: string,
  sequencer?: FeedSequencer,
): Promise<FeedPosition> {
  return (await (sequencer?.sequence(databaseId) ?? sequenceFeed(client, databaseId))).head;
}

export interface ReadChanges {
  databaseId: string;
  /** A cursor from an earlier page (or `head`); null starts at the oldest retained change. */
  after: string | null;
  limit: number;
  tableIds?: readonly string[] | null;
  /** For the 410's message. */
  retentionDays?: number;
  /** Sequences the feed before the read; `sequenceFeed` on the reader's client without it. */
  sequencer?: FeedSequencer;
  /**
   * Reads the commits positioned so far, without sequencing first or checking `after` against retention, for a
   * reader that keeps the page only if it is full (src/catalog/change-read-ahead.ts): a full page of positioned
   * commits is final, as every position given later is larger. A page that is not full may miss a commit made
   * before the read, and its `nextCursor` then is `after` (not the head).
   */
  positionedOnly?: boolean;
}

/** Where a page starts: `after` checked against the feed's retention, once the feed is sequenced (`positionedOnly`: neither). */
async function pageStart(
  client: SqlExecutor,
  input: ReadChanges,
): Promise<{ after: FeedPosition; head: FeedPosition; tables: PageTables }> {
  const { databaseId, limit } = input;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_CHANGE_PAGE) throw new Error(`Not a page size: ${limit}`);
  const after = input.after === null ? FEED_START : decodeChangeCursor(databaseId, input.after);
  const only = input.tableIds && input.tableIds.length > 0 ? input.tableIds : null;
  let head = after;
  if (!input.positionedOnly) {
    const feed = await (input.sequencer?.sequence(databaseId) ?? sequenceFeed(client, databaseId));
    if (input.after !== null && before(after, feed.pruned)) throw expiredChangeCursor(input.retentionDays ?? 7);
    head = feed.head;
  }
  // Read after sequencing: a commit positioned by this read that trashed a table is matched by this list.
  const active = (await client.run<{ id: string }>(selectActiveTableIds(databaseId))).map((table) => table.id);
  return { after, head, tables: { only, active } };
}

/**
 * The cursor after an empty page: the `after` cursor, or the head when reading from the start, so that a reader
 * polling with it never falls behind the retention watermark while nothing happens. A page with changes answers its
 * last change's cursor.
 */
function cursorAfter(input: ReadChanges, start: { after: FeedPosition; head: FeedPosition }): string {
  return encodeChangeCursor(input.databaseId, input.after !== null ? start.after : start.head);
}

/**
 * One page of the feed, each change as an object: for readers that look into the changes (the webhook deliverer).
 * A cursor older than what retention kept answers 410 CURSOR_INVALID; a malformed one 400.
 */
export async function readChanges(client: SqlExecutor, input: ReadChanges): Promise<ChangePage> {
  const start = await pageStart(client, input);
  const records = await client.run<ChangeRecord>(
    selectChangePage(input.databaseId, start.after, input.limit, start.tables),
  );
  const data = records.slice(0, input.limit).map((record) => toChange(input.databaseId, record));
  const nextCursor = data.at(-1)?.cursor ?? cursorAfter(input, start);
  return { data, nextCursor, hasMore: records.length > input.limit };
}

/**
 * One page of the feed as `readChanges` reads it, each change the JSON text of its answer (`ChangeAnswer`), for
 * answers that pass the changes on: written into the answer as they are (`stringifyAnswer`), parsed only for a
 * GraphQL selection of some of their members.
 */
export async function readChangesAsJson(client: SqlExecutor, input: ReadChanges): Promise<ChangeJsonPage> {
  const start = await pageStart(client, input);
  const records = await client.run<ChangeTextRecord>(
    selectChangeTextPage(input.databaseId, start.after, input.limit, start.tables),
  );
  const cursorOf = changeCursorEncoder(input.databaseId);
  const data = records.slice(0, input.limit).map((record) => {
    const cursor = cursorOf(record.position, record.seq);
    return new ChangeJson(changeJsonText(cursor, record), cursor);
  });
  const last = records[data.length - 1];
  return {
    data,
    nextCursor: last ? cursorOf(last.position, last.seq) : cursorAfter(input, start),
    hasMore: records.length > input.limit,
  };
}

/** `SET LOCAL` for a transaction whose writes must not reach the feed (a backup restore building its staging copy). */
export const SUSPEND_CHANGE_RECORDING = "SET LOCAL wds.changes = 'off'";

/**
 * Names who makes the table and schema changes of this transaction (`wds_change_actor` in the migration); row
 * changes carry their actor and mutation in the cell history already.
 */
export function setChangeActor(actor: { id: string; kind: string }, mutationId: string): Statement {
  return { sql: `SELECT set_config('wds.actor', $1, true)`, params: [`${actor.kind}:${actor.id}:${mutationId}`] };
}

/** The databases that have a change feed to prune (a purge may be dropping one meanwhile). */
export function selectFeedDatabases(): Statement {
  return {
    sql: `SELECT id FROM public.databases WHERE to_regclass(format('%I.change_feed', 'd_' || lower(id))) IS NOT NULL ORDER BY id`,
    params: [],
  };
}

/**
 * Removes the database's oldest commits, those committed before `cutoff`, at most `batch` of them, and moves its
 * retention watermark to the last (position, seq) removed. `committed_at` never decreases along the positions (the
 * sequencer keeps it so), so what is removed is always a prefix of the feed. Run after `sequenceChanges`, so that
 * nothing old is left without a position.
 */
export function pruneChanges(databaseId: string, cutoff: Date, batch: number): Statement {
  const schema = schemaOf(databaseId);
  return {
    sql: `WITH doomed AS (
            SELECT txid, position FROM ${schema}.change_commits
             WHERE position IS NOT NULL AND committed_at < $1::timestamptz ORDER BY position LIMIT $2::int FOR UPDATE SKIP LOCKED
          ), gone AS (
            DELETE FROM ${schema}.changes c USING doomed d WHERE c.txid = d.txid RETURNING d.position, c.seq
          ), commits AS (
            DELETE FROM ${schema}.change_commits cc USING doomed d WHERE cc.txid = d.txid RETURNING cc.position
          ), mark AS (
            SELECT m.position, coalesce((SELECT max(g.seq) FROM gone g WHERE g.position = m.position), 0) AS seq
              FROM commits m ORDER BY m.position DESC LIMIT 1
          ), saved AS (
            UPDATE ${schema}.change_feed f SET pruned_position = mark.position, pruned_seq = mark.seq
              FROM mark WHERE (mark.position, mark.seq) > (f.pruned_position, f.pruned_seq)
          )
          SELECT count(*)::int AS commits FROM commits`,
    params: [cutoff.toISOString(), batch],
  };
}
