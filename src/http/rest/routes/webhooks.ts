import { z } from 'zod';
import {
  CreateWebhookBody, DeleteWebhookBody, ReplayWebhookBody, UpdateWebhookBody, WebhookAttemptResponse, WebhookMessageQueued,
  WebhookReplayResponse, WebhookResponse, WebhookWithSecretResponse,
} from '../../../contracts/webhooks.ts';
import { Id } from '../../../kernel/formats.ts';
import {
  CreateWebhookDocument, DeleteWebhookDocument, GetWebhookDocument, ListWebhookDeliveriesDocument, ListWebhooksDocument,
  ReplayWebhookDocument, RotateWebhookSecretDocument, TestWebhookDocument, UpdateWebhookDocument,
} from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';
import { DeletionResponse } from '../../../contracts/responses.ts';
import { Page, PageQuery } from '../../../contracts/pages.ts';

const WEBHOOKS = '/v1/orgs/{orgId}/webhooks';
const OrgPath = z.strictObject({ orgId: Id });
const WebhookPath = z.strictObject({ orgId: Id, id: Id });
const none = z.strictObject({});

/** Issue 27: webhooks, admins only. The secret is in the answers of create and rotate-secret only. */
export const webhookRoutes = [
  defineRoute({
    method: 'POST', path: WEBHOOKS, summary: 'Create a webhook (admins; the signing secret is in this answer only)', tags: ['webhooks'],
    operation: CreateWebhookDocument, params: OrgPath, query: none, body: CreateWebhookBody, idempotent: true, secret: true,
    successStatus: 201, response: WebhookWithSecretResponse, errorStatuses: [404],
  }),
  defineRoute({
    method: 'GET', path: WEBHOOKS, summary: 'List webhooks (admins), oldest first; never their secrets', tags: ['webhooks'],
    operation: ListWebhooksDocument, params: OrgPath, query: PageQuery, idempotent: false, successStatus: 200, response: Page(WebhookResponse),
  }),
  defineRoute({
    method: 'GET', path: `${WEBHOOKS}/{id}`, summary: 'Get a webhook', tags: ['webhooks'],
    operation: GetWebhookDocument, params: WebhookPath, query: none, idempotent: false, successStatus: 200, response: WebhookResponse,
  }),
  defineRoute({
    method: 'PATCH', path: `${WEBHOOKS}/{id}`, summary: 'Change a webhook still at `expectedVersion`; `state: "active"` resumes it',
    tags: ['webhooks'], operation: UpdateWebhookDocument, params: WebhookPath, query: none, body: UpdateWebhookBody, idempotent: true,
    successStatus: 200, response: WebhookResponse,
  }),
  defineRoute({
    method: 'DELETE', path: `${WEBHOOKS}/{id}`, summary: 'Delete a webhook still at `expectedVersion`', tags: ['webhooks'],
    operation: DeleteWebhookDocument, params: WebhookPath, query: none, body: DeleteWebhookBody, idempotent: true, successStatus: 200,
    response: DeletionResponse,
  }),
  defineRoute({
    method: 'POST', path: `${WEBHOOKS}/{id}/rotate-secret`, summary: 'Issue a new signing secret; the old one signs beside it for 24 h',
    tags: ['webhooks'], operation: RotateWebhookSecretDocument, params: WebhookPath, query: none, idempotent: true, secret: true,
    successStatus: 200, response: WebhookWithSecretResponse,
  }),
  defineRoute({
    method: 'POST', path: `${WEBHOOKS}/{id}/test`, summary: 'Send a `webhook.test` message', tags: ['webhooks'],
    operation: TestWebhookDocument, params: WebhookPath, query: none, idempotent: true, successStatus: 202, response: WebhookMessageQueued,
  }),
  defineRoute({
    method: 'GET', path: `${WEBHOOKS}/{id}/deliveries`, summary: 'A webhook’s delivery attempts, newest first', tags: ['webhooks'],
    operation: ListWebhookDeliveriesDocument, params: WebhookPath, query: PageQuery, idempotent: false, successStatus: 200,
    response: Page(WebhookAttemptResponse),
  }),
  defineRoute({
    method: 'POST', path: `${WEBHOOKS}/{id}/replay`, summary: 'Deliver again every matching change after a feed cursor, or all retained',
    tags: ['webhooks'], operation: ReplayWebhookDocument, params: WebhookPath, query: none, body: ReplayWebhookBody, idempotent: true,
    successStatus: 202, response: WebhookReplayResponse,
  }),
];
