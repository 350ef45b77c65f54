import { setTimeout as sleep } from 'node:timers/promises';
import {
  encodeChangeCursor,
  type ChangeJson,
  readChangesAsJson,
  readHead,
  type ChangeAnswer,
  type ChangeJsonPage,
} from '../../catalog/changes.ts';
import { ChangesQuery, RowChangesQuery } from '../../contracts/changes.ts';
import type { FeedArming } from '../../catalog/change-arming.ts';
import type { ChangeSignal } from '../../db/listener.ts';
import { selectActiveDatabase } from '../../catalog/databases.ts';
import { DomainError, notFound } from '../../kernel/errors.ts';
import { Id } from '../../kernel/formats.ts';
import type { StreamLease } from '../../kernel/stream-limits.ts';
import { builder } from '../server/builder.ts';
import { dataPlane, type Context } from '../server/context.ts';
import { acquireStream } from '../server/stream-leases.ts';
import { parseOrThrow } from '../../kernel/validation.ts';

/**
 * The change feed of a database (issue 27): a page by cursor, its head, a long poll (`wait`) and a live stream
 * (`rowChanges`). Every reader of the database's rows may follow it. The feed itself, its order and its cursors are
 * src/catalog/changes.ts; waiting is woken by NOTIFY on `wds_changes`, so a change committed through any API
 * process or worker wakes the readers of every process.
 */
const STREAM_PAGE = 100;

/** Not a change: the error a stream ends with once its caller may no longer read the feed. */
interface StreamEnd {
  endedWith: DomainError;
}

const ChangeActor = builder.objectRef<ChangeAnswer['actor']>('ChangeActor').implement({
  fields: (t) => ({ id: t.exposeString('id'), kind: t.exposeString('kind') }),
});

/** A change as the JSON text of its answer, read into an object for a selection of its members. */
const answerOf = (change: ChangeJson) => change.parse() as ChangeAnswer;

export const ChangeObject = builder.objectRef<ChangeAnswer>('Change').implement({
  description:
    'One committed change of a database: a row created, updated, deleted or restored, or a table or schema change.',
  fields: (t) => ({
    cursor: t.exposeString('cursor', {
      description: 'Follow the feed from here (`after`), or resume a stream (`Last-Event-ID`).',
    }),
    kind: t.exposeString('kind'),
    tableId: t.exposeID('tableId'),
    rowId: t.exposeID('rowId', { nullable: true }),
    version: t.exposeString('version', { nullable: true }),
    schemaVersion: t.exposeInt('schemaVersion', { nullable: true }),
    mutationId: t.exposeID('mutationId'),
    actor: t.field({ type: ChangeActor, resolve: (change) => change.actor }),
    committedAt: t.field({ type: 'Timestamp', resolve: (change) => change.committedAt }),
    values: t.field({ type: 'JSON', nullable: true, resolve: (change) => change.values }),
    previous: t.field({ type: 'JSON', nullable: true, resolve: (change) => change.previous }),
  }),
});

const ChangePageObject = builder.objectRef<ChangeJsonPage>('ChangePage').implement({
  fields: (t) => ({
    data: t.field({ type: [ChangeObject], resolve: (page) => page.data.map(answerOf) }),
    dataJson: t.field({
      type: ['JSON'],
      description:
        '`data` with every member of each change (null where it does not apply), each change one JSON object as ' +
        '`GET …/changes` answers it: for a reader that wants every member, cheaper to answer than selecting them ' +
        'all from `data` (the server passes on each change as JSON text instead of resolving each member).',
      resolve: (page) => page.data,
    }),
    nextCursor: t.exposeString('nextCursor'),
    hasMore: t.exposeBoolean('hasMore'),
  }),
});

const ChangeHead = builder.objectRef<{ cursor: string }>('ChangeFeedHead').implement({
  fields: (t) => ({ cursor: t.exposeString('cursor') }),
});

function defined(args: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(args).filter(([, value]) => value !== null && value !== undefined));
}

/** A 404 unless the database is active and in that org; read per request, as every check of authority is. */
async function requireFeedDatabase(context: Context, orgId: string, databaseId: string): Promise<void> {
  const [found] = await dataPlane(context).run(selectActiveDatabase(orgId, databaseId));
  if (!found) throw notFound('database');
}

function reader(context: Context, databaseId: string, tableId: string | undefined) {
  return (after: string | null, limit: number, positionedOnly = false) =>
    readChangesAsJson(dataPlane(context), {
      databaseId,
      after,
      limit,
      tableIds: tableId ? [tableId] : null,
      retentionDays: context.config.CHANGE_RETENTION_DAYS,
      sequencer: context.changeSequencer,
      positionedOnly,
    });
}

/**
 * A stream's reader: its pages shared with the process's other streams reading the same page
 * (src/catalog/change-reads.ts); `fresh` for a read that must see every commit before it was asked for.
 */
function streamReader(context: Context, databaseId: string, tableId: string | undefined) {
  const read = reader(context, databaseId, tableId);
  return (after: string, limit: number, fresh: boolean) =>
    context.changeReads.read(`${databaseId}.${tableId ?? '*'}.${limit}.${after}`, fresh, () => read(after, limit));
}

/**
 * A page; with `wait`, an empty page is held until a change commits or the wait ends. The signal listens before
 * the first read, so a change committed between the read and the wait still wakes it. A waiting poll holds an open
 * stream's lease (its caps, and its end when the caller's authority goes).
 */
async function changesPage(
  context: Context,
  orgId: string,
  databaseId: string,
  query: ChangesQuery,
): Promise<ChangeJsonPage> {
  await requireFeedDatabase(context, orgId, databaseId);
  const place = { databaseId, tableId: query.tableId, limit: query.limit };
  const load = reader(context, databaseId, query.tableId);
  const read = (after: string | null) =>
    context.changeReadAhead.read(place, after, (from, ahead) => load(from, query.limit, ahead));
  if (query.wait === undefined) return read(query.after ?? null);
  const abort = new AbortController();
  const lease = await acquireStream(context, orgId, 'rows:read', () => abort.abort());
  let signal: ChangeSignal | undefined;
  try {
    signal = await context.changeSignals.subscribe(databaseId);
    const deadline = Date.now() + query.wait * 1000;
    let after = query.after ?? null;
    for (;;) {
      if (lease.revoked) throw lease.revoked;
      const page = await read(after);
      const left = deadline - Date.now();
      // Shutting down: an empty page now, so that the client's next poll goes to a process that is not stopping.
      if (page.data.length > 0 || left <= 0 || signal.draining) return page;
      after = page.nextCursor;
      // Newly armed: read once more before waiting (a change may have committed before the arm).
      if (await context.changeArms.arm(databaseId)) continue;
      await Promise.race([
        context.changeArms.next(signal),
        sleep(left, undefined, { signal: abort.signal }).catch(() => undefined),
      ]);
    }
  } finally {
    abort.abort();
    signal?.close();
    lease.release();
  }
}

/** Not a change: the error the stream ends with. */
interface StreamEnd {
  endedWith: DomainError;
}

/**
 * Changes one at a time from `after` (or from the head: a stream opened without a cursor shows what happens next),
 * reading a page whenever the last is used up and, once a read has reached the feed's end, reading again after a
 * pause while the feed is being written, else arming it (then reading once more) and waiting for NOTIFY (on Citus,
 * for the next poll). A hand-written
 * iterator, like `jobUpdated`'s: a generator waiting for the next change would not run its cleanup on disconnect.
 * On shutdown (ChannelListener.drain) it sends what it has read, then ends with SERVICE_RESTARTING: the client
 * reconnects with the last event's cursor (`Last-Event-ID`) and misses nothing.
 */
function changeEvents(
  read: ReturnType<typeof streamReader>,
  start: string,
  signal: ChangeSignal,
  arms: FeedArming,
  databaseId: string,
  lease: StreamLease,
): AsyncIterableIterator<ChangeJson | StreamEnd> {
  let cursor = start;
  let buffer: ChangeJson[] = [];
  let atEnd = false;
  let found = false;
  let finished = false;
  /** The next read follows an arm this stream made: it must see every commit before the arm, so it is its own. */
  let fresh = false;
  const finish = (): IteratorReturnResult<undefined> => {
    finished = true;
    signal.close();
    lease.release();
    return { done: true, value: undefined };
  };
  return {
    async next() {
      try {
        while (!finished) {
          // The last event carries the error (resolve throws it, framed like any other), then the stream ends.
          if (lease.revoked) {
            finished = true;
            return { done: false, value: { endedWith: lease.revoked } };
          }
          const change = buffer.shift();
          if (change) return { done: false, value: change };
          // The last read reached the feed's end. With changes in it, the feed is being written: read again after
          // REARM_AFTER_MS (FeedArming.pause). Without, read again once the feed is armed anew (a read after an arm
          // sees every commit before it, and a commit after it notifies). A feed written continuously costs one read
          // per REARM_AFTER_MS, not a read per change or two. On Citus, after each poll.
          if (atEnd && found && !(await arms.polls())) await arms.pause(signal);
          else if (atEnd) {
            // `finished` too: once the client is gone (`return()`), the signal is closed and its `next()` resolves at
            // once, while the arm still holds for the other readers of the database; without it this loop spun on
            // resolved promises forever, starving the process's event loop.
            for (;;) {
              fresh = await arms.arm(databaseId);
              if (fresh) break;
              await arms.next(signal);
              if (finished || signal.draining || lease.revoked || (await arms.polls())) break;
            }
            if (finished) break;
          }
          if (signal.draining) {
            finished = true;
            const restarting = new DomainError(
              'SERVICE_RESTARTING',
              'The service is restarting: reconnect to follow the changes.',
              { retryAfter: 1 },
            );
            return { done: false, value: { endedWith: restarting } };
          }
          const page = await read(cursor, STREAM_PAGE, fresh);
          fresh = false;
          // A copy: the page may be another stream's too, and this one takes its changes off the front.
          buffer = page.data.slice();
          cursor = page.nextCursor;
          atEnd = !page.hasMore;
          found = page.data.length > 0;
        }
        return finish();
      } catch (error) {
        finish();
        throw error;
      }
    },
    async return() {
      return finish();
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

const listArgs = builder.args((t) => ({
  orgId: t.id({ required: true, validate: Id }),
  databaseId: t.id({ required: true, validate: Id }),
  tableId: t.id(),
  after: t.string(),
  limit: t.int(),
  wait: t.int(),
}));

const streamArgs = builder.args((t) => ({
  orgId: t.id({ required: true, validate: Id }),
  databaseId: t.id({ required: true, validate: Id }),
  tableId: t.id(),
  after: t.string(),
}));

builder.queryFields((t) => ({
  databaseChanges: t.field({
    type: ChangePageObject,
    description:
      'The database’s changes after `after` (from the oldest retained without it), in commit order. ' +
      '`wait` (1-30 s) holds an empty page until a change commits.',
    args: listArgs,
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    resolve: (_root, args, context) => {
      const { orgId, databaseId, ...rest } = args;
      return changesPage(context, String(orgId), String(databaseId), parseOrThrow(ChangesQuery, defined(rest)));
    },
  }),
  databaseChangesHead: t.field({
    type: ChangeHead,
    description: 'A cursor at the newest committed change: follow the feed from now on.',
    args: { orgId: t.arg.id({ required: true, validate: Id }), databaseId: t.arg.id({ required: true, validate: Id }) },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    resolve: async (_root, args, context) => {
      const [orgId, databaseId] = [String(args.orgId), String(args.databaseId)];
      await requireFeedDatabase(context, orgId, databaseId);
      return {
        cursor: encodeChangeCursor(databaseId, await readHead(dataPlane(context), databaseId, context.changeSequencer)),
      };
    },
  }),
}));

/** Opens a stream of the database's changes (`rowChanges`, `rowChangesJson`): its lease, signal and first read. */
async function subscribeToChanges(
  context: Context,
  args: {
    orgId: string | number;
    databaseId: string | number;
    tableId?: string | number | null;
    after?: string | null;
  },
): Promise<AsyncIterableIterator<ChangeJson | StreamEnd>> {
  const { orgId, databaseId, ...rest } = args;
  const query = parseOrThrow(RowChangesQuery, defined(rest));
  let wake: () => void = () => {};
  const lease = await acquireStream(context, String(orgId), 'rows:read', () => wake());
  let signal: ChangeSignal | undefined;
  try {
    await requireFeedDatabase(context, String(orgId), String(databaseId));
    const read = streamReader(context, String(databaseId), query.tableId);
    signal = await context.changeSignals.subscribe(String(databaseId));
    const opened = signal;
    wake = () => opened.close();
    // Reading the first page now turns a bad or expired cursor into an error answer, not a stream that fails.
    const start =
      query.after ??
      encodeChangeCursor(
        String(databaseId),
        await readHead(dataPlane(context), String(databaseId), context.changeSequencer),
      );
    await read(start, 1, true);
    return changeEvents(read, start, signal, context.changeArms, String(databaseId), lease);
  } catch (error) {
    signal?.close();
    lease.release();
    throw error;
  }
}

/** The change an event carries; the error a stream ends with, thrown so that it is framed like any other. */
function changeOf(event: ChangeJson | StreamEnd): ChangeJson {
  if ('endedWith' in event) throw event.endedWith;
  return event;
}

builder.subscriptionFields((t) => ({
  rowChanges: t.field({
    type: ChangeObject,
    description: 'The database’s changes as they commit, in commit order: after `after` when given, else from now on.',
    args: streamArgs,
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    subscribe: (_root, args, context) => subscribeToChanges(context, args),
    resolve: (event: ChangeJson | StreamEnd) => answerOf(changeOf(event)),
  }),
  rowChangesJson: t.field({
    type: 'JSON',
    description:
      '`rowChanges` with every member of each change (null where it does not apply), each change one JSON object ' +
      'as `GET …/changes` answers it: for a follower that wants every member, cheaper to stream than selecting ' +
      'them all from `rowChanges` (the server passes on each change as JSON text instead of resolving each member).',
    args: streamArgs,
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    subscribe: (_root, args, context) => subscribeToChanges(context, args),
    resolve: (event: ChangeJson | StreamEnd) => changeOf(event),
  }),
}));
