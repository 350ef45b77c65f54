import { createWaker } from '../engine/waker.ts';
import pg from 'pg';
import { FeedArming } from '../../catalog/change-arming.ts';
import { SharedSequencer } from '../../catalog/change-sequencing.ts';
import { CHANGES_CHANNEL } from '../../catalog/changes.ts';
import {
  deleteQueuedMessage,
  disableEndpoint,
  insertAttempt,
  insertDisabledEvent,
  MAX_BATCH_BYTES,
  pruneAttempts,
  retryMessage,
  saveProgress,
  selectActiveEndpoints,
  selectDueEndpoints,
  selectEndpoint,
  selectEndpointOrgs,
  selectEndpointVersion,
  selectFollowers,
  selectQueuedMessages,
  tryLockEndpoint,
  unlockEndpoint,
  type AttemptRecord,
  type DeliveredPlace,
  type EndpointRow,
  type InFlightMessage,
  type QueuedMessage,
} from '../../catalog/webhook-deliveries.ts';
import { destinationRules } from '../../catalog/webhook-destinations.ts';
import { configuredSealingKey, openSecret, sealingKey, webhookSigner } from '../../catalog/webhook-secrets.ts';
import { WEBHOOK_NOTIFY_CHANNEL } from '../../catalog/webhooks.ts';
import { inPgTransaction, pgExecutor } from '../../db/sql.ts';
import type { Config } from '../../kernel/config.ts';
import { newId } from '../../kernel/ids.ts';
import type { Logger } from '../../kernel/log.ts';
import { FollowedFeeds, type FeedNotifications } from './followed-feeds.ts';
import { OrgSlots, type Candidate } from './org-slots.ts';
import { sendMessage, type SendResult } from './send.ts';

/**
 * The webhook deliverer of a worker process (issue 27, docs/decisions/webhooks.md). Each endpoint is a tiny state
 * machine kept in its `webhooks` row: idle → one message in flight (committed before it is sent, so every attempt and
 * every resume after a crash sends the same webhook-id) → answered 2xx (the feed position moves past it) or failed
 * (retried on WEBHOOK_RETRY_SCHEDULE, then the endpoint is disabled). A worker works on an endpoint only while it
 * holds that endpoint's session advisory lock, so two workers never deliver one endpoint's messages concurrently,
 * and a killed worker's lock goes with its connection. Woken by NOTIFY on new changes (`wds_changes`: each followed
 * feed is armed before it is read to its end, src/catalog/change-arming.ts) and on every change of an endpoint:
 * settings, secret, state, deletion, a test message or a replay (`wds_webhooks`); every idle endpoint also looks at
 * its feeds once a minute (on Citus, where changes are not notified to this process, every second). The worker's
 * WEBHOOK_CONCURRENCY slots are shared between orgs (org-slots.ts) and a claim holds its slot for a bounded time.
 */

export interface DelivererOptions {
  pool: pg.Pool;
  config: Config;
  log: Logger;
  /** Tests: resolve host names differently. */
  resolve?: Parameters<typeof sendMessage>[0]['resolve'];
}

export interface Deliverer {
  stop(): Promise<void>;
}

const IDLE_RECHECK_SECONDS = 60;
/**
 * On Citus no NOTIFY of a change reaches the worker process (src/catalog/change-arming.ts): an idle endpoint looks at
 * its feeds this often instead, found by the due scan every JOB_POLL_MS (docs/decisions/citus.md).
 */
const CITUS_IDLE_RECHECK_SECONDS = 1;
/** Messages one claim of an endpoint sends before it lets other endpoints have the slot. */
const MESSAGES_PER_CLAIM = 100;
/**
 * …or how long it sends before it does (issue 48): the claim ends before its next message once this is spent, so a
 * slot is held at most this plus one attempt (WEBHOOK_TIMEOUT_MS, at most 60 s). Without it, a receiver answering in
 * 5 s held its slot for 100 messages, over 8 minutes, while other orgs' endpoints waited for a slot. A receiver
 * answering within 10 ms still sends its 100 messages per claim; a slower one is claimed again each second, which
 * costs a handful of statements (lock, endpoint, feed places, a page) per second and slot.
 */
const CLAIM_MS = 1_000;
/**
 * Delivered messages whose attempts and position are saved in one commit (or fewer, when the feeds are read to their
 * end, an attempt fails or the claim ends). A crash resends at most these, with the same ids; a settings change
 * (URL, events, disable) made meanwhile is seen after at most these.
 */
const SAVE_EVERY_MESSAGES = 20;
/** …or after this long, so that the attempt log of a slow receiver does not lag behind its deliveries. */
const SAVE_EVERY_MS = 250;
/**
 * The deliverer looks at a feed that is being written at most this often (reading it without arming it: the look
 * that reads it to its end schedules the next), and arms a quiet one at most this often, where a live reader looks
 * every REARM_AFTER_MS (50 ms): each look costs a claim (lock, endpoint, places), a sequencing write and a page
 * read, and on 2 cores those came out of the writers' CPU at 20 looks a second. At 5 looks a second, a change waits
 * up to 200 ms more before its delivery starts; deliveries are not a live view.
 */
const DELIVERY_REARM_MS = 200;
const PRUNE_INTERVAL_MS = 10 * 60_000;

type Signer = ReturnType<typeof webhookSigner>;

const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `5s,30s,2m,…` in milliseconds. Throws on a malformed entry, so a typo fails at start-up. */
export function parseRetrySchedule(text: string): number[] {
  return text
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => {
      const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(part);
      if (!match) throw new Error(`WEBHOOK_RETRY_SCHEDULE: "${part}" is not a delay such as 500ms, 5s, 2m, 1h or 1d`);
      return Number(match[1]) * UNITS[match[2]!]!;
    });
}

/** How many changes a feed message carries: a batch's count, else one. */
function changesIn(message: InFlightMessage): number {
  return (message.data as { changes?: unknown[] }).changes?.length ?? 1;
}

export function startWebhookDeliverer(options: DelivererOptions): Deliverer {
  const { pool, config, log } = options;
  const schedule = parseRetrySchedule(config.WEBHOOK_RETRY_SCHEDULE);
  const destinations = destinationRules(config);
  const configuredKey = configuredSealingKey(config.WEBHOOK_SECRET_KEY);
  const sql = pgExecutor(pool);
  const dirty = new Set<string>();
  const changedDatabases = new Set<string>();
  const busy = new Set<string>();
  const slots = new OrgSlots(config.WEBHOOK_CONCURRENCY);
  /** Each endpoint's org, learned from the statements that find endpoints to work on (its slots are the org's). */
  const orgOf = new Map<string, string>();
  /**
   * Endpoints notified on `wds_webhooks` while a claim held them: settings changed (PATCH, rotate-secret, delete),
   * a replay or a test message. The claim ends before its next send, so that the next claim sends with what holds
   * now; without this, a claim noticed a change only at its next save (up to SAVE_EVERY_MESSAGES or SAVE_EVERY_MS).
   */
  const moved = new Set<string>();
  /** Moves when the notification connection reopens: notifications may have been missed, so every arm is redone. */
  let epoch = 0;
  const counts = new Map<string, number>();
  const notifications: FeedNotifications = {
    listening: false,
    counts,
    arms: new FeedArming(sql, (databaseId) => `${epoch}.${counts.get(databaseId) ?? 0}`, DELIVERY_REARM_MS),
    sequencer: new SharedSequencer(sql),
    written: new Set(),
  };
  const running = new Set<Promise<void>>();
  let stopped = false;
  const connectionString = (pool as unknown as { options: { connectionString?: string } }).options.connectionString;
  let listener: pg.Client | null = null;

  const { notify, sleep } = createWaker(config.JOB_POLL_MS);

  /** A look that read a feed being written without arming it: the next look comes after DELIVERY_REARM_MS. */
  function lookAgainLater(webhookId: string): void {
    setTimeout(() => {
      dirty.add(webhookId);
      notify();
    }, DELIVERY_REARM_MS).unref();
  }

  /** The endpoint's signer: its secrets opened once per claim. */
  async function signerOf(endpoint: EndpointRow): Promise<Signer> {
    const key = await sealingKey(pool, sql, configuredKey);
    const secrets = [openSecret(key, endpoint.id, endpoint.secretSealed)];
    if (endpoint.previousSecretSealed) secrets.push(openSecret(key, endpoint.id, endpoint.previousSecretSealed));
    return webhookSigner(secrets);
  }

  async function attempt(
    endpoint: EndpointRow,
    sign: Signer,
    message: { id: string; type: string; timestamp: string; data: unknown },
  ): Promise<SendResult> {
    const body = JSON.stringify({ type: message.type, timestamp: message.timestamp, data: message.data });
    const now = new Date();
    const headers = {
      'content-type': 'application/json',
      'user-agent': 'workspace-data-service-webhooks',
      'webhook-id': message.id,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': sign(message.id, now, body),
    };
    return sendMessage({
      url: endpoint.url,
      headers,
      body,
      timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      destinations,
      resolve: options.resolve,
    });
  }

  async function deliverQueued(endpoint: EndpointRow, sign: Signer): Promise<void> {
    const queued = await sql.run<QueuedMessage>(selectQueuedMessages(endpoint.id, 10));
    for (const message of queued) {
      const id = `msg_${message.id}`;
      const attemptedAt = new Date();
      const result = await attempt(endpoint, sign, {
        id,
        type: message.type,
        timestamp: message.createdAt,
        data: message.data,
      });
      await inPgTransaction(pool, [], async (tx) => {
        await tx.run(
          insertAttempt({
            id: newId(),
            webhookId: endpoint.id,
            messageId: id,
            type: message.type,
            cursor: null,
            changes: 0,
            attempt: 1,
            ...result,
            succeeded: result.error === null,
            nextAttemptAt: null,
            attemptedAt,
          }),
        );
        await tx.run(deleteQueuedMessage(message.id));
        return { value: undefined };
      });
      if (result.error !== null)
        log.warn({ webhookId: endpoint.id, messageId: id, attempt: 1, error: result.error }, 'webhook attempt failed');
    }
  }

  /**
   * Sends the endpoint's messages while it has some and they succeed, at most MESSAGES_PER_CLAIM. A single change's
   * message is not committed before its send: its id and body are functions of the change (FollowedFeeds.next), so a
   * crash before the save resends the same message. Deliveries are saved in batches (SAVE_EVERY_MESSAGES,
   * SAVE_EVERY_MS, and whenever the feeds are read to their end); a settings change made meanwhile (its version
   * moves) or a replay (the generation moves) ends the claim before its next send, once its notification arrives
   * (`moved`), and at the latest at the next save, so that the next claim reads the new settings. A batch of changes
   * depends on what had committed when it was read, so it is committed as the message in flight before it is sent,
   * with the save of the deliveries before it: every attempt, and a resume after a crash, send the same changes under
   * the same id.
   */
  async function work(webhookId: string): Promise<void> {
    dirty.delete(webhookId);
    // What was notified before now is in the settings read next.
    moved.delete(webhookId);
    const [endpoint] = await sql.run<EndpointRow>(selectEndpoint(webhookId));
    if (!endpoint) {
      orgOf.delete(webhookId);
      return;
    }
    const sign = await signerOf(endpoint);
    if (endpoint.hasQueued) await deliverQueued(endpoint, sign);
    if (endpoint.state !== 'active' || (endpoint.message !== null && !endpoint.due)) return;
    const attempts: AttemptRecord[] = [];
    const places = new Map<string, DeliveredPlace>();
    const feeds = new FollowedFeeds(sql, endpoint, notifications, log, endpoint.message, places);
    let message = endpoint.message;
    let failedBefore = endpoint.failedAttempts;
    let savedAt = Date.now();
    const batch = endpoint.batchMaxChanges;
    const nextMessage = () => (batch === null ? feeds.next() : feeds.nextBatch(batch, MAX_BATCH_BYTES));

    /**
     * Commits the deliveries since the last save, and the batch about to be sent if any; false when the claim must
     * end (settings or generation moved).
     */
    const save = async (idleSeconds: number | null, sending: InFlightMessage | null = null): Promise<boolean> => {
      const [after] = await sql.run<{ version: string | null; state: string | null }>(
        saveProgress(webhookId, endpoint.generation, attempts, [...places.values()], idleSeconds, sending),
      );
      attempts.length = 0;
      places.clear();
      savedAt = Date.now();
      return after?.state === 'active' && after.version === endpoint.version;
    };
    /**
     * Whether the settings the claim loaded still hold. Checked once, before the claim's first send: a secret rotated
     * after the endpoint was loaded, and before the change being sent committed, would otherwise leave that message
     * signed with the old secret alone (a batch is checked by the save that commits it before its send).
     */
    let checked = false;
    const settingsHold = async (): Promise<boolean> => {
      if (checked) return true;
      checked = true;
      const [now] = await sql.run<{ version: string; state: string }>(selectEndpointVersion(webhookId));
      return now?.state === 'active' && now.version === endpoint.version;
    };

    // The first message is sent however long the claim took to start (a loaded database): every claim makes progress.
    const yieldAt = Date.now() + CLAIM_MS;
    for (let sent = 0; sent < MESSAGES_PER_CLAIM && (sent === 0 || Date.now() < yieldAt) && !stopped; sent += 1) {
      if (message === null) {
        dirty.delete(webhookId);
        message = await nextMessage();
        if (message === null) {
          if (feeds.polled) lookAgainLater(webhookId);
          const recheck = (await notifications.arms.polls()) ? CITUS_IDLE_RECHECK_SECONDS : IDLE_RECHECK_SECONDS;
          if (!(await save(recheck))) dirty.add(webhookId);
          return;
        }
        // A batch is committed before it is sent; when the settings changed meanwhile, the next claim sends it.
        if (batch !== null && !(await save(null, message))) {
          dirty.add(webhookId);
          return;
        }
      }
      if (moved.delete(webhookId)) {
        await save(null);
        dirty.add(webhookId);
        return;
      }
      if (!(await settingsHold())) {
        dirty.add(webhookId);
        return;
      }
      const attemptedAt = new Date();
      const result = await attempt(endpoint, sign, message);
      const failed = failedBefore + 1;
      const record = {
        id: newId(),
        webhookId,
        messageId: message.id,
        type: message.type,
        cursor: message.cursor,
        changes: changesIn(message),
        attempt: failed,
        ...result,
        attemptedAt,
      };
      if (result.error !== null) {
        await recordFailure(endpoint, message, record, failed, attempts, [...places.values()]);
        return;
      }
      attempts.push({ ...record, succeeded: true, nextAttemptAt: null });
      places.set(message.databaseId, { databaseId: message.databaseId, position: message.position, seq: message.seq });
      message = null;
      failedBefore = 0;
      const saveDue = attempts.length >= SAVE_EVERY_MESSAGES || Date.now() - savedAt >= SAVE_EVERY_MS;
      // A batching endpoint saves before each send.
      if (batch === null && saveDue) {
        if (!(await save(null))) {
          dirty.add(webhookId);
          return;
        }
      }
    }
    // The claim's share (messages or time) is spent, or the worker stops: other endpoints get the slot, and this one
    // is looked at again.
    await save(null);
    dirty.add(webhookId);
  }

  /**
   * A failed attempt, saved with the deliveries before it: retried on the schedule (the message kept, so that the
   * retry sends it even if the feed's retention removed the change meanwhile), or after its last retry the endpoint
   * is disabled.
   */
  async function recordFailure(
    endpoint: EndpointRow,
    message: InFlightMessage,
    record: Omit<AttemptRecord, 'succeeded' | 'nextAttemptAt'>,
    failed: number,
    delivered: readonly AttemptRecord[],
    places: readonly DeliveredPlace[],
  ) {
    const delay = schedule[failed - 1];
    const logged = {
      ...record,
      succeeded: false,
      nextAttemptAt: delay === undefined ? null : new Date(Date.now() + delay),
    };
    await inPgTransaction(pool, [], async (tx) => {
      await tx.run(saveProgress(endpoint.id, endpoint.generation, [...delivered, logged], places, null));
      if (delay !== undefined) {
        await tx.run(retryMessage(endpoint.id, endpoint.generation, message, failed, delay));
        return { value: undefined };
      }
      const reason = `Disabled after ${failed} failed attempts of one message; the last: ${record.error}`;
      const [disabled] = await tx.run<{ url: string }>(
        disableEndpoint(endpoint.id, endpoint.generation, message, failed, reason),
      );
      if (disabled) {
        await tx.run(
          insertDisabledEvent(
            newId(),
            endpoint.orgId,
            endpoint.databaseId,
            `Disabled the webhook to ${new URL(disabled.url).host} after ${failed} failed attempts; ` +
              're-enable it to resume from the first undelivered change',
          ),
        );
      }
      return { value: undefined };
    });
    // warn: a failing receiver is the operator's to look at, and info is often filtered out in production (issue 46).
    log.warn(
      { webhookId: endpoint.id, messageId: message.id, attempt: failed, error: record.error },
      'webhook attempt failed',
    );
  }

  /** Works on the endpoint if no worker does: the advisory lock lives on a connection held for the whole claim. */
  async function claim(webhookId: string): Promise<void> {
    const client = await pool.connect();
    let locked = false;
    try {
      const [row] = await pgExecutor(client).run<{ locked: boolean }>(tryLockEndpoint(webhookId));
      locked = row?.locked === true;
      // Another worker has it; that worker hears the same notifications, so nothing is lost by letting go.
      if (!locked) {
        dirty.delete(webhookId);
        return;
      }
      await work(webhookId);
    } catch (error) {
      log.error({ err: error, webhookId }, 'webhook delivery failed');
    } finally {
      if (locked)
        await pgExecutor(client)
          .run(unlockEndpoint(webhookId))
          .catch(() => undefined);
      client.release();
    }
  }

  /** Every active endpoint is looked at once: on start, and after notifications may have been missed. */
  async function lookAtAll(): Promise<void> {
    const rows = await sql.run<Candidate>(selectActiveEndpoints());
    for (const row of rows) {
      orgOf.set(row.id, row.orgId);
      dirty.add(row.id);
    }
    notify();
  }

  /**
   * LISTEN for new changes and for test, replay and re-enable. While the connection is down, every look reads the
   * feeds (FeedNotifications.listening) and idle endpoints are looked at by the due scan; it is reopened after a second.
   */
  async function listen(): Promise<void> {
    const client = new pg.Client({ connectionString });
    listener = client;
    let reopening = false;
    const reopen = () => {
      notifications.listening = false;
      epoch += 1;
      client.end().catch(() => undefined);
      if (reopening || stopped) return;
      reopening = true;
      setTimeout(() => void listen(), 1_000).unref();
    };
    client.on('notification', (message) => {
      if (!message.payload) return;
      if (message.channel === CHANGES_CHANNEL) {
        changedDatabases.add(message.payload);
        notifications.counts.set(message.payload, (notifications.counts.get(message.payload) ?? 0) + 1);
      } else {
        // A new or changed endpoint: who follows which database may have changed.
        followers.clear();
        dirty.add(message.payload);
        if (busy.has(message.payload)) moved.add(message.payload);
      }
      notify();
    });
    client.on('error', (error) => {
      log.warn({ err: error }, 'webhook notification connection failed; reopening it');
      reopen();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANGES_CHANNEL}`);
      await client.query(`LISTEN ${WEBHOOK_NOTIFY_CHANNEL}`);
      notifications.listening = true;
      // Whatever was committed while no one listened is looked at now, not at the next idle recheck.
      await lookAtAll();
    } catch (error) {
      log.warn({ err: error }, 'webhook notifications unavailable; retrying in a second');
      reopen();
    }
  }

  /**
   * Who follows a database, cached for a poll interval: at hundreds of changes per second the lookup would otherwise
   * run once per commit. An endpoint created meanwhile is found by the due scan within the same interval.
   */
  const followers = new Map<string, { ids: string[]; at: number }>();
  let lastDueScan = 0;

  async function candidates(): Promise<Candidate[]> {
    const now = Date.now();
    const unknown = [...changedDatabases].filter((id) => (followers.get(id)?.at ?? 0) < now - config.JOB_POLL_MS);
    if (unknown.length > 0) {
      const rows = await sql.run<Candidate & { databaseId: string }>(selectFollowers(unknown));
      for (const databaseId of unknown) followers.set(databaseId, { ids: [], at: now });
      for (const row of rows) {
        orgOf.set(row.id, row.orgId);
        followers.get(row.databaseId)!.ids.push(row.id);
      }
    }
    for (const databaseId of changedDatabases) for (const id of followers.get(databaseId)?.ids ?? []) dirty.add(id);
    changedDatabases.clear();
    let due: Candidate[] = [];
    if (now - lastDueScan >= config.JOB_POLL_MS) {
      lastDueScan = now;
      due = await sql.run<Candidate>(selectDueEndpoints(config.WEBHOOK_CONCURRENCY * 4));
      for (const row of due) orgOf.set(row.id, row.orgId);
    }
    const ids = [...new Set([...dirty, ...due.map((row) => row.id)])].filter((id) => !busy.has(id));
    await learnOrgs(ids.filter((id) => !orgOf.has(id)));
    return ids.filter((id) => orgOf.has(id)).map((id) => ({ id, orgId: orgOf.get(id)! }));
  }

  /**
   * The orgs of endpoints known only by a notification (a new endpoint, a test message): one lookup for all of them.
   * An id without a row was deleted, and has nothing to deliver.
   */
  async function learnOrgs(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    for (const row of await sql.run<Candidate>(selectEndpointOrgs(ids))) orgOf.set(row.id, row.orgId);
    for (const id of ids) if (!orgOf.has(id)) dirty.delete(id);
  }

  let lastPrune = 0;
  async function pruneLog(): Promise<void> {
    if (Date.now() - lastPrune < PRUNE_INTERVAL_MS) return;
    lastPrune = Date.now();
    await sql.run(pruneAttempts(new Date(Date.now() - config.CHANGE_RETENTION_DAYS * 86_400_000)));
  }

  const loop = (async () => {
    await listen();
    while (!stopped) {
      try {
        await pruneLog();
        // Slots are given fairly between orgs (org-slots.ts); what does not get one stays due for the next turn.
        for (const { id, orgId } of slots.take(await candidates())) {
          busy.add(id);
          const task = claim(id).finally(() => {
            busy.delete(id);
            slots.give(orgId);
            running.delete(task);
            // A slot is free: whatever waits for one, of this org or another, gets its turn now.
            if (dirty.size > 0) notify();
          });
          running.add(task);
        }
      } catch (error) {
        log.error({ err: error }, 'looking for webhook work failed');
      }
      await sleep();
    }
  })();

  return {
    stop: async () => {
      stopped = true;
      notify();
      await loop;
      await Promise.allSettled(running);
      await listener?.end().catch(() => undefined);
    },
  };
}
