import { z } from 'zod';
import { Id, Timestamp } from '../../../kernel/formats.ts';
import { ConfirmTwoFactorBody } from '../../../graph/sessions/sessions.ts';
import {
  ConfirmTwoFactorDocument,
  DisableTwoFactorDocument,
  ListMyOAuthGrantsDocument,
  ListMySessionsDocument,
  RevokeMyOAuthGrantDocument,
  RequestEmailVerificationDocument,
  RevokeMySessionDocument,
  StartTwoFactorEnrolmentDocument,
} from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';
import { DeletionResponse } from '../../../contracts/responses.ts';
import { Page, PageQuery } from '../../../contracts/pages.ts';

/** A browser session (spec 2.16 leaves the record open). */
export const SessionResponse = z.strictObject({
  id: Id,
  current: z.boolean(),
  userAgent: z.string().max(512).nullable(),
  createdAt: Timestamp,
  lastSeenAt: Timestamp,
  expiresAt: Timestamp,
});

export const EnrolmentResponse = z.strictObject({
  secret: z
    .string()
    .regex(/^[A-Z2-7]+$/)
    .nullable(),
  otpauthUri: z.string().startsWith('otpauth://totp/').nullable(),
});

/** An OAuth application the caller authorized: one token family (its id), never its tokens. */
export const OAuthGrantResponse = z.strictObject({
  id: Id,
  clientId: Id,
  clientName: z.string(),
  scopes: z.array(z.string()),
  createdAt: Timestamp,
  lastIssuedAt: Timestamp,
});

/** The token is never here: it goes to the mailbox through the delivery hook. */
export const EmailVerificationRequestResponse = z.strictObject({
  email: z.string(),
  verified: z.boolean(),
  expiresAt: Timestamp.nullable(),
});

const NoQuery = z.strictObject({});
const TwoFactorStatusResponse = z.strictObject({ twoFactorEnabled: z.boolean() });

export const sessionRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v1/me/oauth-grants',
    summary: 'List the OAuth applications the caller authorized, newest first',
    tags: ['sessions'],
    operation: ListMyOAuthGrantsDocument,
    query: PageQuery,
    idempotent: false,
    successStatus: 200,
    response: Page(OAuthGrantResponse),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/me/oauth-grants/{id}',
    summary: 'Revoke an OAuth application’s grant (all its tokens)',
    tags: ['sessions'],
    operation: RevokeMyOAuthGrantDocument,
    params: z.strictObject({ id: Id }),
    query: NoQuery,
    idempotent: true,
    successStatus: 200,
    response: DeletionResponse,
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/me/sessions',
    summary: 'List the caller’s live browser sessions, newest first',
    tags: ['sessions'],
    operation: ListMySessionsDocument,
    query: PageQuery,
    idempotent: false,
    successStatus: 200,
    response: Page(SessionResponse),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/me/sessions/{id}',
    summary: 'Revoke session (endpoint 10): only the caller’s own',
    tags: ['sessions'],
    operation: RevokeMySessionDocument,
    params: z.strictObject({ id: Id }),
    query: NoQuery,
    idempotent: true,
    successStatus: 200,
    response: DeletionResponse,
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/me/two-factor',
    summary: 'Start TOTP enrolment (the secret is in this answer only)',
    tags: ['sessions'],
    operation: StartTwoFactorEnrolmentDocument,
    query: NoQuery,
    idempotent: true,
    secret: true,
    successStatus: 201,
    response: EnrolmentResponse,
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/me/two-factor/confirm',
    summary: 'Turn two-factor on with a current code',
    tags: ['sessions'],
    operation: ConfirmTwoFactorDocument,
    query: NoQuery,
    body: ConfirmTwoFactorBody,
    idempotent: true,
    successStatus: 200,
    response: TwoFactorStatusResponse,
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/me/two-factor/disable',
    summary: 'Turn two-factor off with a current code',
    tags: ['sessions'],
    operation: DisableTwoFactorDocument,
    query: NoQuery,
    body: ConfirmTwoFactorBody,
    idempotent: true,
    successStatus: 200,
    response: TwoFactorStatusResponse,
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/me/email-verification',
    summary: 'Send a mailbox verification token through the delivery hook',
    tags: ['sessions'],
    operation: RequestEmailVerificationDocument,
    query: NoQuery,
    idempotent: true,
    delivers: true,
    successStatus: 202,
    response: EmailVerificationRequestResponse,
  }),
];
