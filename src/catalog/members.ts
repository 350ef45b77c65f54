import { Prisma } from '../generated/prisma/client.ts';

/** The org's admin memberships, locked: two admins demoting each other at once serialise here. */
export function lockAdmins(orgId: string): Prisma.Sql {
  return Prisma.sql`
    SELECT id FROM members WHERE org_id = ${orgId}::bpchar AND role = 'admin' ORDER BY id FOR UPDATE`;
}

export function lockMember(orgId: string, memberId: string): Prisma.Sql {
  return Prisma.sql`SELECT id FROM members WHERE id = ${memberId}::bpchar AND org_id = ${orgId}::bpchar FOR UPDATE`;
}
