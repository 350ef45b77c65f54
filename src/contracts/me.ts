import { z } from 'zod';
import { Id, Timestamp } from '../kernel/formats.ts';
import { CAPABILITIES_BY_ROLE, OAUTH_SCOPES, ROLES } from '../kernel/authority.ts';

/** Who is calling (GET /v1/me, GraphQL `me`) and the orgs the credential reaches (GET /v1/orgs, `orgs`). */
export const CREDENTIAL_TYPES = ['personal-key', 'team-key', 'session', 'oauth'] as const;
export const CAPABILITIES = CAPABILITIES_BY_ROLE.admin;

export const MeUserResponse = z.strictObject({
  id: Id,
  name: z.string().min(1).max(120),
  email: z.email(),
  verified: z.boolean(),
  twoFactorEnabled: z.boolean(),
});

export const MeCredentialResponse = z.strictObject({
  type: z.enum(CREDENTIAL_TYPES),
  id: Id,
  /** The key's prefix, `session`, or `oauth:<client id>`: how the activity feed names it. */
  prefix: z.string().min(1).max(64),
  /** The OAuth scopes it carries; keys and sessions carry all of them (their role and ceiling still apply). */
  scopes: z.array(z.enum(OAUTH_SCOPES)),
  /** A key's ceiling: `read` or `write`, and whether it includes admin authority; null for sessions and OAuth tokens. */
  access: z.enum(['read', 'write']).nullable(),
  includeAdmin: z.boolean().nullable(),
  /** The org a key belongs to; null for sessions and OAuth tokens, which reach every org of their user. */
  orgId: Id.nullable(),
  /** The OAuth application that holds the token; null otherwise. */
  clientId: Id.nullable(),
  expiresAt: Timestamp.nullable(),
});

export const MeResponse = z.strictObject({
  /** The person behind the credential; null for a team key, which acts for its org and has no personal identity. */
  user: MeUserResponse.nullable(),
  credential: MeCredentialResponse,
});

export const MyOrgResponse = z.strictObject({
  id: Id,
  name: z.string().min(1).max(120),
  /** The caller's current role there; null for a team key, which is not a member. */
  role: z.enum(ROLES).nullable(),
  /** What this credential may do there now: the role's authority under the credential's ceiling. */
  capabilities: z.array(z.enum(CAPABILITIES)),
});

export type MeShape = z.infer<typeof MeResponse>;
export type MyOrgShape = z.infer<typeof MyOrgResponse>;
