import type { ChangeJsonPage } from './changes.ts';

/** How long a page read ahead waits for its reader: a follower catching up asks for it within milliseconds. */
const READ_AHEAD_KEEP_MS = 5_000;
/** The JSON text that pages read ahead may hold in a process at once (a page of large rows holds megabytes). */
const READ_AHEAD_MAX_BYTES = 32 * 1024 * 1024;
/** Reads ahead running at once in a process: each holds a pooled connection that requests may be waiting for. */
const READ_AHEAD_MAX_RUNNING = 2;
/**
 * Pages a follower's reads ahead may run ahead of what it has taken: a page read ahead that is full starts the read of
 * the one after it, so that PostgreSQL reads page n+2 while the service answers n+1 and the follower parses n.
 */
const READ_AHEAD_DEPTH = 2;
/** The full pages' `nextCursor`s a process remembers to recognise a follower by (the oldest forgotten first). */
const FOLLOWED_CURSORS = 1024;

/** Whose pages: the feed's database, table filter and page size (a page's key adds the cursor it starts after). */
export interface PagePlace {
  databaseId: string;
  tableId: string | undefined;
  limit: number;
}

/**
 * Reads the page after `after`; `ahead` for a read ahead, which is kept only if it is full and so may read the
 * commits positioned so far without sequencing the feed first (`ReadChanges.positionedOnly`).
 */
export type PageLoad = (after: string | null, ahead: boolean) => Promise<ChangeJsonPage>;

interface AheadPage {
  page: Promise<ChangeJsonPage | null>;
  bytes: number;
  expires: number;
}

const keyOf = (place: PagePlace, after: string) =>
  `${place.databaseId}.${place.tableId ?? '*'}.${place.limit}.${after}`;

const bytesOf = (page: ChangeJsonPage) => page.data.reduce((bytes, change) => bytes + change.text.length, 0);

/**
 * A process's read-ahead for readers of a change feed that are catching up (`GET …/changes` pages, long polls):
 * once a follower is answered a full page, the page after it is read while the follower receives and parses this
 * one, and its next request takes it instead of reading; a full page read ahead starts the read of the next one
 * (READ_AHEAD_DEPTH). A follower catching up asks for exactly those pages; the reads overlap its downloads instead
 * of following them. A follower is a request whose `after` is the `nextCursor` of
 * a full page this process answered moments before: a reader that asks for one page and goes costs no read ahead.
 *
 * Only a full page (`hasMore`: a change after it exists) is ever answered from here, because only a full page cannot
 * change: positions are given in commit order, after every position given before (src/catalog/changes.ts), so the
 * `limit` changes after a cursor, once that many exist, are the ones any later read finds. A page that reached the
 * feed's end could miss a commit made after it was read, which the reader's own write may be: such a page is dropped
 * and the reader reads for itself. The page's content does not depend on the caller; each request passes its own
 * authority checks before it takes a page. A page read ahead answers as if the request had come when the read ran
 * (at most READ_AHEAD_KEEP_MS earlier): a cursor that retention passed in between still gets that page, not the 410.
 */
export class ChangeReadAhead {
  private readonly pages = new Map<string, AheadPage>();
  /** Full pages' `nextCursor`s answered without a read ahead (key → when): a request with one is following. */
  private readonly answered = new Map<string, number>();
  private bytes = 0;
  private running = 0;

  constructor(
    /**
     * Whether the connection pool has room for a read ahead now: it never makes a request wait for a connection
     * (requests that hold connections while they wait on a row lock can exhaust a small pool).
     */
    private readonly hasSpareConnection: () => boolean = () => true,
    private readonly limits = {
      keepMs: READ_AHEAD_KEEP_MS,
      maxBytes: READ_AHEAD_MAX_BYTES,
      maxRunning: READ_AHEAD_MAX_RUNNING,
    },
  ) {}

  /** The page after `after`: read ahead when there is one, else `load`ed; a follower's full page has its next read ahead. */
  async read(place: PagePlace, after: string | null, load: PageLoad): Promise<ChangeJsonPage> {
    const key = after === null ? null : keyOf(place, after);
    const following = key !== null && (this.pages.has(key) || this.followed(key));
    const ahead = key === null ? null : await this.take(key);
    const page = ahead ?? (await load(after, false));
    if (page.hasMore && !(following && this.readAhead(place, page.nextCursor, load)))
      this.remember(keyOf(place, page.nextCursor));
    return page;
  }

  private followed(key: string): boolean {
    const answeredAt = this.answered.get(key);
    if (answeredAt === undefined) return false;
    this.answered.delete(key);
    return performance.now() - answeredAt <= this.limits.keepMs;
  }

  private remember(key: string): void {
    this.answered.set(key, performance.now());
    if (this.answered.size > FOLLOWED_CURSORS) this.answered.delete(this.answered.keys().next().value!);
  }

  /** A page read ahead serves the one request that asks for it first, and is forgotten then. */
  private async take(key: string): Promise<ChangeJsonPage | null> {
    const entry = this.pages.get(key);
    if (!entry) return null;
    this.forget(key, entry);
    return entry.expires < performance.now() ? null : entry.page;
  }

  private forget(key: string, entry: AheadPage): void {
    if (this.pages.get(key) !== entry) return;
    this.pages.delete(key);
    this.bytes -= entry.bytes;
  }

  /** Starts reading the page after `after`; false when it cannot now (the running cap, no spare connection), or is already. */
  private readAhead(place: PagePlace, after: string, load: PageLoad, depth = 1): boolean {
    const key = keyOf(place, after);
    if (this.pages.has(key) || this.running >= this.limits.maxRunning || !this.hasSpareConnection()) return false;
    this.running += 1;
    const entry: AheadPage = {
      page: load(after, true).then(
        (page) => (page.hasMore ? page : null),
        () => null,
      ),
      bytes: 0,
      expires: performance.now() + this.limits.keepMs,
    };
    this.pages.set(key, entry);
    void entry.page.then((page) => {
      this.running -= 1;
      // Taken while it was being read: its reader holds it, and it was never counted.
      if (this.pages.get(key) !== entry) return;
      if (!page || this.bytes + bytesOf(page) > this.limits.maxBytes) return this.forget(key, entry);
      entry.bytes = bytesOf(page);
      this.bytes += entry.bytes;
      setTimeout(() => this.forget(key, entry), Math.max(0, entry.expires - performance.now())).unref();
      if (depth < READ_AHEAD_DEPTH) this.readAhead(place, page.nextCursor, load, depth + 1);
    });
    return true;
  }
}
