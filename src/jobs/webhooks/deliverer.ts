import pg from 'pg';
import { CHANGES_CHANNEL, encodeChangeCursor, readChanges, type Change } from '../../catalog/changes.ts';
import {
  deleteQueuedMessage, disableEndpoint, finishMessage, idleEndpoint, insertAttempt, insertDisabledEvent, pruneAttempts,
  retryMessage, savePosition, selectActiveEndpoints, selectDueEndpoints, selectEndpoint, selectFollowedFeeds, selectFollowers,
  selectQueuedMessages, startMessage, tryLockEndpoint, unlockEndpoint, type EndpointRow, type InFlightMessage, type QueuedMessage,
} from '../../catalog/webhook-deliveries.ts';
import { parseNetworks, type Network } from '../../catalog/webhook-destinations.ts';
import { configuredSealingKey, openSecret, sealingKey, signatureHeader } from '../../catalog/webhook-secrets.ts';
import { WEBHOOK_NOTIFY_CHANNEL } from '../../catalog/webhooks.ts';
import type { Statement } from '../../data/sql.ts';
import { inPgTransaction, pgExecutor, type SqlExecutor } from '../../db/sql.ts';
import type { Config } from '../../config.ts';
import { DomainError } from '../../errors.ts';
import { newId } from '../../ids.ts';
import type { Logger } from '../../log.ts';
import { sendMessage, type SendResult } from './send.ts';

/**
 * The webhook deliverer of a worker process (issue 27, docs/decisions/webhooks.md). Each endpoint is a tiny state
 * machine kept in its `webhooks` row: idle → one message in flight (committed before it is sent, so every attempt and
 * every resume after a crash sends the same webhook-id) → answered 2xx (the feed position moves past it) or failed
 * (retried on WEBHOOK_RETRY_SCHEDULE, then the endpoint is disabled). A worker works on an endpoint only while it
 * holds that endpoint's session advisory lock, so two workers never deliver one endpoint's messages concurrently,
 * and a killed worker's lock goes with its connection. Woken by NOTIFY on new changes (`wds_changes`) and on test,
 * replay and re-enable (`wds_webhooks`); every idle endpoint also looks at its feeds once a minute.
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
/** Messages one claim of an endpoint sends before it lets other endpoints have the slot. */
const MESSAGES_PER_CLAIM = 100;
const FEED_PAGE = 100;
/** Feed pages of non-matching changes one look reads before it saves its place and yields. */
const PAGES_PER_LOOK = 20;
const PRUNE_INTERVAL_MS = 10 * 60_000;

const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `5s,30s,2m,…` in milliseconds. Throws on a malformed entry, so a typo fails at start-up. */
export function parseRetrySchedule(text: string): number[] {
  return text.split(',').map((part) => part.trim()).filter(Boolean).map((part) => {
    const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(part);
    if (!match) throw new Error(`WEBHOOK_RETRY_SCHEDULE: "${part}" is not a delay such as 500ms, 5s, 2m, 1h or 1d`);
    return Number(match[1]) * UNITS[match[2]!]!;
  });
}

function run<Row = Record<string, unknown>>(sql: SqlExecutor, statement: Statement): Promise<Row[]> {
  return sql.query<Row>(statement.sql, statement.params);
}

function matches(endpoint: EndpointRow, change: Change): boolean {
  return endpoint.events.includes('*') || endpoint.events.includes(change.kind);
}

/** A change as `GET …/changes` answers it: every member present, null when it does not apply. */
function asDelivered(change: Change) {
  return {
    cursor: change.cursor, kind: change.kind, tableId: change.tableId, rowId: change.rowId ?? null, version: change.version ?? null,
    schemaVersion: change.schemaVersion ?? null, mutationId: change.mutationId, actor: change.actor, committedAt: change.committedAt,
    values: change.values ?? null, previous: change.previous ?? null,
  };
}

function positionOf(cursor: string): { position: string; seq: string } {
  const [, , position, seq] = Buffer.from(cursor, 'base64url').toString('latin1').split('.');
  return { position: position!, seq: seq! };
}

export function startWebhookDeliverer(options: DelivererOptions): Deliverer {
  const { pool, config, log } = options;
  const schedule = parseRetrySchedule(config.WEBHOOK_RETRY_SCHEDULE);
  const allowed: Network[] = parseNetworks(config.WEBHOOK_ALLOWED_NETWORKS);
  const configuredKey = configuredSealingKey(config.WEBHOOK_SECRET_KEY);
  const sql = pgExecutor(pool);
  const dirty = new Set<string>();
  const changedDatabases = new Set<string>();
  const busy = new Set<string>();
  const running = new Set<Promise<void>>();
  let stopped = false;
  let woken = false;
  let wake: (() => void) | null = null;
  const listener = new pg.Client({ connectionString: (pool as unknown as { options: { connectionString?: string } }).options.connectionString });

  const notify = () => {
    woken = true;
    wake?.();
  };
  const sleep = () => new Promise<void>((resolve) => {
    if (woken) {
      woken = false;
      resolve();
      return;
    }
    const timer = setTimeout(() => { wake = null; resolve(); }, config.JOB_POLL_MS);
    wake = () => { clearTimeout(timer); wake = null; woken = false; resolve(); };
  });

  /** The next change of any followed feed that the endpoint wants, oldest commit first; skipped changes are passed. */
  async function nextChange(endpoint: EndpointRow): Promise<InFlightMessage | null> {
    const feeds = await run<{ databaseId: string; position: string | null; seq: string | null }>(
      sql, selectFollowedFeeds(endpoint.id, endpoint.orgId, endpoint.databaseId));
    let best: { change: Change; databaseId: string } | null = null;
    for (const feed of feeds) {
      let after = feed.position === null ? null : encodeChangeCursor(feed.databaseId, { position: BigInt(feed.position), seq: BigInt(feed.seq!) });
      for (let page = 0; page < PAGES_PER_LOOK; page += 1) {
        const read = await readFeed(feed.databaseId, after, endpoint.tableIds);
        const found = read.data.find((change) => matches(endpoint, change));
        if (found) {
          if (!best || found.committedAt < best.change.committedAt) best = { change: found, databaseId: feed.databaseId };
          break;
        }
        const last = read.data.at(-1);
        if (!last) break;
        // Nothing here for this endpoint: its place moves past the changes it does not want.
        const { position, seq } = positionOf(last.cursor);
        await run(sql, savePosition(endpoint.id, feed.databaseId, position, seq));
        after = last.cursor;
        if (!read.hasMore) break;
      }
    }
    if (!best) return null;
    const { position, seq } = positionOf(best.change.cursor);
    return {
      id: `msg_${newId()}`, type: best.change.kind, timestamp: new Date().toISOString(), data: asDelivered(best.change),
      databaseId: best.databaseId, cursor: best.change.cursor, position, seq,
    };
  }

  /** A place older than the feed's retention restarts at the oldest retained change (the gap is logged). */
  async function readFeed(databaseId: string, after: string | null, tableIds: string[]) {
    try {
      return await readChanges(sql, { databaseId, after, limit: FEED_PAGE, tableIds });
    } catch (error) {
      if (!(error instanceof DomainError) || error.code !== 'CURSOR_INVALID') throw error;
      log.warn({ databaseId }, 'a webhook fell behind the change feed’s retention; it continues from the oldest retained change');
      return readChanges(sql, { databaseId, after: null, limit: FEED_PAGE, tableIds });
    }
  }

  async function secretsOf(endpoint: EndpointRow): Promise<string[]> {
    const key = await sealingKey(pool, sql, configuredKey);
    const secrets = [openSecret(key, endpoint.id, endpoint.secretSealed)];
    if (endpoint.previousSecretSealed) secrets.push(openSecret(key, endpoint.id, endpoint.previousSecretSealed));
    return secrets;
  }

  async function attempt(endpoint: EndpointRow, message: { id: string; type: string; timestamp: string; data: unknown }): Promise<SendResult> {
    const body = JSON.stringify({ type: message.type, timestamp: message.timestamp, data: message.data });
    const now = new Date();
    const headers = {
      'content-type': 'application/json',
      'user-agent': 'workspace-data-service-webhooks',
      'webhook-id': message.id,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': signatureHeader(await secretsOf(endpoint), message.id, now, body),
    };
    return sendMessage({ url: endpoint.url, headers, body, timeoutMs: config.WEBHOOK_TIMEOUT_MS, allowedNetworks: allowed, resolve: options.resolve });
  }

  async function deliverQueued(endpoint: EndpointRow): Promise<void> {
    const queued = await run<QueuedMessage>(sql, selectQueuedMessages(endpoint.id, 10));
    for (const message of queued) {
      const id = `msg_${message.id}`;
      const result = await attempt(endpoint, { id, type: message.type, timestamp: message.createdAt, data: message.data });
      await inPgTransaction(pool, [], async (tx) => {
        await run(tx, insertAttempt({
          id: newId(), webhookId: endpoint.id, messageId: id, type: message.type, cursor: null, attempt: 1, ...result,
          succeeded: result.error === null, nextAttemptAt: null,
        }));
        await run(tx, deleteQueuedMessage(message.id));
        return { value: undefined };
      });
    }
  }

  /** Sends the endpoint's messages while it has some and they succeed. */
  async function work(webhookId: string): Promise<void> {
    for (let sent = 0; sent < MESSAGES_PER_CLAIM && !stopped; sent += 1) {
      dirty.delete(webhookId);
      const [endpoint] = await run<EndpointRow>(sql, selectEndpoint(webhookId));
      if (!endpoint) return;
      await deliverQueued(endpoint);
      if (endpoint.state !== 'active') return;
      let message = endpoint.message;
      if (message === null) {
        message = await nextChange(endpoint);
        if (message === null) {
          await run(sql, idleEndpoint(webhookId, IDLE_RECHECK_SECONDS));
          return;
        }
        await run(sql, startMessage(webhookId, message));
      } else if (!endpoint.due) {
        return;
      }
      const failedBefore = message === endpoint.message ? endpoint.failedAttempts : 0;
      const result = await attempt(endpoint, message);
      const succeeded = result.error === null;
      const failed = failedBefore + 1;
      const delay = succeeded ? undefined : schedule[failed - 1];
      await inPgTransaction(pool, [], async (tx) => {
        const nextAttemptAt = delay === undefined ? null : new Date(Date.now() + delay);
        await run(tx, insertAttempt({
          id: newId(), webhookId, messageId: message.id, type: message.type, cursor: message.cursor, attempt: failed, ...result,
          succeeded, nextAttemptAt,
        }));
        if (succeeded) {
          await run(tx, savePosition(webhookId, message.databaseId, message.position, message.seq));
          await run(tx, finishMessage(webhookId));
        } else if (delay !== undefined) {
          await run(tx, retryMessage(webhookId, failed, delay));
        } else {
          const reason = `Disabled after ${failed} failed attempts of one message; the last: ${result.error}`;
          const [disabled] = await run<{ url: string }>(tx, disableEndpoint(webhookId, failed, reason));
          if (disabled) {
            const host = new URL(disabled.url).host;
            await run(tx, insertDisabledEvent(newId(), endpoint.orgId, endpoint.databaseId,
              `Disabled the webhook to ${host} after ${failed} failed attempts; re-enable it to resume from the first undelivered change`));
          }
        }
        return { value: undefined };
      });
      if (!succeeded) {
        log.info({ webhookId, messageId: message.id, attempt: failed, error: result.error }, 'webhook attempt failed');
        return;
      }
    }
    // The claim's share is spent, or new work arrived meanwhile: look again soon.
    dirty.add(webhookId);
  }

  /** Works on the endpoint if no worker does: the advisory lock lives on a connection held for the whole claim. */
  async function claim(webhookId: string): Promise<void> {
    const client = await pool.connect();
    let locked = false;
    try {
      const [row] = await run<{ locked: boolean }>(pgExecutor(client), tryLockEndpoint(webhookId));
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
      if (locked) await run(pgExecutor(client), unlockEndpoint(webhookId)).catch(() => undefined);
      client.release();
    }
  }

  async function candidates(): Promise<string[]> {
    if (changedDatabases.size > 0) {
      const databases = [...changedDatabases];
      changedDatabases.clear();
      for (const { id } of await run<{ id: string }>(sql, selectFollowers(databases))) dirty.add(id);
    }
    const due = await run<{ id: string }>(sql, selectDueEndpoints(config.WEBHOOK_CONCURRENCY * 4));
    return [...new Set([...dirty, ...due.map((row) => row.id)])].filter((id) => !busy.has(id));
  }

  let lastPrune = 0;
  async function pruneLog(): Promise<void> {
    if (Date.now() - lastPrune < PRUNE_INTERVAL_MS) return;
    lastPrune = Date.now();
    await run(sql, pruneAttempts(new Date(Date.now() - config.CHANGE_RETENTION_DAYS * 86_400_000)));
  }

  const loop = (async () => {
    await listener.connect()
      .then(() => listener.query(`LISTEN ${CHANGES_CHANNEL}`))
      .then(() => listener.query(`LISTEN ${WEBHOOK_NOTIFY_CHANNEL}`))
      .catch((error: unknown) => log.warn({ err: error }, 'webhook notifications unavailable; polling only'));
    listener.on('notification', (message) => {
      if (!message.payload) return;
      if (message.channel === CHANGES_CHANNEL) changedDatabases.add(message.payload);
      else dirty.add(message.payload);
      notify();
    });
    listener.on('error', (error) => log.warn({ err: error }, 'webhook notification connection failed'));
    // Whatever was committed while no worker ran is looked at now, not at the next idle recheck.
    await run<{ id: string }>(sql, selectActiveEndpoints())
      .then((rows) => rows.forEach((row) => dirty.add(row.id)))
      .catch((error: unknown) => log.warn({ err: error }, 'listing webhooks failed'));
    while (!stopped) {
      try {
        await pruneLog();
        for (const id of await candidates()) {
          if (busy.size >= config.WEBHOOK_CONCURRENCY) break;
          busy.add(id);
          const task = claim(id).finally(() => {
            busy.delete(id);
            running.delete(task);
            if (dirty.has(id)) notify();
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
      await listener.end().catch(() => undefined);
    },
  };
}
