import { z } from 'zod';
import { Id, VersionString } from '../../../kernel/formats.ts';
import { DeleteMemberBody, MemberName, ROLES, UpdateMemberBody } from '../../../graph/members/members.ts';
import { DeleteMemberDocument, ListMembersDocument, UpdateMemberDocument } from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';
import { DeletionResponse } from '../../../contracts/responses.ts';
import { Page, PageQuery } from '../../../contracts/pages.ts';

/** Spec 2.5. */
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

const OrgPath = z.strictObject({ orgId: Id });
const MemberPath = z.strictObject({ orgId: Id, id: Id });

export const memberRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/members',
    summary: 'List members, oldest membership first',
    tags: ['members'],
    operation: ListMembersDocument,
    params: OrgPath,
    query: PageQuery,
    idempotent: false,
    successStatus: 200,
    response: Page(MemberResponse),
  }),
  defineRoute({
    method: 'PATCH',
    path: '/v1/orgs/{orgId}/members/{id}',
    summary: 'Update member (endpoint 3): admins change roles and names; anyone renames themself',
    tags: ['members'],
    operation: UpdateMemberDocument,
    params: MemberPath,
    query: z.strictObject({}),
    body: UpdateMemberBody,
    idempotent: true,
    successStatus: 200,
    response: MemberResponse,
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/orgs/{orgId}/members/{id}',
    summary: 'Remove a member (admins); the organisation keeps at least one admin',
    tags: ['members'],
    operation: DeleteMemberDocument,
    params: MemberPath,
    query: z.strictObject({}),
    body: DeleteMemberBody,
    idempotent: true,
    successStatus: 200,
    response: DeletionResponse,
  }),
];
