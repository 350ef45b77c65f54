import { DeleteMemberBody, MemberResponse, UpdateMemberBody } from '../../../contracts/members.ts';
import { Page, PageQuery } from '../../../contracts/pages.ts';
import { DeletionResponse } from '../../../contracts/responses.ts';
import { DeleteMemberDocument, ListMembersDocument, UpdateMemberDocument } from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';

export const memberRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/members',
    summary: 'List members, oldest membership first',
    tags: ['members'],
    operation: ListMembersDocument,
    query: PageQuery,
    response: Page(MemberResponse),
  }),
  defineRoute({
    method: 'PATCH',
    path: '/v1/orgs/{orgId}/members/{id}',
    summary: 'Update member (endpoint 3): admins change roles and names; anyone renames themself',
    tags: ['members'],
    operation: UpdateMemberDocument,
    body: UpdateMemberBody,
    response: MemberResponse,
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/orgs/{orgId}/members/{id}',
    summary: 'Remove a member (admins); the organisation keeps at least one admin',
    tags: ['members'],
    operation: DeleteMemberDocument,
    body: DeleteMemberBody,
    response: DeletionResponse,
  }),
];
