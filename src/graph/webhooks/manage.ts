import { decodeChangeCursor, invalidChangeCursor } from '../../catalog/changes.ts';
import { lookup } from 'node:dns/promises';
import { RateLimiterRes } from 'rate-limiter-flexible';
import { destinationRules, literalAddress, resolvedProblems, urlProblems } from '../../catalog/webhook-destinations.ts';
import {
  configuredSealingKey,
  newSigningSecret,
  openSecret,
  sealingKey,
  sealSecret,
} from '../../catalog/webhook-secrets.ts';
import {
  activateWebhook,
  countOrgWebhooks,
  deleteWebhook,
  disableWebhook,
  forgetUnfollowedPositions,
  insertStartPositions,
  insertWebhook,
  insertWebhookMessage,
  lockOrgWebhooks,
  notifyWebhooks,
  restartDelivery,
  rewindWebhook,
  rotateWebhookSecret,
  selectOrgDatabase,
  selectSealedSecret,
  selectTablesOfDatabase,
  selectWebhook,
  updateWebhookSettings,
  type WebhookRow,
} from '../../catalog/webhooks.ts';
import type { TransactionClient } from '../../db/prisma.ts';
import { prismaExecutor } from '../../db/sql.ts';
import { DomainError, notFound, validationFailed, type FieldProblem } from '../../kernel/errors.ts';
import { storedVersion } from '../../kernel/formats.ts';
import { newId } from '../../kernel/ids.ts';
import { MAX_WEBHOOKS_PER_ORG, type CreateWebhook, type UpdateWebhook } from '../../contracts/webhooks.ts';
import { recordActivity } from '../../catalog/activity.ts';
import { requireCaller } from '../server/guards.ts';
import type { Context } from '../server/context.ts';
import { versionConflict } from '../databases/database-changes.ts';
import { requireDatabase } from '../tables/tables.ts';

/**
 * What a webhook admin can do (issue 27): the rules behind every webhook field, shared by REST and GraphQL. The
 * secret leaves only in the answers of create and rotate-secret; activity entries name the URL's host, never its
 * path or query (which some receivers use to carry a token).
 */

/** How long a rotated-out secret keeps signing beside the new one. */
export const PREVIOUS_SECRET_GRACE_SECONDS = 24 * 60 * 60;

/**
 * How long a creation waits for the URL's name to resolve. getaddrinfo answers from a cache or a local resolver in
 * well under a millisecond, a remote resolver in tens; past 2 s the name is taken as not resolving (accepted: the
 * connect-time check in src/jobs/webhooks/send.ts still refuses whatever it later resolves to).
 */
const CREATION_LOOKUP_MS = 2_000;

/** Every address the name resolves to, as the worker's connect would look it up; empty when it does not resolve. */
async function addressesOf(hostname: string): Promise<string[]> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<[]>((resolve) => {
    timer = setTimeout(() => resolve([]), CREATION_LOOKUP_MS);
  });
  const resolved = lookup(hostname, { all: true }).then(
    (answers) => answers.map((answer) => answer.address),
    () => [],
  );
  try {
    return await Promise.race([resolved, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Outside the request's transaction: a key created on first use must survive the request's rollback. */
function keyOf(context: Context): Promise<Buffer> {
  return sealingKey(
    context.prisma,
    prismaExecutor(context.prisma),
    configuredSealingKey(context.config.WEBHOOK_SECRET_KEY),
  );
}

function hostOf(url: string): string {
  return new URL(url).host;
}

/**
 * The URL as the worker would connect to it (issue 46): an address it names, and every address a name resolves to
 * now, must be allowed, so that `https://localhost/` is refused here as `https://127.0.0.1/` is, not only at
 * delivery. The worker checks again at each connect: what a name resolves to can change.
 */
async function checkUrl(context: Context, url: string): Promise<void> {
  const rules = destinationRules(context.config);
  let problems = urlProblems(url, rules);
  const parsed = problems.length === 0 ? new URL(url) : null;
  if (parsed && literalAddress(parsed) === null) {
    problems = resolvedProblems(parsed, await addressesOf(parsed.hostname), rules);
  }
  if (problems.length > 0) {
    throw validationFailed(
      problems.map((message) => ({ path: ['url'], message })),
      'The webhook URL is not allowed.',
    );
  }
}

/** The database must be the org's (404 otherwise); its tables must be named by id. tableIds need a database. */
async function checkScope(
  tx: TransactionClient,
  orgId: string,
  databaseId: string | null,
  tableIds: string[],
): Promise<void> {
  if (databaseId === null) {
    if (tableIds.length > 0) throw validationFailed([{ path: ['tableIds'], message: 'needs a databaseId' }]);
    return;
  }
  await requireDatabase(tx, orgId, databaseId);
  if (tableIds.length === 0) return;
  const found = new Set(
    (await prismaExecutor(tx).run<{ id: string }>(selectTablesOfDatabase(databaseId, tableIds))).map((row) => row.id),
  );
  const problems: FieldProblem[] = tableIds.flatMap((id, index) =>
    found.has(id) ? [] : [{ path: ['tableIds', index], message: 'is not a table of the database' }],
  );
  if (problems.length > 0) throw validationFailed(problems);
}

export async function createWebhook(
  tx: TransactionClient,
  context: Context,
  orgId: string,
  body: CreateWebhook,
): Promise<{ value: WebhookRow; secret: string }> {
  await checkUrl(context, body.url);
  const tableIds = body.tableIds ?? [];
  const databaseId = body.databaseId ?? null;
  await checkScope(tx, orgId, databaseId, tableIds);
  await prismaExecutor(tx).run(lockOrgWebhooks(orgId));
  const [{ count } = { count: 0 }] = await prismaExecutor(tx).run<{ count: number }>(countOrgWebhooks(orgId));
  if (count >= MAX_WEBHOOKS_PER_ORG) {
    throw new DomainError('CAPACITY_LIMIT', `An organisation may have at most ${MAX_WEBHOOKS_PER_ORG} webhooks.`, {
      details: { limit: MAX_WEBHOOKS_PER_ORG },
    });
  }
  const id = newId();
  const secret = newSigningSecret();
  const [row] = await prismaExecutor(tx).run<WebhookRow>(
    insertWebhook({
      id,
      orgId,
      url: body.url,
      description: body.description ?? '',
      events: body.events,
      databaseId,
      tableIds,
      batchMaxChanges: body.batch?.maxChanges ?? null,
      secretSealed: sealSecret(await keyOf(context), id, secret),
    }),
  );
  await insertStartPositions(prismaExecutor(tx), id, orgId, databaseId);
  await prismaExecutor(tx).run(notifyWebhooks(id));
  await recordActivity(tx, requireCaller(context), {
    orgId,
    category: 'webhooks',
    event: 'webhook.create',
    summary: `Created a webhook to ${hostOf(body.url)}`,
    ...(databaseId ? { databaseId } : {}),
  });
  return { value: row!, secret };
}

/** The webhook, locked for the transaction and checked against the caller's version. */
async function lockWebhook(
  tx: TransactionClient,
  orgId: string,
  id: string,
  expectedVersion: string,
): Promise<WebhookRow> {
  const [row] = await prismaExecutor(tx).run<WebhookRow>(selectWebhook(orgId, id, true));
  if (!row) throw notFound('webhook');
  const expected = storedVersion(expectedVersion);
  if (expected === null || row.version !== expected.toString())
    throw versionConflict('webhook', expectedVersion, BigInt(row.version));
  return row;
}

export async function getWebhook(tx: TransactionClient, orgId: string, id: string): Promise<WebhookRow> {
  const [row] = await prismaExecutor(tx).run<WebhookRow>(selectWebhook(orgId, id));
  if (!row) throw notFound('webhook');
  return row;
}

export async function updateWebhook(
  tx: TransactionClient,
  context: Context,
  orgId: string,
  id: string,
  body: UpdateWebhook,
): Promise<WebhookRow> {
  const before = await lockWebhook(tx, orgId, id, body.expectedVersion);
  if (body.url !== undefined) await checkUrl(context, body.url);
  const databaseId = body.databaseId === undefined ? before.databaseId : body.databaseId;
  const tableIds =
    body.tableIds ?? (body.databaseId !== undefined && body.databaseId !== before.databaseId ? [] : before.tableIds);
  if (body.databaseId !== undefined || body.tableIds !== undefined) await checkScope(tx, orgId, databaseId, tableIds);
  let row: WebhookRow | undefined = before;
  const settings = {
    url: body.url,
    description: body.description,
    events: body.events,
    databaseId: body.databaseId,
    tableIds: body.tableIds,
    batchMaxChanges: body.batch === undefined ? undefined : (body.batch?.maxChanges ?? null),
  };
  const scopeChanged = body.databaseId !== undefined && body.databaseId !== before.databaseId;
  if (Object.values(settings).some((value) => value !== undefined)) {
    [row] = await prismaExecutor(tx).run<WebhookRow>(
      updateWebhookSettings(id, { ...settings, tableIds: scopeChanged ? tableIds : body.tableIds }),
    );
  }
  // A database the endpoint newly follows starts at its head, as a new endpoint would; one it stops following
  // forgets its place, so that following it again later starts at that moment's head too.
  if (scopeChanged) {
    await prismaExecutor(tx).run(forgetUnfollowedPositions(id, databaseId));
    await insertStartPositions(prismaExecutor(tx), id, orgId, databaseId);
    await prismaExecutor(tx).run(restartDelivery(id));
  }
  const caller = requireCaller(context);
  if (body.state === 'active' && before.state === 'disabled') {
    [row] = await prismaExecutor(tx).run<WebhookRow>(activateWebhook(id));
    await recordActivity(tx, caller, {
      orgId,
      category: 'webhooks',
      event: 'webhook.enable',
      summary: `Re-enabled the webhook to ${hostOf(row!.url)}`,
    });
  } else if (body.state === 'disabled' && before.state === 'active') {
    [row] = await prismaExecutor(tx).run<WebhookRow>(disableWebhook(id, 'Disabled by an administrator'));
    await recordActivity(tx, caller, {
      orgId,
      category: 'webhooks',
      event: 'webhook.disable',
      summary: `Disabled the webhook to ${hostOf(row!.url)}`,
    });
  }
  if (row !== before || settings.url !== undefined) {
    await recordActivity(tx, caller, {
      orgId,
      category: 'webhooks',
      event: 'webhook.update',
      summary: `Updated the webhook to ${hostOf(row!.url)}`,
    });
  }
  // A re-enabled endpoint is looked at now; one being delivered to stops before its next message and goes on with
  // the new settings (URL, events, scope, batches) or, disabled, stops.
  if (row !== before) await prismaExecutor(tx).run(notifyWebhooks(id));
  return row!;
}

export async function removeWebhook(
  tx: TransactionClient,
  context: Context,
  orgId: string,
  id: string,
  expectedVersion: string,
): Promise<void> {
  const row = await lockWebhook(tx, orgId, id, expectedVersion);
  await prismaExecutor(tx).run(deleteWebhook(id));
  // A deliverer sending to it stops before its next message.
  await prismaExecutor(tx).run(notifyWebhooks(id));
  await recordActivity(tx, requireCaller(context), {
    orgId,
    category: 'webhooks',
    event: 'webhook.delete',
    summary: `Deleted the webhook to ${hostOf(row.url)}`,
  });
}

export async function rotateSecret(
  tx: TransactionClient,
  context: Context,
  orgId: string,
  id: string,
): Promise<{ value: WebhookRow; secret: string }> {
  const [current] = await prismaExecutor(tx).run<WebhookRow>(selectWebhook(orgId, id, true));
  if (!current) throw notFound('webhook');
  const key = await keyOf(context);
  const [{ secretSealed } = { secretSealed: '' }] = await prismaExecutor(tx).run<{ secretSealed: string }>(
    selectSealedSecret(id),
  );
  const secret = newSigningSecret();
  // Re-sealed, not copied: the old secret is opened and sealed again so a key rotation needs no second pass.
  const previous = sealSecret(key, id, openSecret(key, id, secretSealed));
  const [row] = await prismaExecutor(tx).run<WebhookRow>(
    rotateWebhookSecret(id, sealSecret(key, id, secret), previous, PREVIOUS_SECRET_GRACE_SECONDS),
  );
  // A deliverer sending to it signs its next message with both secrets, not only the old one.
  await prismaExecutor(tx).run(notifyWebhooks(id));
  await recordActivity(tx, requireCaller(context), {
    orgId,
    category: 'webhooks',
    event: 'webhook.rotate_secret',
    summary: `Rotated the signing secret of the webhook to ${hostOf(current.url)}; the old one signs too for 24 hours`,
  });
  return { value: row!, secret };
}

/**
 * Test and replay are bounded per org (issue 48): each queues a message or sends the retained feed again, so an
 * unbounded caller could keep the worker and the org's receivers busy. Counted once the request reaches its effect,
 * so a repeated Idempotency-Key answers its recorded outcome without spending anything; the 429 says when to come
 * back, and so is not recorded as the key's outcome.
 */
async function countWebhookAction(context: Context, orgId: string): Promise<void> {
  if (!context.webhookActions) return;
  try {
    await context.webhookActions.consume(orgId);
  } catch (rejection) {
    if (!(rejection instanceof RateLimiterRes)) throw rejection;
    const max = context.config.WEBHOOK_ACTIONS_PER_MINUTE;
    throw new DomainError('RATE_LIMITED', `At most ${max} webhook tests and replays per minute in an organisation.`, {
      details: { limit: 'webhook-actions', scope: 'org', max },
      retryAfter: Math.ceil(rejection.msBeforeNext / 1000),
    });
  }
}

/** A `webhook.test` message, delivered once (no retries) before the endpoint's next change, even while disabled. */
export async function queueTestMessage(
  tx: TransactionClient,
  context: Context,
  orgId: string,
  id: string,
): Promise<{ webhookId: string; messageId: string }> {
  await getWebhook(tx, orgId, id);
  await countWebhookAction(context, orgId);
  const messageId = newId();
  await prismaExecutor(tx).run(
    insertWebhookMessage(messageId, id, 'webhook.test', {
      webhookId: id,
      message: 'A test message from Workspace Data Service.',
    }),
  );
  await prismaExecutor(tx).run(notifyWebhooks(id));
  return { webhookId: id, messageId: `msg_${messageId}` };
}

/** The database a feed cursor names (the feed's cursors are bound to one database). */
function databaseOfCursor(cursor: string): string {
  const text = /^[A-Za-z0-9_-]{1,200}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('latin1') : '';
  const databaseId = text.split('.')[1];
  if (!databaseId) throw invalidChangeCursor();
  return databaseId;
}

/**
 * Delivers again every matching change after `after` (in its database), or every retained one. Positions only move
 * back, so changes not yet delivered stay due; a cursor of a database the webhook does not follow is 400.
 */
export async function replayWebhook(
  tx: TransactionClient,
  context: Context,
  orgId: string,
  id: string,
  after: string | undefined,
): Promise<{ webhookId: string; after: string | null }> {
  const webhook = await getWebhook(tx, orgId, id);
  await countWebhookAction(context, orgId);
  let target: { databaseId: string; position: string; seq: string } | null = null;
  if (after !== undefined) {
    const databaseId = databaseOfCursor(after);
    const { position, seq } = decodeChangeCursor(databaseId, after);
    const [database] = await prismaExecutor(tx).run(selectOrgDatabase(orgId, databaseId));
    if (!database || (webhook.databaseId !== null && webhook.databaseId !== databaseId)) throw invalidChangeCursor();
    target = { databaseId, position: position.toString(), seq: seq.toString() };
  }
  await prismaExecutor(tx).run(rewindWebhook(id, target));
  await prismaExecutor(tx).run(restartDelivery(id));
  await prismaExecutor(tx).run(notifyWebhooks(id));
  await recordActivity(tx, requireCaller(context), {
    orgId,
    category: 'webhooks',
    event: 'webhook.replay',
    summary: `Replaying ${after === undefined ? 'every retained change' : 'changes after a cursor'} to ${hostOf(webhook.url)}`,
  });
  return { webhookId: id, after: after ?? null };
}
