import { z } from 'zod';
import { Id, Timestamp } from '../../../kernel/formats.ts';
import { CreatePersonalKeyBody } from '../../../graph/keys/personal.ts';
import { CreateTeamKeyBody } from '../../../graph/keys/team.ts';
import {
  CreateMyKeyDocument,
  CreateTeamKeyDocument,
  ListMyKeysDocument,
  ListTeamKeysDocument,
  RevokeMyKeyDocument,
  RevokeTeamKeyDocument,
} from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';
import { DeletionResponse } from '../../../contracts/responses.ts';
import { Page, PageQuery } from '../../../contracts/pages.ts';

/** Spec 2.12: metadata only, never the secret. */
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

const NoQuery = z.strictObject({});

export const keyRoutes = [
  defineRoute({
    method: 'POST',
    path: '/v1/me/keys',
    summary: 'Create a personal key (the secret is in this answer only)',
    tags: ['keys'],
    operation: CreateMyKeyDocument,
    query: NoQuery,
    body: CreatePersonalKeyBody,
    idempotent: true,
    secret: true,
    successStatus: 201,
    response: CreatedKeyResponse,
    // The body's orgId may name an org the caller is not in: 404, as for any org it may not know about.
    errorStatuses: [404],
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/me/keys',
    summary: 'List personal keys (endpoint 13), newest first',
    tags: ['keys'],
    operation: ListMyKeysDocument,
    query: PageQuery,
    idempotent: false,
    successStatus: 200,
    response: Page(KeyMetadata),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/me/keys/{id}',
    summary: 'Revoke a personal key',
    tags: ['keys'],
    operation: RevokeMyKeyDocument,
    params: z.strictObject({ id: Id }),
    query: NoQuery,
    idempotent: true,
    successStatus: 200,
    response: DeletionResponse,
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/keys',
    summary: 'Create a team key (admins; the secret is in this answer only)',
    tags: ['keys'],
    operation: CreateTeamKeyDocument,
    params: z.strictObject({ orgId: Id }),
    query: NoQuery,
    body: CreateTeamKeyBody,
    idempotent: true,
    secret: true,
    successStatus: 201,
    response: CreatedKeyResponse,
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/keys',
    summary: 'List team keys (admins), newest first',
    tags: ['keys'],
    operation: ListTeamKeysDocument,
    params: z.strictObject({ orgId: Id }),
    query: PageQuery,
    idempotent: false,
    successStatus: 200,
    response: Page(KeyMetadata),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/orgs/{orgId}/keys/{id}',
    summary: 'Revoke team key (endpoint 9, admins only)',
    tags: ['keys'],
    operation: RevokeTeamKeyDocument,
    params: z.strictObject({ orgId: Id, id: Id }),
    query: NoQuery,
    idempotent: true,
    successStatus: 200,
    response: DeletionResponse,
  }),
];
