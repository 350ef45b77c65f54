import { selectAttemptPage, selectWebhookPage, type AttemptRow, type WebhookRow } from '../../catalog/webhooks.ts';
import {
  CreateWebhookBody,
  DeleteWebhookBody,
  ReplayWebhookArgument,
  UpdateWebhookArgument,
  WEBHOOK_EVENT_KINDS,
} from '../../contracts/webhooks.ts';
import { Id } from '../../kernel/formats.ts';
import { newId } from '../../kernel/ids.ts';
import { builder } from '../server/builder.ts';
import { Deletion } from '../shared/deletion.ts';
import { idempotent } from '../../idempotency/run.ts';
import { idempotentWithSecret } from '../server/one-time-secret.ts';
import { pageRef } from '../shared/pages.ts';
import { pageArgs, pageById } from '../server/paged.ts';
import {
  createWebhook,
  getWebhook,
  queueTestMessage,
  removeWebhook,
  replayWebhook,
  rotateSecret,
  updateWebhook,
} from './manage.ts';

/** Webhooks (issue 27): Pothos types and fields only; the rules are in ./manage.ts. Admins of the org only. */

const webhookFields = (t: any) => ({
  id: t.exposeID('id'),
  orgId: t.exposeID('orgId'),
  url: t.exposeString('url'),
  description: t.exposeString('description'),
  events: t.exposeStringList('events', {
    description: `Change kinds delivered (${WEBHOOK_EVENT_KINDS.join(', ')}), or ["*"].`,
  }),
  databaseId: t.exposeID('databaseId', {
    nullable: true,
    description: 'Only this database’s changes; null: every database of the org.',
  }),
  tableIds: t.exposeIDList('tableIds', { description: 'Only these tables’ changes; empty: every table.' }),
  batch: t.field({
    type: WebhookBatch,
    nullable: true,
    description: 'Several changes per message (`type: "changes"`); null: one change per message.',
    resolve: (row: WebhookRow) => row.batch,
  }),
  state: t.exposeString('state', {
    description: '`active`, or `disabled` (by an admin, or after the last retry failed).',
  }),
  version: t.exposeString('version'),
  createdAt: t.field({ type: 'Timestamp', resolve: (row: WebhookRow) => row.createdAt }),
  updatedAt: t.field({ type: 'Timestamp', resolve: (row: WebhookRow) => row.updatedAt }),
  disabledAt: t.field({ type: 'Timestamp', nullable: true, resolve: (row: WebhookRow) => row.disabledAt }),
  disabledReason: t.exposeString('disabledReason', { nullable: true }),
  previousSecretExpiresAt: t.field({
    type: 'Timestamp',
    nullable: true,
    description: 'Until when a rotated-out secret still signs beside the new one.',
    resolve: (row: WebhookRow) => row.previousSecretExpiresAt,
  }),
});

const WebhookBatch = builder.objectRef<{ maxChanges: number }>('WebhookBatch').implement({
  description:
    'Batched delivery: each message carries up to `maxChanges` changes of one feed, in feed order (and at most 1 MiB).',
  fields: (t) => ({ maxChanges: t.exposeInt('maxChanges') }),
});
const WebhookBatchInput = builder.inputType('WebhookBatchInput', {
  fields: (t) => ({ maxChanges: t.int({ required: true }) }),
});

const Webhook = builder.objectRef<WebhookRow>('Webhook').implement({
  description: 'An endpoint that receives the org’s changes as Standard Webhooks messages. Its secret is never listed.',
  fields: (t) => webhookFields(t),
});

type WebhookWithSecretShape = WebhookRow & { secret: string | null };
const WebhookWithSecret = builder.objectRef<WebhookWithSecretShape>('WebhookWithSecret').implement({
  description: 'A webhook with its new signing secret: in this answer only (a replay of the request answers null).',
  fields: (t) => ({
    ...webhookFields(t),
    secret: t.exposeString('secret', { nullable: true, description: '`whsec_` + base64 of 32 random bytes.' }),
  }),
});

const WebhookAttempt = builder.objectRef<AttemptRow>('WebhookAttempt').implement({
  description: 'One delivery attempt of one message.',
  fields: (t) => ({
    id: t.exposeID('id'),
    messageId: t.exposeString('messageId', {
      description: 'The webhook-id header: the same on every attempt of a message.',
    }),
    type: t.exposeString('type'),
    cursor: t.exposeString('cursor', {
      nullable: true,
      description: 'The change’s feed cursor (a batch: its last change’s; null for a test).',
    }),
    changes: t.exposeInt('changes', {
      description: 'Changes the message carried: 1, a batch’s count, 0 for a test message.',
    }),
    attempt: t.exposeInt('attempt'),
    succeeded: t.exposeBoolean('succeeded'),
    statusCode: t.exposeInt('statusCode', { nullable: true }),
    durationMs: t.exposeInt('durationMs'),
    error: t.exposeString('error', { nullable: true }),
    responseBody: t.exposeString('responseBody', {
      nullable: true,
      description: 'At most 4 KiB of the answer’s body.',
    }),
    attemptedAt: t.field({ type: 'Timestamp', resolve: (row) => row.attemptedAt }),
    nextAttemptAt: t.field({ type: 'Timestamp', nullable: true, resolve: (row) => row.nextAttemptAt }),
  }),
});

const WebhookMessageQueued = builder
  .objectRef<{ webhookId: string; messageId: string }>('WebhookMessageQueued')
  .implement({
    fields: (t) => ({ webhookId: t.exposeID('webhookId'), messageId: t.exposeString('messageId') }),
  });
const WebhookReplay = builder.objectRef<{ webhookId: string; after: string | null }>('WebhookReplay').implement({
  fields: (t) => ({ webhookId: t.exposeID('webhookId'), after: t.exposeString('after', { nullable: true }) }),
});

const WebhookPage = pageRef('WebhookPage', Webhook, 'A page of webhooks, oldest first.');
const WebhookAttemptPage = pageRef('WebhookAttemptPage', WebhookAttempt, 'A page of delivery attempts, newest first.');

const CreateWebhookInput = builder
  .inputType('CreateWebhookInput', {
    fields: (t) => ({
      url: t.string({ required: true }),
      description: t.string(),
      events: t.stringList({ required: true }),
      databaseId: t.id(),
      tableIds: t.idList(),
      batch: t.field({ type: WebhookBatchInput }),
    }),
  })
  .validate(CreateWebhookBody);
const UpdateWebhookInput = builder
  .inputType('UpdateWebhookInput', {
    fields: (t) => ({
      expectedVersion: t.string({ required: true }),
      url: t.string(),
      description: t.string(),
      events: t.stringList(),
      databaseId: t.id(),
      tableIds: t.idList(),
      batch: t.field({
        type: WebhookBatchInput,
        description: 'Null: one change per message again; absent: unchanged.',
      }),
      state: t.string(),
    }),
  })
  .validate(UpdateWebhookArgument);
const DeleteWebhookInput = builder
  .inputType('DeleteWebhookInput', { fields: (t) => ({ expectedVersion: t.string({ required: true }) }) })
  .validate(DeleteWebhookBody);
const ReplayWebhookInput = builder
  .inputType('ReplayWebhookInput', { fields: (t) => ({ after: t.string() }) })
  .validate(ReplayWebhookArgument);

const adminOf = (orgId: unknown) => ({
  org: { orgId: String(orgId), capability: 'admin' as const },
  oauth: 'org:manage' as const,
});

/**
 * Creating, changing, testing and replaying an endpoint also need the scope to read rows (issue 48): its receiver
 * gets the org's rows (a replay: every retained change), so a token that may manage the org but not read its rows
 * must not read them through a receiver it points at. The role needs nothing more: every admin may read.
 */
const adminWhoReadsRows = (orgId: unknown) => ({ ...adminOf(orgId), $all: { oauth: 'rows:read' as const } });

const webhookArgs = builder.args((t) => ({
  orgId: t.id({ required: true, validate: Id }),
  id: t.id({ required: true, validate: Id }),
}));

builder.queryFields((t) => ({
  webhooks: t.field({
    type: WebhookPage,
    description: 'The org’s webhooks, oldest first (admins). Never their secrets.',
    args: { orgId: t.arg.id({ required: true, validate: Id }), ...pageArgs },
    authScopes: (_root, { orgId }) => adminOf(orgId),
    resolve: (_root, args, context) => {
      const orgId = String(args.orgId);
      return pageById(context, args, {
        scope: `webhooks:${orgId}`,
        fetch: ({ after, limit }) => {
          const statement = selectWebhookPage(orgId, after ?? null, limit);
          return context.prisma.$queryRawUnsafe<WebhookRow[]>(statement.sql, ...statement.params);
        },
        toItem: (row) => row,
      });
    },
  }),
  webhook: t.field({
    type: Webhook,
    description: 'One webhook (admins).',
    args: webhookArgs,
    authScopes: (_root, { orgId }) => adminOf(orgId),
    resolve: (_root, args, context) => getWebhook(context.prisma, String(args.orgId), String(args.id)),
  }),
  webhookDeliveries: t.field({
    type: WebhookAttemptPage,
    description: 'A webhook’s delivery attempts, newest first: status code, duration, error and next attempt of each.',
    args: { ...webhookArgs, ...pageArgs },
    authScopes: (_root, { orgId }) => adminOf(orgId),
    resolve: async (_root, args, context) => {
      const id = String(args.id);
      await getWebhook(context.prisma, String(args.orgId), id);
      return pageById(context, args, {
        scope: `webhook-deliveries:${id}`,
        fetch: ({ after, limit }) => {
          const statement = selectAttemptPage(id, after ?? null, limit);
          return context.prisma.$queryRawUnsafe<AttemptRow[]>(statement.sql, ...statement.params);
        },
        toItem: (row) => row,
      });
    },
  }),
}));

builder.mutationFields((t) => ({
  createWebhook: t.field({
    type: WebhookWithSecret,
    description:
      'Creates a webhook (admins). It delivers the changes committed from now on; the secret is in this answer only.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      orgId: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: CreateWebhookInput, required: true }),
    },
    authScopes: (_root, { orgId }) => adminWhoReadsRows(orgId),
    resolve: async (_root, { idempotencyKey, orgId, input: body }, context) => {
      const target = String(orgId);
      const { value, secret } = await idempotentWithSecret(
        context,
        { operation: 'createWebhook', key: idempotencyKey, input: { orgId: target, ...body } },
        (tx) => createWebhook(tx, context, target, body) as never,
      );
      return { ...(value as unknown as WebhookRow), secret };
    },
  }),
  updateWebhook: t.field({
    type: Webhook,
    description:
      'Changes a webhook still at `expectedVersion`; `state: "active"` resumes a disabled one from its first undelivered change.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...webhookArgs,
      input: t.arg({ type: UpdateWebhookInput, required: true }),
    },
    authScopes: (_root, { orgId }) => adminWhoReadsRows(orgId),
    resolve: (_root, { idempotencyKey, orgId, id, input: body }, context) => {
      const target = { orgId: String(orgId), id: String(id) };
      return idempotent(
        context,
        { operation: 'updateWebhook', key: idempotencyKey, input: { ...target, ...body } },
        async (tx) => (await updateWebhook(tx, context, target.orgId, target.id, body)) as never,
      ) as Promise<WebhookRow>;
    },
  }),
  deleteWebhook: t.field({
    type: Deletion,
    description:
      'Deletes a webhook still at `expectedVersion`, with its delivery log; a message in flight is not retried.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...webhookArgs,
      input: t.arg({ type: DeleteWebhookInput, required: true }),
    },
    authScopes: (_root, { orgId }) => adminOf(orgId),
    resolve: (_root, { idempotencyKey, orgId, id, input }, context) => {
      const target = { orgId: String(orgId), id: String(id) };
      return idempotent(
        context,
        { operation: 'deleteWebhook', key: idempotencyKey, input: { ...target, ...input } },
        async (tx) => {
          await removeWebhook(tx, context, target.orgId, target.id, input.expectedVersion);
          return { deleted: true, mutationId: newId() };
        },
      );
    },
  }),
  rotateWebhookSecret: t.field({
    type: WebhookWithSecret,
    description: 'Issues a new signing secret (in this answer only); the old one keeps signing beside it for 24 hours.',
    args: { idempotencyKey: t.arg.string({ required: true }), ...webhookArgs },
    authScopes: (_root, { orgId }) => adminOf(orgId),
    resolve: async (_root, { idempotencyKey, orgId, id }, context) => {
      const target = { orgId: String(orgId), id: String(id) };
      const { value, secret } = await idempotentWithSecret(
        context,
        { operation: 'rotateWebhookSecret', key: idempotencyKey, input: target },
        (tx) => rotateSecret(tx, context, target.orgId, target.id) as never,
      );
      return { ...(value as unknown as WebhookRow), secret };
    },
  }),
  testWebhook: t.field({
    type: WebhookMessageQueued,
    description:
      'Queues a `webhook.test` message, delivered once before the webhook’s next change (even while disabled).',
    args: { idempotencyKey: t.arg.string({ required: true }), ...webhookArgs },
    authScopes: (_root, { orgId }) => adminWhoReadsRows(orgId),
    resolve: (_root, { idempotencyKey, orgId, id }, context) => {
      const target = { orgId: String(orgId), id: String(id) };
      return idempotent(context, { operation: 'testWebhook', key: idempotencyKey, input: target }, (tx) =>
        queueTestMessage(tx, context, target.orgId, target.id),
      );
    },
  }),
  replayWebhook: t.field({
    type: WebhookReplay,
    description:
      'Delivers again every matching change after `after` (a feed cursor), or every retained one, in feed order.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...webhookArgs,
      input: t.arg({ type: ReplayWebhookInput, required: true }),
    },
    authScopes: (_root, { orgId }) => adminWhoReadsRows(orgId),
    resolve: (_root, { idempotencyKey, orgId, id, input }, context) => {
      const target = { orgId: String(orgId), id: String(id) };
      const after = input.after ?? undefined;
      return idempotent(
        context,
        { operation: 'replayWebhook', key: idempotencyKey, input: { ...target, after } },
        (tx) => replayWebhook(tx, context, target.orgId, target.id, after),
      );
    },
  }),
}));
