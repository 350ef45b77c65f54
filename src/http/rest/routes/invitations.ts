import {
  AcceptInvitationBody,
  CreatedInvitationResponse,
  CreateInvitationBody,
  InvitationResponse,
} from '../../../contracts/invitations.ts';
import { MemberResponse } from '../../../contracts/members.ts';
import { Page, PageQuery } from '../../../contracts/pages.ts';
import { DeletionResponse } from '../../../contracts/responses.ts';
import {
  AcceptInvitationDocument,
  CancelInvitationDocument,
  CreateInvitationDocument,
  ListInvitationsDocument,
} from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';

export const invitationRoutes = [
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/invitations',
    summary: 'Invite an address with a role (admins; the token is in this answer only)',
    tags: ['invitations'],
    operation: CreateInvitationDocument,
    body: CreateInvitationBody,
    secret: true,
    delivers: true,
    response: CreatedInvitationResponse,
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/invitations',
    summary: 'List invitations (admins), newest first',
    tags: ['invitations'],
    operation: ListInvitationsDocument,
    query: PageQuery,
    response: Page(InvitationResponse),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/orgs/{orgId}/invitations/{id}',
    summary: 'Cancel invitation (endpoint 8): before acceptance only',
    tags: ['invitations'],
    operation: CancelInvitationDocument,
    response: DeletionResponse,
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/invitations/accept',
    summary: 'Accept an invitation: as the caller, or without a credential as a new user (name, password)',
    tags: ['invitations'],
    operation: AcceptInvitationDocument,
    body: AcceptInvitationBody,
    successStatus: 200,
    response: MemberResponse,
  }),
];
