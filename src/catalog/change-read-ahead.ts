import type { SqlExecutor } from '../db/sql.ts';
import {
  decodeChangeCursor,
  prunedPast,
  readChangesAsJsonAtHead,
  sequenceFeed,
  type ChangeJsonPage,
  type FeedPosition,
  type ReadChanges,
} from './changes.ts';

/** How long a page read ahead waits for its reader: one following `nextCursor` asks again within milliseconds. */
export const READ_AHEAD_TTL_MS = 5_000;

/** Pages read ahead held at once by a process (a page of 1,000 changes is ~590 kB of JSON text). */
export const READ_AHEAD_PAGES = 8;

interface Ahead {
  /** The page and the head its read saw; undefined when the read failed (the reader then reads it itself). */
  read: Promise<{ page: ChangeJsonPage; head: FeedPosition } | undefined>;
  expires: number;
}

const keyOf = (input: ReadChanges): string =>
  JSON.stringify([input.databaseId, input.after, input.limit, input.tableIds ?? null]);

/**
 * The next page of a reader catching up, read while it receives and parses this one (docs/decisions/changes.md,
 * "Reading ahead"): a reader following `nextCursor` waits for each answer before it asks for the next, so
 * PostgreSQL and the service would otherwise idle while it reads ~590 kB of JSON per page of 1,000 changes. Only
 * after a page that says there is more (`hasMore`), one page ahead, per (database, cursor, limit, tables). A page
 * does not depend on who reads it, and `take` is called only after the request's own guards passed: authority is
 * the caller's at call time. A page read ahead is answered only when it is what a read now would answer.
 */
export class ChangeReadAhead {
  private readonly pages = new Map<string, Ahead>();

  constructor(
    private readonly sql: SqlExecutor,
    private readonly ttlMs = READ_AHEAD_TTL_MS,
    private readonly capacity = READ_AHEAD_PAGES,
  ) {}

  /**
   * Starts reading the page after `page`, when it says there is more. The request that calls it does not wait for
   * it (its reader is receiving the answer meanwhile); the promise, which never rejects, settles when the page is
   * held or dropped.
   */
  ahead(input: ReadChanges, page: ChangeJsonPage): Promise<void> {
    if (!page.hasMore) return Promise.resolve();
    const next: ReadChanges = { ...input, after: page.nextCursor };
    const key = keyOf(next);
    const reading = this.pages.get(key);
    if (reading) return reading.read.then(() => undefined);
    const now = Date.now();
    for (const [other, ahead] of this.pages) if (ahead.expires <= now) this.pages.delete(other);
    // Map order is insertion order: past the capacity, the oldest goes.
    for (const oldest of this.pages.keys()) {
      if (this.pages.size < this.capacity) break;
      this.pages.delete(oldest);
    }
    // A failed read (a 410, the pool closing at shutdown) is dropped here: the reader's own read meets it again.
    const read = readChangesAsJsonAtHead(this.sql, next).catch(() => undefined);
    this.pages.set(key, { read, expires: now + this.ttlMs });
    return read.then(() => undefined);
  }

  /**
   * The page `input` asks for if it was read ahead and is what a read now would answer, else undefined (read it).
   * Positions are handed out above the head and a change never moves, so a page read ahead can differ from a read
   * now in two ways only, both checked against the feed sequenced again: retention pruned past its cursor since
   * (the read now answers 410), or the page reached the feed's end and commits were positioned since (the head
   * moved: the read now answers more). A full page (`hasMore`) holds only changes at or below the old head, and
   * every change positioned since is above it.
   */
  async take(input: ReadChanges): Promise<ChangeJsonPage | undefined> {
    if (input.after === null) return undefined;
    const key = keyOf(input);
    const ahead = this.pages.get(key);
    if (!ahead) return undefined;
    this.pages.delete(key);
    if (ahead.expires <= Date.now()) return undefined;
    const read = await ahead.read;
    if (!read) return undefined;
    const feed = await sequenceFeed(this.sql, input.databaseId);
    if (prunedPast(decodeChangeCursor(input.databaseId, input.after), feed)) return undefined;
    if (!read.page.hasMore && feed.head.position !== read.head.position) return undefined;
    return read.page;
  }
}
