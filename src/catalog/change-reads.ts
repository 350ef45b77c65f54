import { REARM_AFTER_MS } from './change-arming.ts';
import type { ChangeJsonPage } from './changes.ts';

/**
 * A process's stream reads of change feeds, shared by the streams that read the same page: the same database,
 * cursor, page size and table filter. Streams of one database follow its head, so they ask for the same pages, each
 * on its own 50 ms pace (`REARM_AFTER_MS`): 16 streams read every page 16 times. A stream that polls a feed being
 * written takes a page another stream started reading at most `maxAgeMs` ago (still running or done), and its
 * cursor then moves with theirs, so the streams stay together.
 *
 * Only a polling read may take an older page: it is a look at a feed that is being written, and a page read a little
 * earlier only delays what the next read shows, never skips it (the cursor moves to the page's end). A read right
 * after the stream armed the feed (`fresh`) must see every commit before the arm, so it reads for itself. The
 * page's content does not depend on the caller: authority is checked when a stream opens and while it runs.
 */
export class SharedChangeReads {
  private readonly recent = new Map<string, { startedAt: number; page: Promise<ChangeJsonPage> }>();

  constructor(private readonly maxAgeMs = REARM_AFTER_MS) {}

  read(key: string, fresh: boolean, load: () => Promise<ChangeJsonPage>): Promise<ChangeJsonPage> {
    const shared = this.recent.get(key);
    if (!fresh && shared && performance.now() - shared.startedAt <= this.maxAgeMs) return shared.page;
    const entry = { startedAt: performance.now(), page: load() };
    this.recent.set(key, entry);
    const forget = () => {
      if (this.recent.get(key) === entry) this.recent.delete(key);
    };
    // A failed read is not shared with later readers; a page is kept only as long as it may be taken.
    entry.page.catch(forget);
    setTimeout(forget, this.maxAgeMs).unref();
    return entry.page;
  }
}
