/**
 * What a caller may do in an org: the intersection of the member's current role (read at call time) and
 * the ceiling of the credential it presented (DESIGN §3).
 */
export const ROLES = ['admin', 'member', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

/** read: see data; write: change rows, shared views, imports; manage: schema; admin: members, keys, settings. */
export type Capability = 'read' | 'write' | 'manage' | 'admin';

export const CAPABILITIES_BY_ROLE: Record<Role, readonly Capability[]> = {
  viewer: ['read'],
  member: ['read', 'write', 'manage'],
  admin: ['read', 'write', 'manage', 'admin'],
};

/** The 23 OAuth scopes of spec §5. API keys and sessions hold all of them (their ceiling is their access). */
export const OAUTH_SCOPES = [
  'profile:manage',
  'account:security',
  'org:read',
  'org:manage',
  'members:read',
  'members:manage',
  'keys:manage',
  'team-keys:manage',
  'databases:read',
  'databases:manage',
  'tables:read',
  'tables:manage',
  'schema:manage',
  'rows:read',
  'schema:read',
  'rows:write',
  'history:read',
  'exports:read',
  'jobs:read',
  'jobs:cancel',
  'jobs:retry',
  'backups:read',
  'backups:manage',
] as const;

export type OAuthScope = (typeof OAUTH_SCOPES)[number];

export interface KeyCeiling {
  access: 'read' | 'write';
  includeAdmin: boolean;
}

export function capabilitiesOfKey({ access, includeAdmin }: KeyCeiling): Capability[] {
  const granted: Capability[] = access === 'write' ? ['read', 'write', 'manage'] : ['read'];
  return includeAdmin ? [...granted, 'admin'] : granted;
}

/** The key ceiling equal to a role's authority: what granting that role (an invitation, a role change) hands out. */
export function ceilingOfRole(role: Role): KeyCeiling {
  return { access: role === 'viewer' ? 'read' : 'write', includeAdmin: role === 'admin' };
}

export function intersect(role: Role, ceiling: readonly Capability[]): ReadonlySet<Capability> {
  const allowed = new Set(ceiling);
  return new Set(CAPABILITIES_BY_ROLE[role].filter((capability) => allowed.has(capability)));
}

/** True when `requested` asks for nothing the role lacks (DELEGATION_EXCEEDS_AUTHORITY otherwise). */
export function withinRole(role: Role, requested: readonly Capability[]): boolean {
  const held = new Set(CAPABILITIES_BY_ROLE[role]);
  return requested.every((capability) => held.has(capability));
}
