import { CreatedKeyResponse, CreatePersonalKeyBody, CreateTeamKeyBody, KeyMetadata } from '../../../contracts/keys.ts';
import { Page, PageQuery } from '../../../contracts/pages.ts';
import { DeletionResponse } from '../../../contracts/responses.ts';
import {
  CreateMyKeyDocument,
  CreateTeamKeyDocument,
  ListMyKeysDocument,
  ListTeamKeysDocument,
  RevokeMyKeyDocument,
  RevokeTeamKeyDocument,
} from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';

export const keyRoutes = [
  defineRoute({
    method: 'POST',
    path: '/v1/me/keys',
    summary: 'Create a personal key (the secret is in this answer only)',
    tags: ['keys'],
    operation: CreateMyKeyDocument,
    body: CreatePersonalKeyBody,
    secret: true,
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
    response: Page(KeyMetadata),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/me/keys/{id}',
    summary: 'Revoke a personal key',
    tags: ['keys'],
    operation: RevokeMyKeyDocument,
    response: DeletionResponse,
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/keys',
    summary: 'Create a team key (admins; the secret is in this answer only)',
    tags: ['keys'],
    operation: CreateTeamKeyDocument,
    body: CreateTeamKeyBody,
    secret: true,
    response: CreatedKeyResponse,
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/keys',
    summary: 'List team keys (admins), newest first',
    tags: ['keys'],
    operation: ListTeamKeysDocument,
    query: PageQuery,
    response: Page(KeyMetadata),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/orgs/{orgId}/keys/{id}',
    summary: 'Revoke team key (endpoint 9, admins only)',
    tags: ['keys'],
    operation: RevokeTeamKeyDocument,
    response: DeletionResponse,
  }),
];
