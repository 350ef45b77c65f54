import { z } from 'zod';
import { CHANGE_KINDS } from '../catalog/changes.ts';
import { MAX_WEBHOOK_URL_LENGTH } from '../catalog/webhook-destinations.ts';
import { Id, Timestamp, VersionString } from '../kernel/formats.ts';
import { ChangeResponse } from './changes.ts';

/**
 * Webhooks (issue 27): every body, query and response of the domain. REST validates with them, the GraphQL inputs
 * carry them, and the OpenAPI document is generated from them. Which URLs may be reached depends on the operator's
 * settings, so that rule is checked by the domain (src/graph/webhooks), not here.
 */

/** The change kinds of the feed a webhook can subscribe to; `*` alone means all of them. */
export const WEBHOOK_EVENT_KINDS = [
  'row.created',
  'row.updated',
  'row.deleted',
  'row.restored',
  'schema.changed',
  'table.created',
  'table.renamed',
  'table.trashed',
  'table.restored',
] as const;

/** At most this many webhooks per org (issue 27): each is a delivery loop the workers keep turning. */
export const MAX_WEBHOOKS_PER_ORG = 25;
export const MAX_WEBHOOK_TABLES = 100;
/**
 * A batching endpoint's largest message, in changes (its body is also kept within 1 MiB: MAX_BATCH_BYTES in
 * src/catalog/webhook-deliveries.ts).
 */
export const MAX_WEBHOOK_BATCH_CHANGES = 1_000;

export const WebhookEvents = z
  .array(z.enum([...WEBHOOK_EVENT_KINDS, '*']))
  .min(1)
  .max(WEBHOOK_EVENT_KINDS.length)
  .refine((events) => !events.includes('*') || events.length === 1, 'must be ["*"] or a list of change kinds')
  .refine((events) => new Set(events).size === events.length, 'must not repeat a kind');

const Url = z.string().min(1).max(MAX_WEBHOOK_URL_LENGTH);
const Description = z.string().max(500);
/**
 * Opt-in batches (docs/decisions/webhooks.md, "Batches"): up to `maxChanges` changes of one feed per message, body
 * `{type: "changes", timestamp, data: {changes: [Change, …]}}`. Absent or null: one change per message.
 */
export const WebhookBatch = z.strictObject({
  maxChanges: z.number().int().min(1).max(MAX_WEBHOOK_BATCH_CHANGES),
});
const TableIds = z
  .array(Id)
  .max(MAX_WEBHOOK_TABLES)
  .refine((ids) => new Set(ids).size === ids.length, 'must not repeat a table');

export const CreateWebhookBody = z.strictObject({
  url: Url,
  description: Description.optional(),
  events: WebhookEvents,
  databaseId: Id.nullish(),
  tableIds: TableIds.optional(),
  batch: WebhookBatch.nullish(),
});

export const UpdateWebhookBody = z.strictObject({
  expectedVersion: VersionString,
  url: Url.optional(),
  description: Description.optional(),
  events: WebhookEvents.optional(),
  databaseId: Id.nullish(),
  tableIds: TableIds.optional(),
  /** Null: one change per message again (from the next message on). */
  batch: WebhookBatch.nullish(),
  /** `active` resumes a disabled endpoint from its first undelivered change; `disabled` pauses it. */
  state: z.enum(['active', 'disabled']).optional(),
});

/**
 * `updateWebhook(input:)`: GraphQL has no "absent", so there a null member leaves the setting as it is, except
 * `databaseId`, where null means every database, and `batch`, where null means one change per message (as in the
 * PATCH body). The resolver receives the PATCH body.
 */
export const UpdateWebhookArgument = UpdateWebhookBody.extend({
  url: UpdateWebhookBody.shape.url.nullish(),
  description: UpdateWebhookBody.shape.description.nullish(),
  events: UpdateWebhookBody.shape.events.nullish(),
  tableIds: UpdateWebhookBody.shape.tableIds.nullish(),
  state: UpdateWebhookBody.shape.state.nullish(),
}).transform(
  (input) =>
    Object.fromEntries(
      Object.entries(input).filter(([key, value]) => value !== null || key === 'databaseId' || key === 'batch'),
    ) as z.output<typeof UpdateWebhookBody>,
);

export const DeleteWebhookBody = z.strictObject({ expectedVersion: VersionString });

/** A feed cursor of `GET …/changes`: replay every matching change after it (all retained ones without it). */
export const ReplayWebhookBody = z.strictObject({ after: z.string().min(1).max(512).optional() });
/** `replayWebhook(input:)`: a null `after` is the same as none. */
export const ReplayWebhookArgument = ReplayWebhookBody.extend({ after: ReplayWebhookBody.shape.after.nullish() });

export const WebhookResponse = z.strictObject({
  id: Id,
  orgId: Id,
  url: z.string(),
  description: z.string(),
  events: z.array(z.string()),
  databaseId: Id.nullable(),
  tableIds: z.array(Id),
  batch: WebhookBatch.nullable(),
  state: z.enum(['active', 'disabled']),
  version: VersionString,
  createdAt: Timestamp,
  updatedAt: Timestamp,
  disabledAt: Timestamp.nullable(),
  disabledReason: z.string().nullable(),
  /** While a rotated-out secret still signs beside the new one: until when. */
  previousSecretExpiresAt: Timestamp.nullable(),
});

/** Create and rotate-secret: the webhook and its new secret, shown in this answer only (`Cache-Control: no-store`). */
export const WebhookWithSecretResponse = WebhookResponse.extend({
  secret: z
    .string()
    .regex(/^whsec_[A-Za-z0-9+/]{43}=$/)
    .nullable(),
});

export const WebhookAttemptResponse = z.strictObject({
  id: Id,
  messageId: z.string(),
  type: z.string(),
  cursor: z.string().nullable(),
  /** Changes the message carried: 1, a batch's count (up to its `batch.maxChanges`), 0 for a test message. */
  changes: z.number().int().min(0).max(MAX_WEBHOOK_BATCH_CHANGES),
  attempt: z.number().int().min(1),
  succeeded: z.boolean(),
  statusCode: z.number().int().nullable(),
  durationMs: z.number().int().min(0),
  error: z.string().nullable(),
  /** At most 4 KiB of what the endpoint answered. */
  responseBody: z.string().nullable(),
  attemptedAt: Timestamp,
  /** When this message is tried again; null when it succeeded, was the last try, or was a test. */
  nextAttemptAt: Timestamp.nullable(),
});

export const WebhookMessageQueued = z.strictObject({ webhookId: Id, messageId: z.string() });
export const WebhookReplayResponse = z.strictObject({ webhookId: Id, after: z.string().nullable() });

/**
 * What a receiver is sent (the OpenAPI document's `webhooks`; src/jobs/webhooks builds them, the delivery tests hold
 * every message they receive to these): one change, as `GET …/changes` answers it, with `timestamp` its `committedAt`…
 */
export const WebhookChangeMessage = z.strictObject({
  type: z.enum(CHANGE_KINDS),
  timestamp: Timestamp,
  data: ChangeResponse,
});

/** …a batch of changes of one feed, in feed order, to an endpoint with `batch` (`timestamp`: the last one's)… */
export const WebhookBatchMessage = z.strictObject({
  type: z.literal('changes'),
  timestamp: Timestamp,
  data: z.strictObject({ changes: z.array(ChangeResponse).min(1).max(MAX_WEBHOOK_BATCH_CHANGES) }),
});

/** …or the message `POST …/webhooks/{id}/test` queues (`timestamp`: when it was queued). */
export const WebhookTestMessage = z.strictObject({
  type: z.literal('webhook.test'),
  timestamp: Timestamp,
  data: z.strictObject({ webhookId: Id, message: z.string() }),
});

export type CreateWebhook = z.infer<typeof CreateWebhookBody>;
export type UpdateWebhook = z.infer<typeof UpdateWebhookBody>;
export type Webhook = z.infer<typeof WebhookResponse>;
export type WebhookAttempt = z.infer<typeof WebhookAttemptResponse>;
