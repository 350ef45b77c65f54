import { z } from 'zod';
import { Id, Timestamp } from '../kernel/formats.ts';

/** The api keys domain's contract (spec 2.12): personal and team keys. No side effects. */

const future = (value: string) => Date.parse(value) > Date.now();

export const KeyName = z.string().trim().min(1).max(120);

/** What a key may do: capped by the creator's authority when it is created (DELEGATION_EXCEEDS_AUTHORITY). */
const KeyCeiling = {
  access: z.enum(['read', 'write']),
  includeAdmin: z.boolean().default(false),
  expiresAt: Timestamp.refine(future, 'must be in the future').optional(),
};

/** POST /v1/me/keys and `createMyKey(input:)`: a key that acts as the caller inside one org. */
export const CreatePersonalKeyBody = z.strictObject({ name: KeyName, orgId: Id, ...KeyCeiling });
export type CreatePersonalKeyBody = z.infer<typeof CreatePersonalKeyBody>;

/** POST /v1/orgs/{orgId}/keys and `createTeamKey(input:)`: a workspace-owned key under the org's admin role. */
export const CreateTeamKeyBody = z.strictObject({ name: KeyName, ...KeyCeiling });
export type CreateTeamKeyBody = z.infer<typeof CreateTeamKeyBody>;

/** Metadata only, never the secret. */
export const KeyMetadata = z.strictObject({
  scope: z.enum(['personal', 'team']),
  access: z.enum(['read', 'write']),
  includeAdmin: z.boolean(),
  id: Id,
  orgId: Id,
  name: z.string().min(1).max(120),
  userId: Id.nullable(),
  createdByUserId: Id,
  prefix: z.string().regex(/^[a-z0-9]{12}$/),
  createdAt: Timestamp,
  expiresAt: Timestamp.nullable(),
  revokedAt: Timestamp.nullable(),
  lastUsedAt: Timestamp.nullable(),
});

/** The secret is in the answer of the request that created the key; a replay of that request answers null. */
export const CreatedKeyResponse = z.strictObject({
  key: KeyMetadata,
  secret: z
    .string()
    .regex(/^wds_[a-z0-9]{12}_[A-Za-z0-9_-]{43}$/)
    .nullable(),
});
