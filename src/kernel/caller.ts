import type { Capability, OAuthScope, Role } from './authority.ts';

/**
 * Who is calling and with what authority, resolved once per request from the bearer credential.
 * Team keys, sessions and OAuth tokens resolve into this same shape.
 */
export interface Caller {
  /** `user` callers have a personal identity; `team-key` callers act for an org and have none. */
  kind: 'user' | 'team-key';
  /** The user's id, or the team key's id. */
  actorId: string;
  /** Namespace for idempotency keys and rate limits: `user:<id>` or `key:<id>`. */
  actorKey: string;
  userId: string | null;
  name: string;
  credential: Credential;
  /** OAuth scopes the credential carries; API keys carry all of them. */
  scopes: ReadonlySet<OAuthScope> | 'all';
  /** Authority in each org the credential reaches, from the role as read for this request. */
  orgs: ReadonlyMap<string, OrgAuthority>;
}

/** The credential presented. `prefix` names it in logs and activity without revealing it. */
export interface Credential {
  type: 'api-key' | 'session' | 'oauth';
  id: string;
  prefix: string;
  /** Browser sessions only: when the user last proved a password (and TOTP), and whether the CSRF header matched. */
  session?: { strongAuthAt: Date; csrfVerified: boolean };
}

export interface OrgAuthority {
  orgId: string;
  role: Role;
  memberId: string;
  capabilities: ReadonlySet<Capability>;
}

export function hasScope(caller: Caller, scope: OAuthScope): boolean {
  return caller.scopes === 'all' || caller.scopes.has(scope);
}
