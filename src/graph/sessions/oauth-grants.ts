import { selectGrantPage } from '../../identity/oauth/grants.ts';
import { notFound } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { requireSecurityCredential } from '../server/step-up.ts';
import { builder } from '../server/builder.ts';
import { Id } from '../../kernel/formats.ts';
import { Deletion } from '../shared/deletion.ts';
import { idempotent } from '../../idempotency/run.ts';
import { pageRef } from '../shared/pages.ts';
import { pageArgs, pageById } from '../server/paged.ts';

/**
 * An application the user authorized (`GET/DELETE /v1/me/oauth-grants`): one token family, from the consent
 * through every refresh. `id` is the family id; `scopes` are those of its newest token (a refresh may narrow them).
 */
export type OAuthGrantShape = {
  id: string;
  clientId: string;
  clientName: string;
  scopes: string[];
  createdAt: string;
  lastIssuedAt: string;
};

const OAuthGrant = builder.objectRef<OAuthGrantShape>('OAuthGrant').implement({
  description: 'A live authorization of an OAuth application for the caller. Its tokens are never shown.',
  fields: (t) => ({
    id: t.exposeID('id'),
    clientId: t.exposeID('clientId'),
    clientName: t.exposeString('clientName'),
    scopes: t.exposeStringList('scopes'),
    createdAt: t.field({ type: 'Timestamp', resolve: (grant) => grant.createdAt }),
    lastIssuedAt: t.field({ type: 'Timestamp', resolve: (grant) => grant.lastIssuedAt }),
  }),
});

const OAuthGrantPage = pageRef('OAuthGrantPage', OAuthGrant, 'A page of live OAuth grants, newest first.');

interface GrantRow {
  id: string;
  client_id: string;
  client_name: string;
  scopes: string[];
  created_at: Date;
  last_issued_at: Date;
}

builder.queryFields((t) => ({
  myOAuthGrants: t.withAuth({ personal: true, oauth: 'account:security' }).field({
    type: OAuthGrantPage,
    description: 'The applications the caller authorized that still hold a live token, newest first.',
    args: pageArgs,
    resolve: (_root, args, context) => {
      const userId = context.caller.userId;
      return pageById(context, args, {
        scope: `my-oauth-grants:${userId}`,
        fetch: ({ after, limit }) => {
          // Newest first: without a cursor, start above every id.
          const page = selectGrantPage(userId, after ?? 'ZZZZZZZZZZZZZZZZZZZZZZZZZZ', limit + 1);
          return context.prisma.$queryRawUnsafe<GrantRow[]>(page.sql, ...page.params);
        },
        toItem: (row) => ({
          id: row.id,
          clientId: row.client_id,
          clientName: row.client_name,
          scopes: row.scopes,
          createdAt: row.created_at.toISOString(),
          lastIssuedAt: row.last_issued_at.toISOString(),
        }),
      });
    },
  }),
}));

builder.mutationFields((t) => ({
  revokeMyOAuthGrant: t.withAuth({ personal: true, oauth: 'account:security' }).field({
    type: Deletion,
    description: 'Revokes an application’s grant: every access and refresh token of it at once. Anyone else’s is 404.',
    args: { idempotencyKey: t.arg.string({ required: true }), id: t.arg.id({ required: true, validate: Id }) },
    resolve: async (_root, { idempotencyKey, id }, context) => {
      const familyId = String(id);
      await requireSecurityCredential(context);
      return idempotent(
        context,
        { operation: 'revokeMyOAuthGrant', key: idempotencyKey, input: { id: familyId } },
        async (tx) => {
          const { count } = await tx.oAuthToken.updateMany({
            where: { familyId, userId: context.caller.userId, revokedAt: null, expiresAt: { gt: new Date() } },
            data: { revokedAt: new Date() },
          });
          if (count === 0) throw notFound('grant');
          return { deleted: true, mutationId: newId() };
        },
      );
    },
  }),
}));
