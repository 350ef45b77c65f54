import { DomainError } from '../../kernel/errors.ts';
import { issueEmailVerification } from '../../identity/email-verification.ts';
import { builder } from '../server/builder.ts';
import { deliver, deliveryConfigured } from '../../identity/delivery.ts';
import { idempotent } from '../../idempotency/run.ts';

type EmailVerificationRequestShape = { email: string; verified: boolean; expiresAt: string | null };

const EmailVerificationRequest = builder
  .objectRef<EmailVerificationRequestShape>('EmailVerificationRequest')
  .implement({
    description:
      'The outcome of asking for a mailbox verification token. The token itself only travels through the delivery hook.',
    fields: (t) => ({
      email: t.exposeString('email', { description: 'The address the token was sent to' }),
      verified: t.exposeBoolean('verified', {
        description: 'true when the mailbox was already proven (nothing was sent)',
      }),
      expiresAt: t.field({
        type: 'Timestamp',
        nullable: true,
        description: 'When the sent token stops working; null when nothing was sent',
        resolve: (request) => request.expiresAt,
      }),
    }),
  });

builder.mutationFields((t) => ({
  requestEmailVerification: t.withAuth({ personal: true, oauth: 'profile:manage' }).field({
    type: EmailVerificationRequest,
    description:
      'Sends a one-time token to the caller’s address through the delivery hook; spending it at `/v1/auth/verify-email` marks the account verified.',
    args: { idempotencyKey: t.arg.string({ required: true }) },
    resolve: (_root, { idempotencyKey }, context) => {
      return idempotent(
        context,
        { operation: 'requestEmailVerification', key: idempotencyKey, input: {} },
        async (tx) => {
          const user = await tx.user.findUniqueOrThrow({
            where: { id: context.caller.userId },
            select: { id: true, email: true, verified: true },
          });
          if (user.verified) return { email: user.email, verified: true, expiresAt: null };
          // Never answered to the caller: whoever holds the credential may not own the mailbox (an inviter chose the
          // password of an account created by accepting), so only the mailbox may receive the proof.
          if (!deliveryConfigured(context.config)) {
            throw new DomainError(
              'CONFIGURATION_INVALID',
              'Mailbox verification needs a delivery hook (DELIVERY_WEBHOOK_URL); ask an operator.',
            );
          }
          const issued = await issueEmailVerification(tx, user, context.config.EMAIL_VERIFICATION_TTL_HOURS);
          const expiresAt = issued.expiresAt.toISOString();
          // Inside the transaction: a failed delivery (502) leaves no token behind.
          await deliver(context.config, {
            kind: 'email-verification',
            email: user.email,
            token: issued.token,
            expiresAt,
            userId: user.id,
          });
          return { email: user.email, verified: false, expiresAt };
        },
      );
    },
  }),
}));
