import { createHash } from 'node:crypto';
import type { FeedArming } from '../../catalog/change-arming.ts';
import { encodeChangeCursor, readChanges, type Change, type FeedSequencer } from '../../catalog/changes.ts';
import {
  selectFollowedFeeds,
  type DeliveredPlace,
  type EndpointRow,
  type InFlightMessage,
} from '../../catalog/webhook-deliveries.ts';
import type { SqlExecutor } from '../../db/sql.ts';
import { DomainError } from '../../kernel/errors.ts';
import type { Logger } from '../../kernel/log.ts';

const FEED_PAGE = 100;
/** The `type` of a batch message: its `data` is `{changes: [Change, …]}`. */
const BATCH_TYPE = 'changes';
/** What a batch's body holds besides its changes: `{"type":"changes","timestamp":"…","data":{"changes":[…]}}`. */
const BATCH_ENVELOPE_BYTES = 80;
/** Feed pages of non-matching changes one look reads before it saves its place and yields. */
const PAGES_PER_LOOK = 20;

/**
 * Notifications heard per database: a feed armed and then read to its end when the count was n has nothing new while
 * the count is still n. `listening` is false while the notification connection is down; then every look reads.
 */
export interface FeedNotifications {
  listening: boolean;
  counts: Map<string, number>;
  /** Arms a feed before it is read to its end, so that its next commit notifies (src/catalog/change-arming.ts). */
  arms: FeedArming;
  /** The worker's sequencer calls, shared by its endpoints that follow a database (src/catalog/change-sequencing.ts). */
  sequencer: FeedSequencer;
  /**
   * Databases whose last read found changes: their feeds are being written, so they are read again after
   * DELIVERY_REARM_MS instead of being armed (FeedArming.pause says what an arm costs the writers); a feed is armed
   * once a read found nothing new.
   */
  written: Set<string>;
}

interface Feed {
  databaseId: string;
  /** The cursor after which the next read starts. */
  after: string | null;
  /** Matching changes read and not yet handed out, in feed order. */
  buffered: Change[];
  /** The last read reached the feed's end when the database's notification count was this. */
  readToEndAt: number | null;
}

/** A change as `GET …/changes` answers it: every member present, null when it does not apply. */
function asDelivered(change: Change) {
  return {
    cursor: change.cursor,
    kind: change.kind,
    tableId: change.tableId,
    rowId: change.rowId ?? null,
    version: change.version ?? null,
    schemaVersion: change.schemaVersion ?? null,
    mutationId: change.mutationId,
    actor: change.actor,
    committedAt: change.committedAt,
    values: change.values ?? null,
    previous: change.previous ?? null,
  };
}

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/**
 * A change's message id for one endpoint: the first 128 bits of SHA-256 over (endpoint, generation, database, position,
 * seq), written as a ULID is (26 Crockford characters, the first 0-7). The same change gives the same id on every
 * attempt and after any crash, without committing the message before it is sent; a replay or a changed scope moves
 * the generation, so a change sent again on purpose gets a new id. A batch's id covers its first and last change
 * (`through`): one that ends elsewhere is another message.
 */
export function messageIdOf(
  webhookId: string,
  generation: number,
  databaseId: string,
  { position, seq }: FeedPlace,
  through?: FeedPlace,
): string {
  const last = through ? `.${through.position}.${through.seq}` : '';
  const hash = createHash('sha256')
    .update(`${webhookId}.${generation}.${databaseId}.${position}.${seq}${last}`)
    .digest();
  let bits = BigInt(`0x${hash.subarray(0, 16).toString('hex')}`);
  let text = '';
  for (let index = 0; index < 26; index += 1) {
    text = CROCKFORD[Number(bits & 31n)]! + text;
    bits >>= 5n;
  }
  return `msg_${text}`;
}

interface FeedPlace {
  position: string;
  seq: string;
}

function positionOf(cursor: string): FeedPlace {
  const [, , position, seq] = Buffer.from(cursor, 'base64url').toString('latin1').split('.');
  return { position: position!, seq: seq! };
}

/**
 * The feeds one endpoint follows, for the length of one claim (while its deliverer holds the endpoint's lock, no one
 * else moves its positions): pages of matching changes are read ahead and handed out one message at a time (a
 * change, or a batch of changes of one feed), and a feed read to its end is not read again until a notification says
 * its database changed. Messages go out in each feed's order; between databases, the older commit first.
 */
export class FollowedFeeds {
  private feeds: Feed[] | null = null;
  /**
   * A feed was read without being armed (it is being written): when this look finds nothing more to send, the
   * endpoint must be looked at again after DELIVERY_REARM_MS, as no notification will come.
   */
  polled = false;

  constructor(
    private readonly sql: SqlExecutor,
    private readonly endpoint: EndpointRow,
    private readonly notifications: FeedNotifications,
    private readonly log: Logger,
    /** The message in flight when the claim began: its feed is read from after it, not from the stored place. */
    private readonly inFlight: InFlightMessage | null,
    /** The places to save, per database: a feed's place moves past changes it does not want here too. */
    private readonly places: Map<string, DeliveredPlace>,
  ) {}

  private matches(change: Change): boolean {
    return this.endpoint.events.includes('*') || this.endpoint.events.includes(change.kind);
  }

  private async load(): Promise<Feed[]> {
    const rows = await this.sql.run<{ databaseId: string; position: string | null; seq: string | null }>(
      selectFollowedFeeds(this.endpoint.id, this.endpoint.orgId, this.endpoint.databaseId),
    );
    return rows.map((row) => ({
      databaseId: row.databaseId,
      buffered: [],
      readToEndAt: null,
      after:
        this.inFlight?.databaseId === row.databaseId
          ? this.inFlight.cursor
          : row.position === null
            ? null
            : encodeChangeCursor(row.databaseId, { position: BigInt(row.position), seq: BigInt(row.seq!) }),
    }));
  }

  /** A place older than the feed's retention restarts at the oldest retained change (the gap is logged). */
  private async read(feed: Feed) {
    const input = {
      databaseId: feed.databaseId,
      limit: FEED_PAGE,
      tableIds: this.endpoint.tableIds,
      sequencer: this.notifications.sequencer,
    };
    try {
      return await readChanges(this.sql, { ...input, after: feed.after });
    } catch (error) {
      if (!(error instanceof DomainError) || error.code !== 'CURSOR_INVALID') throw error;
      this.log.warn(
        { webhookId: this.endpoint.id, databaseId: feed.databaseId },
        'a webhook fell behind the change feed’s retention; it continues from the oldest retained change',
      );
      return readChanges(this.sql, { ...input, after: null });
    }
  }

  private async fill(feed: Feed): Promise<void> {
    if (feed.buffered.length > 0) return;
    // On Citus no change is notified to this process (src/catalog/change-arming.ts): every look reads.
    const notified = this.notifications.listening && !(await this.notifications.arms.polls());
    if (notified && feed.readToEndAt === this.notifications.counts.get(feed.databaseId)) return;
    // Armed before the read that may reach the end, so that a change committed after that read notifies; a feed
    // being written is not armed, and the look that reads it to its end asks to be repeated (`polled`).
    const written = this.notifications.written;
    if (notified && !written.has(feed.databaseId)) await this.notifications.arms.arm(feed.databaseId);
    else if (notified) this.polled = true;
    const count = this.notifications.counts.get(feed.databaseId) ?? 0;
    for (let page = 0; page < PAGES_PER_LOOK; page += 1) {
      const read = await this.read(feed);
      const last = read.data.at(-1);
      if (!read.hasMore) feed.readToEndAt = count;
      if (last) written.add(feed.databaseId);
      else if (page === 0) written.delete(feed.databaseId);
      if (!last) return;
      feed.after = last.cursor;
      feed.buffered = read.data.filter((change) => this.matches(change));
      if (feed.buffered.length > 0) return;
      // Nothing here for this endpoint: its place moves past the changes it does not want (saved with the deliveries).
      this.places.set(feed.databaseId, { databaseId: feed.databaseId, ...positionOf(last.cursor) });
      if (!read.hasMore) return;
    }
  }

  /** The feed whose next matching change is the oldest, every feed filled first; null when all are read to their end. */
  private async oldest(): Promise<Feed | null> {
    this.feeds ??= await this.load();
    let best: Feed | null = null;
    for (const feed of this.feeds) {
      await this.fill(feed);
      const head = feed.buffered[0];
      if (head && (!best || head.committedAt < best.buffered[0]!.committedAt)) best = feed;
    }
    return best;
  }

  /** The next message to send, or null when every followed feed is read to its end. */
  async next(): Promise<InFlightMessage | null> {
    const feed = await this.oldest();
    const change = feed?.buffered.shift();
    if (!feed || !change) return null;
    const place = positionOf(change.cursor);
    return {
      id: messageIdOf(this.endpoint.id, this.endpoint.generation, feed.databaseId, place),
      type: change.kind,
      // When the change happened (Standard Webhooks' `timestamp`): the same on every attempt and after a crash.
      timestamp: change.committedAt,
      data: asDelivered(change),
      databaseId: feed.databaseId,
      cursor: change.cursor,
      ...place,
    };
  }

  /**
   * The next batch (`type: "changes"`), or null when every followed feed is read to its end: up to `maxChanges`
   * changes of the feed whose next change is the oldest, taken while it stays older than the other feeds' next
   * (so the endpoint receives the order single messages would have), and while the body stays within `maxBytes` (a
   * single larger change goes alone). Only what has committed goes in: a batch never waits for more changes.
   */
  async nextBatch(maxChanges: number, maxBytes: number): Promise<InFlightMessage | null> {
    const feed = await this.oldest();
    if (!feed) return null;
    const changes: ReturnType<typeof asDelivered>[] = [];
    let bytes = BATCH_ENVELOPE_BYTES;
    while (changes.length < maxChanges) {
      if (feed.buffered.length === 0) await this.fill(feed);
      const change = feed.buffered[0];
      if (!change || this.olderElsewhere(feed, change)) break;
      const delivered = asDelivered(change);
      const size = Buffer.byteLength(JSON.stringify(delivered)) + 1;
      if (changes.length > 0 && bytes + size > maxBytes) break;
      feed.buffered.shift();
      changes.push(delivered);
      bytes += size;
    }
    const first = changes[0]!;
    const last = changes.at(-1)!;
    const place = positionOf(last.cursor);
    return {
      id: messageIdOf(this.endpoint.id, this.endpoint.generation, feed.databaseId, positionOf(first.cursor), place),
      type: BATCH_TYPE,
      // The batch is as of its last change: the same on every attempt and after a crash.
      timestamp: last.committedAt,
      data: { changes },
      databaseId: feed.databaseId,
      cursor: last.cursor,
      ...place,
    };
  }

  /** Another feed has read a change committed before this one (feeds are not read again in the middle of a batch). */
  private olderElsewhere(feed: Feed, change: Change): boolean {
    return this.feeds!.some((other) => other !== feed && (other.buffered[0]?.committedAt ?? '~') < change.committedAt);
  }
}
