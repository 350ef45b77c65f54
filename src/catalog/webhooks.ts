import type { SqlExecutor } from '../db/sql.ts';
import type { Statement } from '../data/statement.ts';
import { readHead, type FeedPosition } from './changes.ts';
import { utcTimestamp } from '../data/statement.ts';

/**
 * The webhook catalog's SQL (issue 27) as named statements, for the resolvers (src/graph/webhooks) and the
 * deliverer (src/jobs/webhooks). Reads for the API never select the sealed secrets.
 */
export interface WebhookRow {
  id: string;
  orgId: string;
  url: string;
  description: string;
  events: string[];
  databaseId: string | null;
  tableIds: string[];
  batch: { maxChanges: number } | null;
  state: 'active' | 'disabled';
  version: string;
  createdAt: string;
  updatedAt: string;
  disabledAt: string | null;
  disabledReason: string | null;
  previousSecretExpiresAt: string | null;
}

const PUBLIC_COLUMNS = `id, org_id AS "orgId", url, description, events, database_id AS "databaseId",
  table_ids::text[] AS "tableIds",
  CASE WHEN batch_max_changes IS NOT NULL THEN jsonb_build_object('maxChanges', batch_max_changes) END AS batch,
  state, version::text AS version, ${utcTimestamp('created_at')} AS "createdAt",
  ${utcTimestamp('updated_at')} AS "updatedAt", ${utcTimestamp('disabled_at')} AS "disabledAt",
  disabled_reason AS "disabledReason",
  CASE WHEN previous_secret_expires_at > now() THEN ${utcTimestamp('previous_secret_expires_at')} END AS "previousSecretExpiresAt"`;

/** Serialises creations in one org, so that the 25-webhook cap cannot be overrun by concurrent requests. */
export function lockOrgWebhooks(orgId: string): Statement {
  return {
    sql: `SELECT pg_advisory_xact_lock(hashtextextended('webhooks:' || $1::text, 0))::text AS locked`,
    params: [orgId],
  };
}

export function countOrgWebhooks(orgId: string): Statement {
  return { sql: 'SELECT count(*)::int AS count FROM webhooks WHERE org_id = $1::bpchar', params: [orgId] };
}

export interface NewWebhook {
  id: string;
  orgId: string;
  url: string;
  description: string;
  events: string[];
  databaseId: string | null;
  tableIds: string[];
  batchMaxChanges: number | null;
  secretSealed: string;
}

export function insertWebhook(webhook: NewWebhook): Statement {
  return {
    sql: `INSERT INTO webhooks (id, org_id, url, description, events, database_id, table_ids, secret_sealed,
            batch_max_changes)
          VALUES ($1::bpchar, $2::bpchar, $3, $4, $5::text[], $6::bpchar, $7::bpchar[], $8, $9::int)
          RETURNING ${PUBLIC_COLUMNS}`,
    params: [
      webhook.id,
      webhook.orgId,
      webhook.url,
      webhook.description,
      webhook.events,
      webhook.databaseId,
      webhook.tableIds,
      webhook.secretSealed,
      webhook.batchMaxChanges,
    ],
  };
}

/** The databases of the org an endpoint follows (all of them, or the one it names) that have no place yet. */
export function selectUnplacedDatabases(webhookId: string, orgId: string, databaseId: string | null): Statement {
  return {
    sql: `SELECT d.id FROM databases d
           WHERE d.org_id = $2::bpchar AND ($3::bpchar IS NULL OR d.id = $3::bpchar)
             AND NOT EXISTS (SELECT 1 FROM webhook_positions p WHERE p.webhook_id = $1::bpchar AND p.database_id = d.id)
           ORDER BY d.id`,
    params: [webhookId, orgId, databaseId],
  };
}

export function insertStartPosition(webhookId: string, databaseId: string, at: FeedPosition): Statement {
  return {
    sql: `INSERT INTO webhook_positions (webhook_id, database_id, position, seq) VALUES ($1::bpchar, $2::bpchar, $3::bigint, $4::bigint)
          ON CONFLICT (webhook_id, database_id) DO NOTHING`,
    params: [webhookId, databaseId, at.position.toString(), at.seq.toString()],
  };
}

/**
 * A new endpoint starts at the head of every feed it follows: it delivers what commits after it was created. A
 * database created later has no row and is followed from its first change. Each feed lives in its database's
 * schema, so the heads are read one database at a time (`readHead` sequences what committed before).
 */
export async function insertStartPositions(
  sql: SqlExecutor,
  webhookId: string,
  orgId: string,
  databaseId: string | null,
): Promise<void> {
  const databases = selectUnplacedDatabases(webhookId, orgId, databaseId);
  for (const { id } of await sql.query<{ id: string }>(databases.sql, databases.params)) {
    const start = insertStartPosition(webhookId, id, await readHead(sql, id));
    await sql.query(start.sql, start.params);
  }
}

/** Drops the places in databases outside a narrowed scope (`databaseId` null: every database stays followed). */
export function forgetUnfollowedPositions(webhookId: string, databaseId: string | null): Statement {
  return {
    sql: 'DELETE FROM webhook_positions WHERE webhook_id = $1::bpchar AND $2::bpchar IS NOT NULL AND database_id <> $2::bpchar',
    params: [webhookId, databaseId],
  };
}

export function selectWebhook(orgId: string, id: string, lock = false): Statement {
  return {
    sql: `SELECT ${PUBLIC_COLUMNS} FROM webhooks WHERE org_id = $1::bpchar AND id = $2::bpchar${lock ? ' FOR UPDATE' : ''}`,
    params: [orgId, id],
  };
}

/** One page, oldest first (creation order is how an admin reads a short list); `after` is the last id seen. */
export function selectWebhookPage(orgId: string, after: string | null, limit: number): Statement {
  return {
    sql: `SELECT ${PUBLIC_COLUMNS} FROM webhooks WHERE org_id = $1::bpchar AND ($2::bpchar IS NULL OR id > $2::bpchar)
          ORDER BY id LIMIT $3`,
    params: [orgId, after, limit + 1],
  };
}

export interface WebhookChanges {
  url?: string | undefined;
  description?: string | undefined;
  events?: string[] | undefined;
  databaseId?: string | null | undefined;
  tableIds?: string[] | undefined;
  /** Null: one change per message. */
  batchMaxChanges?: number | null | undefined;
}

/** Settings changed, version bumped. A changed scope keeps the endpoint's positions: it resumes where it stood. */
export function updateWebhookSettings(id: string, changes: WebhookChanges): Statement {
  return {
    sql: `UPDATE webhooks SET url = coalesce($2, url), description = coalesce($3, description),
            events = coalesce($4::text[], events),
            database_id = CASE WHEN $5::boolean THEN $6::bpchar ELSE database_id END,
            table_ids = coalesce($7::bpchar[], table_ids),
            batch_max_changes = CASE WHEN $8::boolean THEN $9::int ELSE batch_max_changes END,
            version = version + 1, updated_at = now()
          WHERE id = $1::bpchar RETURNING ${PUBLIC_COLUMNS}`,
    params: [
      id,
      changes.url ?? null,
      changes.description ?? null,
      changes.events ?? null,
      changes.databaseId !== undefined,
      changes.databaseId ?? null,
      changes.tableIds ?? null,
      changes.batchMaxChanges !== undefined,
      changes.batchMaxChanges ?? null,
    ],
  };
}

/** Resumes a disabled endpoint at once, from the message it was stuck on (same webhook-id), with a fresh schedule. */
export function activateWebhook(id: string): Statement {
  return {
    sql: `UPDATE webhooks SET state = 'active', disabled_at = NULL, disabled_reason = NULL, failed_attempts = 0,
            next_attempt_at = now(), version = version + 1, updated_at = now()
          WHERE id = $1::bpchar RETURNING ${PUBLIC_COLUMNS}`,
    params: [id],
  };
}

export function disableWebhook(id: string, reason: string): Statement {
  return {
    sql: `UPDATE webhooks SET state = 'disabled', disabled_at = now(), disabled_reason = $2, version = version + 1,
            updated_at = now()
          WHERE id = $1::bpchar RETURNING ${PUBLIC_COLUMNS}`,
    params: [id, reason],
  };
}

export function deleteWebhook(id: string): Statement {
  return { sql: 'DELETE FROM webhooks WHERE id = $1::bpchar RETURNING id', params: [id] };
}

/** The old secret keeps signing beside the new one until `graceSeconds` from now. */
export function rotateWebhookSecret(
  id: string,
  secretSealed: string,
  previousSealed: string,
  graceSeconds: number,
): Statement {
  return {
    sql: `UPDATE webhooks SET secret_sealed = $2, previous_secret_sealed = $3,
            previous_secret_expires_at = now() + make_interval(secs => $4), version = version + 1, updated_at = now()
          WHERE id = $1::bpchar RETURNING ${PUBLIC_COLUMNS}`,
    params: [id, secretSealed, previousSealed, graceSeconds],
  };
}

export function selectSealedSecret(id: string): Statement {
  return { sql: 'SELECT secret_sealed AS "secretSealed" FROM webhooks WHERE id = $1::bpchar', params: [id] };
}

export function insertWebhookMessage(id: string, webhookId: string, type: string, data: unknown): Statement {
  return {
    sql: 'INSERT INTO webhook_messages (id, webhook_id, type, data) VALUES ($1::bpchar, $2::bpchar, $3, $4::jsonb)',
    params: [id, webhookId, type, JSON.stringify(data)],
  };
}

/**
 * Replay: every position moves back to the start of the retained feed, or to `after` in its database (never
 * forward: changes not yet delivered stay due). The message in flight, if any, is still delivered first.
 */
export function rewindWebhook(
  webhookId: string,
  after: { databaseId: string; position: string; seq: string } | null,
): Statement {
  if (after === null) {
    return {
      sql: 'UPDATE webhook_positions SET position = 0, seq = 0 WHERE webhook_id = $1::bpchar',
      params: [webhookId],
    };
  }
  return {
    sql: `INSERT INTO webhook_positions (webhook_id, database_id, position, seq) VALUES ($1::bpchar, $2::bpchar, $3::bigint, $4::bigint)
          ON CONFLICT (webhook_id, database_id) DO UPDATE SET
            position = CASE WHEN (EXCLUDED.position, EXCLUDED.seq) < (webhook_positions.position, webhook_positions.seq)
                            THEN EXCLUDED.position ELSE webhook_positions.position END,
            seq = CASE WHEN (EXCLUDED.position, EXCLUDED.seq) < (webhook_positions.position, webhook_positions.seq)
                       THEN EXCLUDED.seq ELSE webhook_positions.seq END`,
    params: [webhookId, after.databaseId, after.position, after.seq],
  };
}

/**
 * The positions were moved by hand (replay, a changed scope): the message in flight is dropped (a replay sends it
 * again if it falls in the replayed range) and a deliverer still working from the old positions writes nothing.
 */
export function restartDelivery(webhookId: string): Statement {
  return {
    sql: `UPDATE webhooks SET message = NULL, failed_attempts = 0, next_attempt_at = now(), generation = generation + 1
          WHERE id = $1::bpchar`,
    params: [webhookId],
  };
}

/** Wakes the workers' deliverers (src/jobs/webhooks): an endpoint has something new to send. */
export const WEBHOOK_NOTIFY_CHANNEL = 'wds_webhooks';

export function notifyWebhooks(webhookId: string): Statement {
  return { sql: 'SELECT pg_notify($1, $2)::text AS notified', params: [WEBHOOK_NOTIFY_CHANNEL, webhookId] };
}

export interface AttemptRow {
  id: string;
  messageId: string;
  type: string;
  cursor: string | null;
  changes: number;
  attempt: number;
  succeeded: boolean;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  responseBody: string | null;
  attemptedAt: string;
  nextAttemptAt: string | null;
}

/** Attempts newest first; `before` is the last id of the previous page. */
export function selectAttemptPage(webhookId: string, before: string | null, limit: number): Statement {
  return {
    sql: `SELECT id, message_id AS "messageId", type, cursor, changes, attempt, succeeded, status_code AS "statusCode",
            duration_ms AS "durationMs", error, response_body AS "responseBody",
            ${utcTimestamp('attempted_at')} AS "attemptedAt", ${utcTimestamp('next_attempt_at')} AS "nextAttemptAt"
          FROM webhook_attempts WHERE webhook_id = $1::bpchar AND ($2::bpchar IS NULL OR id < $2::bpchar)
          ORDER BY id DESC LIMIT $3`,
    params: [webhookId, before, limit + 1],
  };
}

/** Which of `tableIds` are tables of the database (trashed ones included: they may be restored). */
export function selectTablesOfDatabase(databaseId: string, tableIds: readonly string[]): Statement {
  return {
    sql: 'SELECT id FROM data_tables WHERE database_id = $1::bpchar AND id = ANY($2::bpchar[])',
    params: [databaseId, tableIds],
  };
}

/** The org's database, whatever its state (a webhook may follow a database that is in the trash). */
export function selectOrgDatabase(orgId: string, databaseId: string): Statement {
  return { sql: 'SELECT id FROM databases WHERE org_id = $1::bpchar AND id = $2::bpchar', params: [orgId, databaseId] };
}
