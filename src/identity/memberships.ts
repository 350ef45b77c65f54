import { CAPABILITIES_BY_ROLE, type Role } from '../kernel/authority.ts';
import type { OrgAuthority } from '../kernel/caller.ts';

/** A user's membership with its role as read for this request. */
export interface Membership {
  orgId: string;
  role: Role;
  memberId: string;
}

/**
 * The select-list item that gathers every membership of the user joined as `m` (members by user id), with the
 * current role, into one JSON column `memberships`: sessions and OAuth tokens act in every org of their user.
 */
export const MEMBERSHIPS_COLUMN = `coalesce(json_agg(json_build_object('orgId', m.org_id, 'role', m.role, 'memberId', m.id))
                    FILTER (WHERE m.id IS NOT NULL), '[]') AS memberships`;

/** The full authority of each current role (a credential's own ceiling, such as OAuth scopes, applies on top). */
export function authorityByOrg(memberships: readonly Membership[]): Map<string, OrgAuthority> {
  return new Map(
    memberships.map(({ orgId, role, memberId }) => [
      orgId,
      { orgId, role, memberId, capabilities: new Set(CAPABILITIES_BY_ROLE[role]) },
    ]),
  );
}
