import { DomainError, notFound } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { clearFailures, countAttempt } from '../../identity/attempts.ts';
import { requireSecurityCredential } from '../server/step-up.ts';
import { consumeTotp, newTotpSecret, totpUri } from '../../identity/totp.ts';
import { builder } from '../server/builder.ts';
import { Id } from '../../kernel/formats.ts';
import { Deletion } from '../shared/deletion.ts';
import { idempotent } from '../../idempotency/run.ts';
import { idempotentWithSecret } from '../server/one-time-secret.ts';
import { pageRef } from '../shared/pages.ts';
import { pageArgs, pageById } from '../server/paged.ts';
import { ConfirmTwoFactorBody } from '../../contracts/sessions.ts';

/** A browser session of the caller (spec 2.16 leaves the record open). `current` marks the one making the request. */
export type SessionShape = {
  id: string;
  current: boolean;
  userAgent: string | null;
  createdAt: string;
  lastSeenAt: string;
  expiresAt: string;
};

const Session = builder.objectRef<SessionShape>('Session').implement({
  description: 'A live browser session of the caller. Its token and CSRF token are never shown again.',
  fields: (t) => ({
    id: t.exposeID('id'),
    current: t.exposeBoolean('current'),
    userAgent: t.exposeString('userAgent', { nullable: true }),
    createdAt: t.field({ type: 'Timestamp', resolve: (session) => session.createdAt }),
    lastSeenAt: t.field({ type: 'Timestamp', resolve: (session) => session.lastSeenAt }),
    expiresAt: t.field({ type: 'Timestamp', resolve: (session) => session.expiresAt }),
  }),
});

const SessionPage = pageRef('SessionPage', Session, 'A page of live sessions, newest first.');

type EnrolmentShape = { id: string; secret: string | null; otpauthUri: string | null };

const TwoFactorEnrolment = builder.objectRef<EnrolmentShape>('TwoFactorEnrolment').implement({
  description: 'A TOTP secret to add to an authenticator app; confirm it with a code to turn two-factor on.',
  fields: (t) => ({
    secret: t.exposeString('secret', { nullable: true }),
    otpauthUri: t.exposeString('otpauthUri', { nullable: true }),
  }),
});

const TwoFactorStatus = builder.objectRef<{ twoFactorEnabled: boolean }>('TwoFactorStatus').implement({
  fields: (t) => ({ twoFactorEnabled: t.exposeBoolean('twoFactorEnabled') }),
});

const ConfirmTwoFactorInput = builder
  .inputType('ConfirmTwoFactorInput', { fields: (t) => ({ code: t.string({ required: true }) }) })
  .validate(ConfirmTwoFactorBody);

builder.queryFields((t) => ({
  mySessions: t.withAuth({ personal: true, oauth: 'account:security' }).field({
    type: SessionPage,
    description: 'The caller’s live browser sessions, newest first.',
    args: pageArgs,
    resolve: (_root, args, context) => {
      const userId = context.caller.userId;
      const current = context.caller.credential.type === 'session' ? context.caller.credential.id : null;
      return pageById(context, args, {
        scope: `my-sessions:${userId}`,
        fetch: ({ after: before, limit }) =>
          context.prisma.session.findMany({
            where: {
              userId,
              revokedAt: null,
              expiresAt: { gt: new Date() },
              ...(before ? { id: { lt: before } } : {}),
            },
            orderBy: { id: 'desc' },
            take: limit + 1,
            select: { id: true, userAgent: true, createdAt: true, lastSeenAt: true, expiresAt: true },
          }),
        toItem: (row) => ({
          id: row.id,
          current: row.id === current,
          userAgent: row.userAgent,
          createdAt: row.createdAt.toISOString(),
          lastSeenAt: row.lastSeenAt.toISOString(),
          expiresAt: row.expiresAt.toISOString(),
        }),
      });
    },
  }),
}));

builder.mutationFields((t) => ({
  revokeMySession: t.withAuth({ personal: true, oauth: 'account:security' }).field({
    type: Deletion,
    description: 'Revokes one of the caller’s sessions (endpoint 10; signing out). Anyone else’s session is 404.',
    args: { idempotencyKey: t.arg.string({ required: true }), id: t.arg.id({ required: true, validate: Id }) },
    resolve: async (_root, { idempotencyKey, id }, context) => {
      const target = String(id);
      // Signing out of the session in use is always allowed; ending another one is a security setting.
      const current = context.caller.credential.type === 'session' && context.caller.credential.id === target;
      if (!current) await requireSecurityCredential(context);
      return idempotent(
        context,
        { operation: 'revokeMySession', key: idempotencyKey, input: { id: target } },
        async (tx) => {
          const { count } = await tx.session.updateMany({
            where: { id: target, userId: context.caller.userId, revokedAt: null, expiresAt: { gt: new Date() } },
            data: { revokedAt: new Date() },
          });
          if (count === 0) throw notFound('session');
          return { deleted: true, mutationId: newId() };
        },
      );
    },
  }),
  startTwoFactorEnrolment: t.withAuth({ personal: true, oauth: 'account:security' }).field({
    type: TwoFactorEnrolment,
    description: 'Creates a new TOTP secret (shown once). Two-factor turns on when a code confirms it.',
    args: { idempotencyKey: t.arg.string({ required: true }) },
    resolve: async (_root, { idempotencyKey }, context) => {
      await requireSecurityCredential(context);
      const userId = context.caller.userId;
      let email = '';
      const { value, secret } = await idempotentWithSecret(
        context,
        { operation: 'startTwoFactorEnrolment', key: idempotencyKey, input: {} },
        async (tx) => {
          const user = await tx.user.findUniqueOrThrow({
            where: { id: userId },
            select: { email: true, twoFactorEnabled: true },
          });
          if (user.twoFactorEnabled)
            throw new DomainError('TWO_FACTOR_ENABLED', 'Two-factor authentication is already on.');
          email = user.email;
          const totpSecret = newTotpSecret();
          await tx.user.update({ where: { id: userId }, data: { totpSecret, totpLastStep: null } });
          return { value: { id: userId, secret: null, otpauthUri: null }, secret: totpSecret };
        },
      );
      return secret === null ? value : { id: value.id, secret, otpauthUri: totpUri(secret, email) };
    },
  }),
  confirmTwoFactor: t.withAuth({ personal: true, oauth: 'account:security' }).field({
    type: TwoFactorStatus,
    description: 'Turns two-factor on with a current code from the enrolled authenticator.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      input: t.arg({ type: ConfirmTwoFactorInput, required: true }),
    },
    resolve: async (_root, { idempotencyKey, input: body }, context) => {
      await requireSecurityCredential(context);
      const userId = context.caller.userId;
      // Counted outside the transaction (a refusal rolls it back) and against the login lockout.
      await countAttempt(context.prisma, context.config, userId);
      return idempotent(context, { operation: 'confirmTwoFactor', key: idempotencyKey, input: body }, async (tx) => {
        const user = await tx.user.findUniqueOrThrow({
          where: { id: userId },
          select: { totpSecret: true, twoFactorEnabled: true },
        });
        if (user.twoFactorEnabled)
          throw new DomainError('TWO_FACTOR_ENABLED', 'Two-factor authentication is already on.');
        if (!user.totpSecret || !(await consumeTotp(tx, userId, user.totpSecret, body.code))) {
          throw new DomainError('VALIDATION_FAILED', 'The code does not match the enrolled secret.', {
            details: { problems: [{ path: ['code'], message: 'does not match' }] },
          });
        }
        await tx.user.update({ where: { id: userId }, data: { twoFactorEnabled: true } });
        await clearFailures(tx, userId);
        return { twoFactorEnabled: true };
      });
    },
  }),
  disableTwoFactor: t.withAuth({ personal: true, oauth: 'account:security' }).field({
    type: TwoFactorStatus,
    description: 'Turns two-factor off with a current code (and, from a browser session, a recent step-up).',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      input: t.arg({ type: ConfirmTwoFactorInput, required: true }),
    },
    resolve: async (_root, { idempotencyKey, input: body }, context) => {
      await requireSecurityCredential(context);
      const userId = context.caller.userId;
      await countAttempt(context.prisma, context.config, userId);
      return idempotent(context, { operation: 'disableTwoFactor', key: idempotencyKey, input: body }, async (tx) => {
        const user = await tx.user.findUniqueOrThrow({
          where: { id: userId },
          select: { totpSecret: true, twoFactorEnabled: true },
        });
        if (
          !user.twoFactorEnabled ||
          !user.totpSecret ||
          !(await consumeTotp(tx, userId, user.totpSecret, body.code))
        ) {
          throw new DomainError('VALIDATION_FAILED', 'Two-factor is off, or the code does not match it.', {
            details: { problems: [{ path: ['code'], message: 'does not match' }] },
          });
        }
        await tx.user.update({
          where: { id: userId },
          data: { twoFactorEnabled: false, totpSecret: null, totpLastStep: null },
        });
        await clearFailures(tx, userId);
        return { twoFactorEnabled: false };
      });
    },
  }),
}));
