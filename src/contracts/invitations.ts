import { z } from 'zod';
import { Password } from '../identity/passwords.ts';
import { ROLES } from '../kernel/authority.ts';
import { Email, Id, Timestamp } from '../kernel/formats.ts';
import { MemberName } from './members.ts';

/** The invitations domain's contract (spec 2.16 leaves the record open; this is ours). No side effects. */

export const INVITATION_STATES = ['pending', 'accepted', 'cancelled', 'expired'] as const;
export const InvitationToken = z.string().regex(/^wdsi_[A-Za-z0-9_-]{43}$/, 'must be an invitation token');

/** POST /v1/orgs/{orgId}/invitations and `createInvitation(input:)`. */
export const CreateInvitationBody = z.strictObject({ email: Email, role: z.enum(ROLES) });
export type CreateInvitationBody = z.infer<typeof CreateInvitationBody>;

/**
 * POST /v1/invitations/accept and `acceptInvitation(input:)`. With a personal credential: `{token}`. Without one, a
 * new user signs up: `{token, name, password}`.
 */
export const AcceptInvitationBody = z.strictObject({
  token: InvitationToken,
  name: MemberName.optional(),
  password: Password.optional(),
});
export type AcceptInvitationBody = z.infer<typeof AcceptInvitationBody>;

export const InvitationResponse = z.strictObject({
  id: Id,
  orgId: Id,
  email: z.email(),
  role: z.enum(ROLES),
  state: z.enum(INVITATION_STATES),
  invitedByUserId: Id,
  createdAt: Timestamp,
  expiresAt: Timestamp,
  acceptedAt: Timestamp.nullable(),
});

/** The token is null on an idempotent replay and when the delivery hook carried it. */
export const CreatedInvitationResponse = z.strictObject({
  invitation: InvitationResponse,
  token: InvitationToken.nullable(),
});
