import { notFound } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { requireOrg } from '../server/guards.ts';
import { requireFreshStrongAuth } from '../server/step-up.ts';
import { builder } from '../server/builder.ts';
import { Id } from '../../kernel/formats.ts';
import { Deletion } from '../shared/deletion.ts';
import { idempotent } from '../../idempotency/run.ts';
import { pageArgs, pageById } from '../server/paged.ts';
import { CreatePersonalKeyBody } from '../../contracts/keys.ts';
import {
  ApiKeyPage,
  checkDelegation,
  CreatedApiKey,
  createOnce,
  insertKey,
  keySelect,
  revokeKey,
  toKeyShape,
} from './shape.ts';

const CreatePersonalKeyInput = builder
  .inputType('CreatePersonalKeyInput', {
    fields: (t) => ({
      name: t.string({ required: true }),
      orgId: t.id({ required: true }),
      access: t.string({ required: true }),
      includeAdmin: t.boolean({ required: false }),
      expiresAt: t.string({ required: false }),
    }),
  })
  .validate(CreatePersonalKeyBody);

builder.queryFields((t) => ({
  myKeys: t.withAuth({ personal: true, oauth: 'keys:manage' }).field({
    type: ApiKeyPage,
    description: 'Metadata of the caller’s personal keys, newest first, revoked ones included (endpoint 13).',
    args: pageArgs,
    resolve: (_root, args, context) => {
      const userId = context.caller.userId;
      return pageById(context, args, {
        scope: `my-keys:${userId}`,
        fetch: ({ after: before, limit }) =>
          context.prisma.apiKey.findMany({
            where: { userId, scope: 'personal', ...(before ? { id: { lt: before } } : {}) },
            orderBy: { id: 'desc' },
            take: limit + 1,
            select: keySelect,
          }),
        toItem: toKeyShape,
      });
    },
  }),
}));

builder.mutationFields((t) => ({
  createMyKey: t.withAuth({ personal: true, oauth: 'keys:manage' }).field({
    type: CreatedApiKey,
    description: 'Creates a personal key. Asking for more than your current authority is DELEGATION_EXCEEDS_AUTHORITY.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      input: t.arg({ type: CreatePersonalKeyInput, required: true }),
    },
    resolve: (_root, { idempotencyKey, input: body }, context) => {
      const authority = requireOrg(context, body.orgId);
      checkDelegation(context.caller, authority, body);
      requireFreshStrongAuth(context);
      const userId = context.caller.userId;
      return createOnce(context, { operation: 'createMyKey', key: idempotencyKey, input: body }, (tx) =>
        insertKey(tx, {
          scope: 'personal',
          orgId: body.orgId,
          userId,
          createdByUserId: userId,
          name: body.name,
          access: body.access,
          includeAdmin: body.includeAdmin,
          expiresAt: body.expiresAt,
        }),
      );
    },
  }),
  revokeMyKey: t.withAuth({ personal: true, oauth: 'keys:manage' }).field({
    type: Deletion,
    description: 'Revokes one of the caller’s personal keys; it fails from the next request on.',
    args: { idempotencyKey: t.arg.string({ required: true }), id: t.arg.id({ required: true, validate: Id }) },
    resolve: (_root, { idempotencyKey, id }, context) => {
      const target = String(id);
      return idempotent(
        context,
        { operation: 'revokeMyKey', key: idempotencyKey, input: { id: target } },
        async (tx) => {
          if (!(await revokeKey(tx, { id: target, scope: 'personal', userId: context.caller.userId })))
            throw notFound('key');
          return { deleted: true, mutationId: newId() };
        },
      );
    },
  }),
}));
