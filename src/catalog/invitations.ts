import { Prisma } from '../generated/prisma/client.ts';

export function lockInvitationByTokenHash(tokenHash: string): Prisma.Sql {
  return Prisma.sql`SELECT id FROM invitations WHERE token_hash = ${tokenHash}::bpchar FOR UPDATE`;
}

/** Whether an invitation of this org was accepted or cancelled, locked. */
export function lockInvitationState(orgId: string, invitationId: string): Prisma.Sql {
  return Prisma.sql`
          SELECT accepted_at IS NOT NULL AS accepted, cancelled_at IS NOT NULL AS cancelled
            FROM invitations WHERE id = ${invitationId}::bpchar AND org_id = ${orgId}::bpchar FOR UPDATE`;
}
