import type { SqlExecutor } from '../db/sql.ts';
import { sequenceFeed, type FeedSequencer, type FeedState } from './changes.ts';

/**
 * A process's calls of the sequencer (`sequenceChanges`), shared by all its readers of a database: every SSE stream
 * and long poll of an API process, every webhook endpoint of a worker. Each reader runs the sequencer before each
 * read, so N readers of a busy feed made N calls per read interval, and they queue on the feed's row (each call
 * that finds new commits locks it). Now at most one call per database runs at a time in the process, and the readers
 * that ask meanwhile share the next one.
 *
 * A reader may only share a call that starts after it asked: a reader that armed the feed must see every commit
 * before its arm (src/catalog/change-arming.ts), and a call already running may have taken its snapshot before
 * that. So a reader joins the call queued behind the running one, never the running one itself.
 */
export class SharedSequencer implements FeedSequencer {
  private readonly running = new Map<string, Promise<FeedState>>();
  private readonly queued = new Map<string, Promise<FeedState>>();

  constructor(private readonly sql: SqlExecutor) {}

  sequence(databaseId: string): Promise<FeedState> {
    const queued = this.queued.get(databaseId);
    if (queued) return queued;
    const running = this.running.get(databaseId);
    if (!running) return this.start(databaseId);
    const next = running
      .catch(() => undefined)
      .then(() => {
        this.queued.delete(databaseId);
        return this.start(databaseId);
      });
    this.queued.set(databaseId, next);
    return next;
  }

  private start(databaseId: string): Promise<FeedState> {
    const call = sequenceFeed(this.sql, databaseId).finally(() => {
      if (this.running.get(databaseId) === call) this.running.delete(databaseId);
    });
    this.running.set(databaseId, call);
    return call;
  }
}
