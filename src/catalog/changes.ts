import type { SqlExecutor } from '../db/sql.ts';
import { ID, utcTimestamp, type Statement } from '../data/statement.ts';
import { DomainError } from '../kernel/errors.ts';

/**
 * The change feed of a database (issue 27, docs/decisions/changes.md). Triggers record every change in the
 * writer's transaction (prisma/migrations/*_change_feed); this module reads the feed, encodes its cursors and
 * prunes it. No GraphQL here: resolvers and the worker (webhooks) both read through `readChanges`.
 *
 * Order: `position` is handed out at COMMIT under a per-database lock, so positions of one database follow commit
 * order and a reader that sees a position already sees every smaller one; `seq` orders the changes of one
 * transaction. A reader that follows `nextCursor` therefore sees every committed change once, in commit order.
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

/** NOTIFY channel: each committing transaction that recorded changes sends its database id, once. */
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

/** One page of changes after `after`, in feed order; `limit + 1` rows tell whether there are more. */
export function selectChangePage(
  databaseId: string,
  after: FeedPosition,
  limit: number,
  tableIds: readonly string[] | null,
): Statement {
  const tables = tableIds ? ' AND c.table_id = ANY($5::bpchar[])' : '';
  return {
    sql: `SELECT cc.position::text AS position, c.seq::text AS seq, c.kind, c.table_id, c.row_id, c.version::text AS version,
                 c.schema_version, c.mutation_id, c.actor_id, c.actor_kind, ${utcTimestamp('cc.committed_at')} AS committed_at,
                 c."values", c.previous
            FROM public.change_commits cc
            JOIN public.changes c ON c.database_id = cc.database_id AND c.txid = cc.txid
           WHERE cc.database_id = $1::${ID} AND cc.position >= $2::bigint AND (cc.position > $2::bigint OR c.seq > $3::bigint)${tables}
           ORDER BY cc.position, c.seq
           LIMIT $4::int`,
    params: [databaseId, after.position.toString(), after.seq.toString(), limit + 1, ...(tableIds ? [tableIds] : [])],
  };
}

/** The newest committed position of the database, or the retention watermark when nothing newer is kept. */
export function selectHead(databaseId: string): Statement {
  return {
    sql: `SELECT position::text AS position, seq::text AS seq FROM (
            (SELECT cc.position, (SELECT max(c.seq) FROM public.changes c WHERE c.database_id = cc.database_id AND c.txid = cc.txid) AS seq
               FROM public.change_commits cc WHERE cc.database_id = $1::${ID} AND cc.position IS NOT NULL
              ORDER BY cc.position DESC LIMIT 1)
            UNION ALL
            SELECT pruned_position, pruned_seq FROM public.change_feeds WHERE database_id = $1::${ID}
          ) heads ORDER BY position DESC, seq DESC LIMIT 1`,
    params: [databaseId],
  };
}

export function selectPruned(databaseId: string): Statement {
  return {
    sql: `SELECT pruned_position::text AS position, pruned_seq::text AS seq FROM public.change_feeds WHERE database_id = $1::${ID}`,
    params: [databaseId],
  };
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

export async function readHead(client: SqlExecutor, databaseId: string): Promise<FeedPosition> {
  const [row] = await client.run<{ position: string; seq: string | null }>(selectHead(databaseId));
  return row ? { position: BigInt(row.position), seq: BigInt(row.seq ?? 0) } : FEED_START;
}

export interface ReadChanges {
  databaseId: string;
  /** A cursor from an earlier page (or `head`); null starts at the oldest retained change. */
  after: string | null;
  limit: number;
  tableIds?: readonly string[] | null;
  /** For the 410's message. */
  retentionDays?: number;
}

/**
 * One page of the feed. A cursor older than what retention kept answers 410 CURSOR_INVALID; a malformed one 400.
 * An empty page's `nextCursor` is the `after` cursor, or the head when reading from the start, so that a reader
 * polling with it never falls behind the retention watermark while nothing happens.
 */
export async function readChanges(client: SqlExecutor, input: ReadChanges): Promise<ChangePage> {
  const { databaseId, limit } = input;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_CHANGE_PAGE) throw new Error(`Not a page size: ${limit}`);
  let after = FEED_START;
  if (input.after !== null) {
    after = decodeChangeCursor(databaseId, input.after);
    const [pruned] = await client.run<{ position: string; seq: string }>(selectPruned(databaseId));
    if (pruned && before(after, { position: BigInt(pruned.position), seq: BigInt(pruned.seq) })) {
      throw expiredChangeCursor(input.retentionDays ?? 7);
    }
  }
  const tableIds = input.tableIds && input.tableIds.length > 0 ? input.tableIds : null;
  const records = await client.run<ChangeRecord>(selectChangePage(databaseId, after, limit, tableIds));
  const hasMore = records.length > limit;
  const data = records.slice(0, limit).map((record) => toChange(databaseId, record));
  const last = data.at(-1);
  const nextCursor = last
    ? last.cursor
    : input.after !== null
      ? encodeChangeCursor(databaseId, after)
      : encodeChangeCursor(databaseId, await readHead(client, databaseId));
  return { data, nextCursor, hasMore };
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

/**
 * Removes whole commits older than `cutoff`, oldest first, at most `batch` of them, and moves each database's
 * retention watermark to the last (position, seq) removed. Per database, commit times grow with positions (both
 * are taken under the same lock), so what is removed is always a prefix of the feed.
 */
export function pruneChanges(cutoff: Date, batch: number): Statement {
  return {
    sql: `WITH doomed AS (
            SELECT database_id, txid, position FROM public.change_commits
             WHERE committed_at < $1::timestamptz ORDER BY committed_at, position LIMIT $2::int FOR UPDATE SKIP LOCKED
          ), gone AS (
            DELETE FROM public.changes c USING doomed d WHERE c.database_id = d.database_id AND c.txid = d.txid
            RETURNING c.database_id, d.position, c.seq
          ), commits AS (
            DELETE FROM public.change_commits cc USING doomed d WHERE cc.database_id = d.database_id AND cc.txid = d.txid
            RETURNING cc.database_id, cc.position
          ), marks AS (
            SELECT DISTINCT ON (m.database_id) m.database_id, m.position, coalesce(g.seq, 0) AS seq
              FROM commits m LEFT JOIN gone g ON g.database_id = m.database_id AND g.position = m.position
             ORDER BY m.database_id, m.position DESC, g.seq DESC NULLS LAST
          ), saved AS (
            INSERT INTO public.change_feeds AS f (database_id, pruned_position, pruned_seq)
            SELECT database_id, position, seq FROM marks
            ON CONFLICT (database_id) DO UPDATE SET
              pruned_position = CASE WHEN (EXCLUDED.pruned_position, EXCLUDED.pruned_seq) > (f.pruned_position, f.pruned_seq)
                                     THEN EXCLUDED.pruned_position ELSE f.pruned_position END,
              pruned_seq = CASE WHEN (EXCLUDED.pruned_position, EXCLUDED.pruned_seq) > (f.pruned_position, f.pruned_seq)
                                THEN EXCLUDED.pruned_seq ELSE f.pruned_seq END
          )
          SELECT count(*)::int AS commits FROM commits`,
    params: [cutoff.toISOString(), batch],
  };
}
