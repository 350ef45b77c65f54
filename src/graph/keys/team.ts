import { notFound } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { requireOrg, requirePersonalIdentity } from '../server/guards.ts';
import { requireFreshStrongAuth } from '../server/step-up.ts';
import { builder } from '../server/builder.ts';
import { Id } from '../../kernel/formats.ts';
import { Deletion } from '../shared/deletion.ts';
import { idempotent } from '../../idempotency/run.ts';
import { pageArgs, pageById } from '../server/paged.ts';
import { CreateTeamKeyBody } from '../../contracts/keys.ts';
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

const CreateTeamKeyInput = builder
  .inputType('CreateTeamKeyInput', {
    fields: (t) => ({
      name: t.string({ required: true }),
      access: t.string({ required: true }),
      includeAdmin: t.boolean({ required: false }),
      expiresAt: t.string({ required: false }),
    }),
  })
  .validate(CreateTeamKeyBody);

const adminOf = (orgId: unknown) => ({
  org: { orgId: String(orgId), capability: 'admin' as const },
  oauth: 'team-keys:manage' as const,
});

builder.queryFields((t) => ({
  teamKeys: t.field({
    type: ApiKeyPage,
    description: 'Metadata of the organisation’s team keys, newest first, revoked ones included (admins).',
    args: { orgId: t.arg.id({ required: true, validate: Id }), ...pageArgs },
    authScopes: (_root, { orgId }) => adminOf(orgId),
    resolve: (_root, args, context) => {
      const orgId = String(args.orgId);
      return pageById(context, args, {
        scope: `team-keys:${orgId}`,
        fetch: ({ after: before, limit }) =>
          context.prisma.apiKey.findMany({
            where: { orgId, scope: 'team', ...(before ? { id: { lt: before } } : {}) },
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
  createTeamKey: t.field({
    type: CreatedApiKey,
    description: 'Creates a team key (admins, with a personal credential so that the key has an accountable creator).',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      orgId: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: CreateTeamKeyInput, required: true }),
    },
    authScopes: (_root, { orgId }) => adminOf(orgId),
    resolve: (_root, { idempotencyKey, orgId, input: body }, context) => {
      const target = String(orgId);
      const caller = requirePersonalIdentity(context);
      checkDelegation(caller, requireOrg(context, target), body);
      requireFreshStrongAuth(context);
      return createOnce(
        context,
        { operation: 'createTeamKey', key: idempotencyKey, input: { orgId: target, ...body } },
        (tx) =>
          insertKey(tx, {
            scope: 'team',
            orgId: target,
            userId: null,
            createdByUserId: caller.userId,
            name: body.name,
            access: body.access,
            includeAdmin: body.includeAdmin,
            expiresAt: body.expiresAt,
          }),
      );
    },
  }),
  revokeTeamKey: t.field({
    type: Deletion,
    description: 'Revokes a team key (endpoint 9, admins only).',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      orgId: t.arg.id({ required: true, validate: Id }),
      id: t.arg.id({ required: true, validate: Id }),
    },
    authScopes: (_root, { orgId }) => adminOf(orgId),
    resolve: (_root, { idempotencyKey, orgId, id }, context) => {
      const target = { orgId: String(orgId), id: String(id) };
      return idempotent(context, { operation: 'revokeTeamKey', key: idempotencyKey, input: target }, async (tx) => {
        if (!(await revokeKey(tx, { ...target, scope: 'team' }))) throw notFound('key');
        return { deleted: true, mutationId: newId() };
      });
    },
  }),
}));
