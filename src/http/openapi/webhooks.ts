import type { z } from 'zod';
import { WebhookBatchMessage, WebhookChangeMessage, WebhookTestMessage } from '../../contracts/webhooks.ts';
import type { JsonSchema, SchemaComponents } from './json-schema.ts';

/**
 * The document's `webhooks` (OpenAPI 3.1 §4.8.1): the messages the service POSTs to a registered endpoint, so that a
 * receiver's types can be generated as a client's are. Standard Webhooks headers on each; any 2xx acknowledges.
 */
const HEADERS = [
  ['webhook-id', 'The message id (`msg_…`): the same on every attempt of a message and after a crash.'],
  ['webhook-timestamp', 'When this attempt was signed, in Unix seconds.'],
  [
    'webhook-signature',
    '`v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}">`, keyed by the secret after `whsec_`; ' +
      'two space-separated while a rotated-out secret still signs.',
  ],
].map(([name, description]) => ({ name, in: 'header', required: true, description, schema: { type: 'string' } }));

const ACKNOWLEDGED = {
  '2XX': { description: 'Received. Any other answer, no complete answer in time or a refused connection is retried.' },
};

function message(
  components: SchemaComponents,
  operationId: string,
  summary: string,
  body: z.ZodType,
): Record<string, JsonSchema> {
  return {
    post: {
      operationId,
      summary,
      tags: ['webhooks'],
      parameters: HEADERS,
      requestBody: { required: true, content: { 'application/json': { schema: components.of(body, 'output') } } },
      responses: ACKNOWLEDGED,
    },
  };
}

export function webhookMessages(components: SchemaComponents): Record<string, Record<string, JsonSchema>> {
  return {
    change: message(
      components,
      'receiveChange',
      'One change (an endpoint without `batch`), `type` its kind',
      WebhookChangeMessage,
    ),
    changes: message(
      components,
      'receiveChanges',
      'Up to `batch.maxChanges` changes of one database’s feed, in feed order (an endpoint with `batch`)',
      WebhookBatchMessage,
    ),
    'webhook.test': message(
      components,
      'receiveTestMessage',
      'The message `POST …/webhooks/{id}/test` queues',
      WebhookTestMessage,
    ),
  };
}
