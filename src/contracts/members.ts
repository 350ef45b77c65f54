import { z } from 'zod';
import { ROLES } from '../kernel/authority.ts';
import { Id, VersionString } from '../kernel/formats.ts';

/** The members domain's contract (spec 2.5): what REST, GraphQL and OpenAPI read. No side effects. */

/** The name an org's admins give a member (or a member gives themself). */
export const MemberName = z.string().trim().min(1).max(120);

/** PATCH /v1/orgs/{orgId}/members/{id} and `updateMember(input:)`. */
export const UpdateMemberBody = z.strictObject({
  expectedVersion: VersionString,
  name: MemberName.optional(),
  role: z.enum(ROLES).optional(),
});
export type UpdateMemberBody = z.infer<typeof UpdateMemberBody>;

/** DELETE /v1/orgs/{orgId}/members/{id} and `deleteMember(input:)`. */
export const DeleteMemberBody = z.strictObject({ expectedVersion: VersionString });
export type DeleteMemberBody = z.infer<typeof DeleteMemberBody>;

export const MemberResponse = z.strictObject({
  id: Id,
  orgId: Id,
  userId: Id,
  name: MemberName,
  email: z.email(),
  role: z.enum(ROLES),
  version: VersionString,
  verified: z.boolean(),
  twoFactorEnabled: z.boolean(),
});
