import type { TransactionClient } from '../../db/prisma.ts';
import { DomainError } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { capabilitiesOfKey, type Capability } from '../../kernel/authority.ts';
import type { Caller, OrgAuthority } from '../../kernel/caller.ts';
import { issueApiKeySecret } from '../../identity/secrets.ts';
import { builder } from '../server/builder.ts';
import type { Context } from '../server/context.ts';
import type { IdempotentCall } from '../../idempotency/key.ts';
import { idempotentWithSecret } from '../server/one-time-secret.ts';
import { pageRef } from '../shared/pages.ts';

/** Spec 2.12 (personal keys); team keys have the same metadata with `scope: "team"` and `userId: null`. */
export type KeyShape = {
  scope: string;
  access: string;
  includeAdmin: boolean;
  id: string;
  orgId: string;
  name: string;
  userId: string | null;
  /** Who minted the key: the owner for personal keys, the accountable admin for team keys. */
  createdByUserId: string;
  prefix: string;
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  lastUsedAt: string | null;
};

/** The create answer. `secret` is null when an Idempotency-Key replays a creation: it is shown once and never stored. */
export type CreatedKeyShape = { key: KeyShape; secret: string | null };

export const ApiKey = builder.objectRef<KeyShape>('ApiKey').implement({
  description: 'Metadata of an API key (spec 2.12). The secret is never part of it.',
  fields: (t) => ({
    scope: t.exposeString('scope', { description: '`personal` or `team`' }),
    access: t.exposeString('access', { description: '`read` or `write`' }),
    includeAdmin: t.exposeBoolean('includeAdmin'),
    id: t.exposeID('id'),
    orgId: t.exposeID('orgId'),
    name: t.exposeString('name'),
    userId: t.exposeID('userId', { nullable: true }),
    createdByUserId: t.exposeID('createdByUserId', {
      description: 'The person who created the key; a team key outlives them (README, security).',
    }),
    prefix: t.exposeString('prefix'),
    createdAt: t.field({ type: 'Timestamp', resolve: (key) => key.createdAt }),
    expiresAt: t.field({ type: 'Timestamp', nullable: true, resolve: (key) => key.expiresAt }),
    revokedAt: t.field({ type: 'Timestamp', nullable: true, resolve: (key) => key.revokedAt }),
    lastUsedAt: t.field({ type: 'Timestamp', nullable: true, resolve: (key) => key.lastUsedAt }),
  }),
});

export const ApiKeyPage = pageRef('ApiKeyPage', ApiKey, 'A page of API keys, newest first.');

export const CreatedApiKey = builder.objectRef<CreatedKeyShape>('CreatedApiKey').implement({
  description: 'A new key and its secret. The secret appears in this answer only; store it now.',
  fields: (t) => ({
    key: t.field({ type: ApiKey, resolve: (created) => created.key }),
    secret: t.string({ nullable: true, resolve: (created) => created.secret }),
  }),
});

export const keySelect = {
  scope: true,
  access: true,
  includeAdmin: true,
  id: true,
  orgId: true,
  name: true,
  userId: true,
  createdByUserId: true,
  prefix: true,
  createdAt: true,
  expiresAt: true,
  revokedAt: true,
  lastUsedAt: true,
} as const;

interface KeyRow {
  scope: string;
  access: string;
  includeAdmin: boolean;
  id: string;
  orgId: string;
  name: string;
  userId: string | null;
  createdByUserId: string;
  prefix: string;
  createdAt: Date;
  expiresAt: Date | null;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
}

export function toKeyShape(row: KeyRow): KeyShape {
  return {
    scope: row.scope,
    access: row.access,
    includeAdmin: row.includeAdmin,
    id: row.id,
    orgId: row.orgId,
    name: row.name,
    userId: row.userId,
    createdByUserId: row.createdByUserId,
    prefix: row.prefix,
    createdAt: row.createdAt.toISOString(),
    expiresAt: row.expiresAt?.toISOString() ?? null,
    revokedAt: row.revokedAt?.toISOString() ?? null,
    lastUsedAt: row.lastUsedAt?.toISOString() ?? null,
  };
}

/**
 * A new credential may not carry more than its creator holds right now (DESIGN §3): its capabilities must be
 * within the creator's current authority in the org, and a creator whose credential is limited to some OAuth
 * scopes cannot mint an API key, which would carry all of them.
 */
export function checkDelegation(
  caller: Caller,
  authority: OrgAuthority,
  ceiling: { access: 'read' | 'write'; includeAdmin: boolean },
): void {
  const requested: Capability[] = capabilitiesOfKey(ceiling);
  const beyond = requested.filter((capability) => !authority.capabilities.has(capability));
  if (beyond.length > 0 || caller.scopes !== 'all') {
    throw new DomainError(
      'DELEGATION_EXCEEDS_AUTHORITY',
      'The key would carry more authority than you currently hold.',
      {
        details: {
          requested,
          held: [...authority.capabilities],
          ...(caller.scopes === 'all' ? {} : { scopesLimited: true }),
        },
      },
    );
  }
}

export interface NewKey {
  scope: 'personal' | 'team';
  orgId: string;
  userId: string | null;
  createdByUserId: string;
  name: string;
  access: 'read' | 'write';
  includeAdmin: boolean;
  expiresAt?: string | undefined;
}

/** Inserts the key (only the hash of its secret) and returns the metadata and the one-time token. */
export async function insertKey(tx: TransactionClient, key: NewKey): Promise<{ shape: KeyShape; token: string }> {
  const secret = issueApiKeySecret();
  const row = await tx.apiKey.create({
    data: {
      id: newId(),
      ...key,
      expiresAt: key.expiresAt ? new Date(key.expiresAt) : null,
      prefix: secret.prefix,
      secretHash: secret.hash,
    },
    select: keySelect,
  });
  return { shape: toKeyShape(row), token: secret.token };
}

/** Marks a live key revoked; false when there is no such live key (the caller then answers 404). */
export async function revokeKey(
  tx: TransactionClient,
  where: { id: string; scope: 'personal' | 'team'; orgId?: string; userId?: string },
): Promise<boolean> {
  const { count } = await tx.apiKey.updateMany({
    where: { ...where, revokedAt: null },
    data: { revokedAt: new Date() },
  });
  return count === 1;
}

/** Creates a key through `idempotentWithSecret`: the token is in the live answer only (a replay answers null). */
export async function createOnce(
  context: Context,
  call: IdempotentCall,
  create: (tx: TransactionClient) => Promise<{ shape: KeyShape; token: string }>,
): Promise<CreatedKeyShape> {
  const { value, secret } = await idempotentWithSecret(context, call, async (tx) => {
    const { shape, token } = await create(tx);
    return { value: shape, secret: token };
  });
  return { key: value, secret };
}
