import { setTimeout as sleep } from 'node:timers/promises';
import type { ChangeSignal } from '../db/listener.ts';
import type { SqlExecutor } from '../db/sql.ts';
import { armChangeFeed, selectFeedWakeUps } from './changes.ts';

/**
 * Between two wake-ups of one database's readers in this process, at least this long: a reader woken by a commit
 * arms the feed again only after it, so a feed written continuously sends at most ~20 NOTIFYs a second per waiting
 * process instead of one per commit (NOTIFY serialises commits server-wide, docs/decisions/changes.md). It is also
 * the most a waiting reader's wake-up is delayed.
 */
export const REARM_AFTER_MS = 50;

/**
 * On Citus a waiting reader reads again at least this often: a database's feed and its COMMIT trigger live on the
 * worker that holds its schema, whose NOTIFY reaches only that worker's listeners, while the service listens on the
 * coordinator (docs/decisions/citus.md). Also the most a waiting reader's wake-up is delayed there.
 */
export const CITUS_POLL_MS = 250;

/**
 * A process's arming of change feeds (`armChangeFeed`), shared by all its readers of a database: a reader that found
 * nothing new arms the feed, reads once more, then waits for the NOTIFY. An arm holds until a notification about
 * that database arrives (the writer that sends it disarms the feed), so readers waiting meanwhile do not arm again.
 * `notificationsOf` is a version of the notifications this process received for a database (ChannelListener.version:
 * it also moves when some may have been missed, so every reader then arms and reads again).
 */
export class FeedArming {
  /** Per database: the notification version at which its arm committed; an arm at the current version still holds. */
  private readonly armedAt = new Map<string, string>();
  private readonly arming = new Map<string, Promise<void>>();
  private readonly lastArm = new Map<string, number>();
  private polling: Promise<boolean> | null = null;

  constructor(
    private readonly sql: SqlExecutor,
    private readonly notificationsOf: (databaseId: string) => string,
    /** The least time between two arms of a database: the most a waiting reader's wake-up is delayed. */
    private readonly rearmAfterMs = REARM_AFTER_MS,
  ) {}

  /** True on Citus: no NOTIFY of a change reaches this process, so waiting readers poll (`CITUS_POLL_MS`). */
  polls(): Promise<boolean> {
    if (!this.polling) {
      const asked = this.sql.run<{ polled: boolean }>(selectFeedWakeUps()).then(([row]) => row?.polled === true);
      asked.catch(() => {
        if (this.polling === asked) this.polling = null;
      });
      this.polling = asked;
    }
    return this.polling;
  }

  /**
   * Makes sure the feed is armed; true when it was not (the caller must read again before it waits: a change may
   * have committed between its last read and the arm), false when the arm still holds or there is nothing to arm
   * (Citus: wait right away, the wait ends at the next poll).
   */
  async arm(databaseId: string): Promise<boolean> {
    if (await this.polls()) return false;
    if (this.armedAt.get(databaseId) === this.notificationsOf(databaseId)) return false;
    let pending = this.arming.get(databaseId);
    if (!pending) {
      pending = this.armNow(databaseId).finally(() => this.arming.delete(databaseId));
      this.arming.set(databaseId, pending);
    }
    await pending;
    return true;
  }

  /**
   * After a read that reached the feed's end with changes in it: the feed is being written, so the next read comes
   * after the re-arm interval (or the next notification), without arming it. An arm costs the feed's writers: its
   * exclusive lock waits for the commits in progress and holds back the next ones, and the commit it arms sends a
   * NOTIFY, which serialises commits server-wide. So a reader arms only once a read found nothing new; until then
   * it polls at the same pace an armed reader would be woken at.
   */
  async pause(signal: ChangeSignal): Promise<void> {
    const timer = new AbortController();
    const paused = sleep(this.rearmAfterMs, undefined, { signal: timer.signal }).catch(() => undefined);
    await Promise.race([signal.next(), paused]);
    timer.abort();
  }

  /** Waits for the next notification of the signal's database; on Citus at most until the next poll. */
  async next(signal: ChangeSignal): Promise<void> {
    if (!(await this.polls())) return signal.next();
    const poll = new AbortController();
    const polled = sleep(CITUS_POLL_MS, undefined, { signal: poll.signal }).catch(() => undefined);
    await Promise.race([signal.next(), polled]);
    poll.abort();
  }

  private async armNow(databaseId: string): Promise<void> {
    const wait = (this.lastArm.get(databaseId) ?? 0) + this.rearmAfterMs - Date.now();
    if (wait > 0) await sleep(wait);
    const count = this.notificationsOf(databaseId);
    const statement = armChangeFeed(databaseId);
    await this.sql.query(statement.sql, statement.params);
    this.lastArm.set(databaseId, Date.now());
    // A notification that came while arming may be the disarm of this very arm: then it does not hold.
    if (this.notificationsOf(databaseId) === count) this.armedAt.set(databaseId, count);
    else this.armedAt.delete(databaseId);
  }
}
