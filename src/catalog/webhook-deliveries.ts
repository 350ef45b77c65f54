import type { Statement } from '../data/statement.ts';
import { insertActivity } from '../data/activity.ts';

/**
 * The deliverer's SQL (issue 27, src/jobs/webhooks): an endpoint's delivery state, its followed feeds, its queued
 * test messages and its attempt log. Every write happens while the worker holds the endpoint's advisory lock.
 */

/** A batch's body stays within this many bytes, however many changes its endpoint allows (a larger change goes alone). */
export const MAX_BATCH_BYTES = 1_048_576;

/** Session-level, so no transaction stays open during the HTTP call; released by PostgreSQL if the worker dies. */
const LOCK_CLASS = 27_027;

export function tryLockEndpoint(webhookId: string): Statement {
  return { sql: 'SELECT pg_try_advisory_lock($1::int, hashtext($2::text)) AS locked', params: [LOCK_CLASS, webhookId] };
}

export function unlockEndpoint(webhookId: string): Statement {
  return { sql: 'SELECT pg_advisory_unlock($1::int, hashtext($2::text)) AS unlocked', params: [LOCK_CLASS, webhookId] };
}

/**
 * The message in flight: kept until answered 2xx, so every attempt sends the same id and body. A batch (`type`
 * `changes`) is placed at its last change: `cursor`, `position` and `seq` are that change's.
 */
export interface InFlightMessage {
  id: string;
  type: string;
  /** ISO timestamp of the message (the body's `timestamp`). */
  timestamp: string;
  data: unknown;
  databaseId: string;
  cursor: string;
  position: string;
  seq: string;
}

export interface EndpointRow {
  id: string;
  orgId: string;
  url: string;
  events: string[];
  databaseId: string | null;
  tableIds: string[];
  /** Null: one change per message. */
  batchMaxChanges: number | null;
  state: 'active' | 'disabled';
  secretSealed: string;
  previousSecretSealed: string | null;
  message: InFlightMessage | null;
  failedAttempts: number;
  due: boolean;
  version: string;
  generation: number;
  hasQueued: boolean;
}

export function selectEndpoint(webhookId: string): Statement {
  return {
    sql: `SELECT id, org_id AS "orgId", url, events, database_id AS "databaseId", table_ids::text[] AS "tableIds", state,
            batch_max_changes AS "batchMaxChanges", secret_sealed AS "secretSealed",
            CASE WHEN previous_secret_expires_at > now() THEN previous_secret_sealed END AS "previousSecretSealed",
            message, failed_attempts AS "failedAttempts", next_attempt_at <= now() AS due, version::text AS version, generation,
            EXISTS (SELECT 1 FROM webhook_messages m WHERE m.webhook_id = webhooks.id) AS "hasQueued"
          FROM webhooks WHERE id = $1::bpchar`,
    params: [webhookId],
  };
}

/** The endpoint's settings version and state now: a claim checks them before its first send. */
export function selectEndpointVersion(webhookId: string): Statement {
  return {
    sql: `SELECT version::text AS version, state FROM webhooks WHERE id = $1::bpchar`,
    params: [webhookId],
  };
}

/**
 * Endpoints with something to do now, and their orgs: due (a retry, or an idle endpoint's periodic look at its feeds)
 * or holding a queued test message. Each org's first before any org's second, and so on, and by how long they have
 * waited among those: the `limit` rows are shared between the orgs with due endpoints (issue 48), where oldest first
 * let a few orgs' endpoints (up to 25 each, their busy ones too: a claim keeps its endpoint due while it sends) fill
 * them and left another org's endpoint to a later scan.
 */
export function selectDueEndpoints(limit: number): Statement {
  return {
    sql: `SELECT id, "orgId" FROM (
            SELECT w.id, w.org_id AS "orgId", w.next_attempt_at,
                   row_number() OVER (PARTITION BY w.org_id ORDER BY w.next_attempt_at) AS turn
              FROM webhooks w
             WHERE (w.state = 'active' AND w.next_attempt_at <= now())
                OR EXISTS (SELECT 1 FROM webhook_messages m WHERE m.webhook_id = w.id)
          ) due
          ORDER BY turn, next_attempt_at LIMIT $1`,
    params: [limit],
  };
}

/** The active endpoints that follow a database's feed: the ones a change in it may concern. */
export function selectFollowers(databaseIds: readonly string[]): Statement {
  return {
    sql: `SELECT w.id, w.org_id AS "orgId", d.id AS "databaseId" FROM webhooks w JOIN databases d ON d.org_id = w.org_id
           WHERE d.id = ANY($1::bpchar[]) AND w.state = 'active' AND (w.database_id IS NULL OR w.database_id = d.id)`,
    params: [databaseIds],
  };
}

export function selectActiveEndpoints(): Statement {
  return { sql: `SELECT id, org_id AS "orgId" FROM webhooks WHERE state = 'active'`, params: [] };
}

/** The orgs of endpoints named by a notification (an id without a row: the endpoint was deleted). */
export function selectEndpointOrgs(webhookIds: readonly string[]): Statement {
  return {
    sql: `SELECT id, org_id AS "orgId" FROM webhooks WHERE id = ANY($1::bpchar[])`,
    params: [webhookIds],
  };
}

/** Every feed the endpoint follows and where it stands in it (no position: from the feed's oldest retained change). */
export function selectFollowedFeeds(webhookId: string, orgId: string, databaseId: string | null): Statement {
  return {
    sql: `SELECT d.id AS "databaseId", p.position::text AS position, p.seq::text AS seq
            FROM databases d LEFT JOIN webhook_positions p ON p.webhook_id = $1::bpchar AND p.database_id = d.id
           WHERE d.org_id = $2::bpchar AND ($3::bpchar IS NULL OR d.id = $3::bpchar)
           ORDER BY d.id`,
    params: [webhookId, orgId, databaseId],
  };
}

/** Where a delivered message leaves the endpoint in its database's feed. */
export interface DeliveredPlace {
  databaseId: string;
  position: string;
  seq: string;
}

/**
 * The deliveries made since the last save, in one statement (one round trip, one commit): their attempts logged,
 * each database's place moved past its last delivered message, the message kept for a retry (if any) dropped — or
 * replaced by `sending`, a batch about to be sent — and the next look set: now, or after `idleSeconds` when every
 * feed was read to its end. Positions move only while the generation is the one the deliverer read (a replay or a
 * changed scope moves it), attempts are logged either way.
 * Answers the endpoint's version and state (nulls when the generation moved or the endpoint is gone), so that a
 * deliverer notices a change of its settings made meanwhile. Its transaction commits without waiting for the WAL
 * flush (`synchronous_commit` off for it alone): a PostgreSQL crash that loses the last saves only means their
 * messages are sent again, with the same ids. A save that holds a batch to send waits for the flush: the batch is
 * sent once it is committed, and a crash must not let its id go out again with other changes.
 */
export function saveProgress(
  webhookId: string,
  generation: number,
  attempts: readonly AttemptRecord[],
  places: readonly DeliveredPlace[],
  idleSeconds: number | null,
  sending: InFlightMessage | null = null,
): Statement {
  return {
    sql: `WITH async AS (
            SELECT set_config('synchronous_commit',
                              CASE WHEN $6::json IS NULL THEN 'off' ELSE current_setting('synchronous_commit') END, true)
          ),
          current AS (
            UPDATE webhooks SET message = $6::json, failed_attempts = 0,
                   next_attempt_at = now() + make_interval(secs => coalesce($5::double precision, 0))
             WHERE id = $1::bpchar AND generation = $2
            RETURNING id, version::text AS version, state
          ), logged AS (${insertAttempts('$3')}),
          moved AS (
            INSERT INTO webhook_positions (webhook_id, database_id, position, seq)
            SELECT current.id, p.database_id, p.position, p.seq
              FROM current, jsonb_to_recordset($4::jsonb) AS p(database_id bpchar, position bigint, seq bigint)
            ON CONFLICT (webhook_id, database_id) DO UPDATE SET position = EXCLUDED.position, seq = EXCLUDED.seq
          )
          SELECT current.version, current.state FROM async LEFT JOIN current ON true`,
    params: [
      webhookId,
      generation,
      attemptsJson(attempts),
      JSON.stringify(
        places.map((place) => ({ database_id: place.databaseId, position: place.position, seq: place.seq })),
      ),
      idleSeconds,
      sending === null ? null : JSON.stringify(sending),
    ],
  };
}

/** A failed attempt: the message is kept (unless the positions were moved meanwhile) and tried again after `delayMs`. */
export function retryMessage(
  webhookId: string,
  generation: number,
  message: InFlightMessage,
  failedAttempts: number,
  delayMs: number,
): Statement {
  return {
    sql: `UPDATE webhooks SET message = $3::json, failed_attempts = $4,
            next_attempt_at = now() + make_interval(secs => $5::double precision / 1000)
          WHERE id = $1::bpchar AND generation = $2`,
    params: [webhookId, generation, JSON.stringify(message), failedAttempts, delayMs],
  };
}

/** The last retry failed: the endpoint stops, keeping its message and positions for `PATCH {state: "active"}`. */
export function disableEndpoint(
  webhookId: string,
  generation: number,
  message: InFlightMessage,
  failedAttempts: number,
  reason: string,
): Statement {
  return {
    sql: `UPDATE webhooks SET state = 'disabled', failed_attempts = $2, disabled_at = now(), disabled_reason = $3,
            version = version + 1, updated_at = now(),
            message = CASE WHEN generation = $4 THEN $5::json ELSE message END
          WHERE id = $1::bpchar AND state = 'active' RETURNING url`,
    params: [webhookId, failedAttempts, reason.slice(0, 500), generation, JSON.stringify(message)],
  };
}

/** The deliverer acts for no caller: its entries name the system. */
const DELIVERY_ACTOR = { id: '00000000000000000000000000', kind: 'system', key: null, name: 'Webhook delivery' };

export function insertDisabledEvent(id: string, orgId: string, databaseId: string | null, summary: string): Statement {
  return insertActivity({
    id,
    orgId,
    category: 'webhooks',
    event: 'webhook.disable',
    summary,
    actor: DELIVERY_ACTOR,
    databaseId,
  });
}

export interface QueuedMessage {
  id: string;
  type: string;
  data: unknown;
  createdAt: string;
}

export function selectQueuedMessages(webhookId: string, limit: number): Statement {
  return {
    sql: `SELECT id, type, data, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt"
            FROM webhook_messages WHERE webhook_id = $1::bpchar ORDER BY id LIMIT $2`,
    params: [webhookId, limit],
  };
}

export function deleteQueuedMessage(id: string): Statement {
  return { sql: 'DELETE FROM webhook_messages WHERE id = $1::bpchar', params: [id] };
}

export interface AttemptRecord {
  id: string;
  webhookId: string;
  messageId: string;
  type: string;
  cursor: string | null;
  /** Changes the message carried: 1, a batch's count, 0 for a test message. */
  changes: number;
  attempt: number;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  responseBody: string | null;
  succeeded: boolean;
  nextAttemptAt: Date | null;
  /** When the attempt began (a saved batch of attempts is committed after the last of them). */
  attemptedAt: Date;
}

const ATTEMPT_COLUMNS = `id bpchar, webhook_id bpchar, message_id text, type text, cursor text, changes int, attempt int,
  status_code int, duration_ms int, error text, response_body text, succeeded boolean, next_attempt_at timestamptz,
  attempted_at timestamptz`;

/** The attempts as the JSON rows `insertAttempts` reads (`jsonb_to_recordset`, columns named as the table's). */
function attemptsJson(records: readonly AttemptRecord[]): string {
  return JSON.stringify(
    records.map((record) => ({
      id: record.id,
      webhook_id: record.webhookId,
      message_id: record.messageId,
      type: record.type,
      cursor: record.cursor,
      changes: record.changes,
      attempt: record.attempt,
      status_code: record.statusCode,
      duration_ms: record.durationMs,
      error: record.error?.slice(0, 500) ?? null,
      response_body: record.responseBody,
      succeeded: record.succeeded,
      next_attempt_at: record.nextAttemptAt?.toISOString() ?? null,
      attempted_at: record.attemptedAt.toISOString(),
    })),
  );
}

/** An INSERT of the attempts in the JSON parameter `param` (see attemptsJson). */
function insertAttempts(param: string): string {
  return `INSERT INTO webhook_attempts (id, webhook_id, message_id, type, cursor, changes, attempt, status_code,
            duration_ms, error, response_body, succeeded, next_attempt_at, attempted_at)
          SELECT a.id, a.webhook_id, a.message_id, a.type, a.cursor, a.changes, a.attempt, a.status_code, a.duration_ms,
                 a.error, a.response_body, a.succeeded, a.next_attempt_at, a.attempted_at
            FROM jsonb_to_recordset(${param}::jsonb) AS a(${ATTEMPT_COLUMNS})`;
}

export function insertAttempt(record: AttemptRecord): Statement {
  return {
    sql: insertAttempts('$1'),
    params: [attemptsJson([record])],
  };
}

/** The attempt log is kept as long as the feed it reports on. */
export function pruneAttempts(before: Date): Statement {
  return { sql: 'DELETE FROM webhook_attempts WHERE attempted_at < $1::timestamptz', params: [before.toISOString()] };
}
