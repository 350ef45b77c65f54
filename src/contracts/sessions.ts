import { z } from 'zod';
import { Id, Timestamp } from '../kernel/formats.ts';

/**
 * The sessions domain's contract: the caller's browser sessions, OAuth grants, two-factor enrolment and mailbox
 * verification (spec 2.16 leaves the records open). No side effects. Login, logout and step-up are plain HTTP
 * routes with their bodies in src/identity/.
 */

/** POST /v1/me/two-factor/confirm and …/disable, `confirmTwoFactor(input:)` and `disableTwoFactor(input:)`. */
export const ConfirmTwoFactorBody = z.strictObject({ code: z.string().regex(/^\d{6}$/, 'must be the 6-digit code') });
export type ConfirmTwoFactorBody = z.infer<typeof ConfirmTwoFactorBody>;

export const SessionResponse = z.strictObject({
  id: Id,
  current: z.boolean(),
  userAgent: z.string().max(512).nullable(),
  createdAt: Timestamp,
  lastSeenAt: Timestamp,
  expiresAt: Timestamp,
});

/** The secret is in the answer of the request that started the enrolment; a replay answers nulls. */
export const EnrolmentResponse = z.strictObject({
  secret: z
    .string()
    .regex(/^[A-Z2-7]+$/)
    .nullable(),
  otpauthUri: z.string().startsWith('otpauth://totp/').nullable(),
});

export const TwoFactorStatusResponse = z.strictObject({ twoFactorEnabled: z.boolean() });

/** An OAuth application the caller authorized: one token family (its id), never its tokens. */
export const OAuthGrantResponse = z.strictObject({
  id: Id,
  clientId: Id,
  clientName: z.string(),
  scopes: z.array(z.string()),
  createdAt: Timestamp,
  lastIssuedAt: Timestamp,
});

/** The token is never here: it goes to the mailbox through the delivery hook. */
export const EmailVerificationRequestResponse = z.strictObject({
  email: z.string(),
  verified: z.boolean(),
  expiresAt: Timestamp.nullable(),
});
