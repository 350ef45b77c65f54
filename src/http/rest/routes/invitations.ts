import { z } from 'zod';
import { Id, Timestamp } from '../../../kernel/formats.ts';
import {
  AcceptInvitationBody,
  CreateInvitationBody,
  INVITATION_STATES,
} from '../../../graph/invitations/invitations.ts';
import { ROLES } from '../../../graph/members/members.ts';
import {
  AcceptInvitationDocument,
  CancelInvitationDocument,
  CreateInvitationDocument,
  ListInvitationsDocument,
} from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';
import { DeletionResponse } from '../../../contracts/responses.ts';
import { MemberResponse } from './members.ts';
import { Page, PageQuery } from '../../../contracts/pages.ts';

/** The invitation record (spec 2.16 leaves it open). */
export const InvitationResponse = z.strictObject({
  id: Id,
  orgId: Id,
  email: z.email(),
  role: z.enum(ROLES),
  state: z.enum(INVITATION_STATES),
  invitedByUserId: Id,
  createdAt: Timestamp,
  expiresAt: Timestamp,
  acceptedAt: Timestamp.nullable(),
});

export const CreatedInvitationResponse = z.strictObject({
  invitation: InvitationResponse,
  token: z
    .string()
    .regex(/^wdsi_[A-Za-z0-9_-]{43}$/)
    .nullable(),
});

const NoQuery = z.strictObject({});
const OrgPath = z.strictObject({ orgId: Id });

export const invitationRoutes = [
  defineRoute({
    method: 'POST',
    path: '/v1/orgs/{orgId}/invitations',
    summary: 'Invite an address with a role (admins; the token is in this answer only)',
    tags: ['invitations'],
    operation: CreateInvitationDocument,
    params: OrgPath,
    query: NoQuery,
    body: CreateInvitationBody,
    idempotent: true,
    secret: true,
    delivers: true,
    successStatus: 201,
    response: CreatedInvitationResponse,
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/invitations',
    summary: 'List invitations (admins), newest first',
    tags: ['invitations'],
    operation: ListInvitationsDocument,
    params: OrgPath,
    query: PageQuery,
    idempotent: false,
    successStatus: 200,
    response: Page(InvitationResponse),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/orgs/{orgId}/invitations/{id}',
    summary: 'Cancel invitation (endpoint 8): before acceptance only',
    tags: ['invitations'],
    operation: CancelInvitationDocument,
    params: z.strictObject({ orgId: Id, id: Id }),
    query: NoQuery,
    idempotent: true,
    successStatus: 200,
    response: DeletionResponse,
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/invitations/accept',
    summary: 'Accept an invitation: as the caller, or without a credential as a new user (name, password)',
    tags: ['invitations'],
    operation: AcceptInvitationDocument,
    query: NoQuery,
    body: AcceptInvitationBody,
    idempotent: true,
    successStatus: 200,
    response: MemberResponse,
  }),
];
