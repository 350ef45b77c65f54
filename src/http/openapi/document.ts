import type { GraphQLSchema } from 'graphql';
import { z } from 'zod';
import { CONTENT_TYPES } from '../../jobs/kinds/exports/file-formats.ts';
import { OAUTH_SCOPES } from '../../kernel/authority.ts';
import { SESSION_COOKIE } from '../../identity/session-tokens.ts';
import { schema as graphSchema } from '../../graph/schema.ts';
import { handWrittenPaths, OAuthErrorBody } from './hand-written.ts';
import { SchemaComponents, type JsonSchema } from './json-schema.ts';
import { errorResponseComponents, errorResponsesOf, HEADERS } from './responses.ts';
import { authorityOf, securityOf } from './security.ts';
import { ErrorEnvelope } from '../../contracts/responses.ts';
import { jsonQueryContents } from '../../contracts/pages.ts';
import type { Route } from '../rest/route.ts';
import { webhookMessages } from './webhooks.ts';

/** The parsed value of a JSON query parameter (`where`, `orderBy`), optional or not; undefined for plain ones. */
function jsonContentOf(schema: z.ZodType): z.ZodType | undefined {
  return jsonQueryContents.get(schema instanceof z.ZodOptional ? (schema.unwrap() as z.ZodType) : schema);
}

function parametersOf(route: Route, components: SchemaComponents): JsonSchema[] {
  const fromShape = (shape: z.ZodObject | undefined, location: 'path' | 'query') =>
    Object.entries(shape?.shape ?? {}).map(([name, schema]) => {
      const required = location === 'path' || !(schema as z.ZodType).safeParse(undefined).success;
      const json = jsonContentOf(schema as z.ZodType);
      // OpenAPI 3.1 §4.8.12: a parameter whose value is a serialized JSON document is described by `content`, so
      // that generators type it with its schema (FilterExpression) instead of as a bare string.
      if (json) {
        const { description } = schema as z.ZodType;
        return {
          name,
          in: location,
          required,
          ...(description ? { description } : {}),
          content: { 'application/json': { schema: components.of(json, 'input') } },
        };
      }
      return { name, in: location, required, schema: components.of(schema as z.ZodType, 'input') };
    });
  const idempotencyKey = route.idempotent
    ? [
        {
          name: 'Idempotency-Key',
          in: 'header',
          required: true,
          schema: { type: 'string', minLength: 8, maxLength: 255 },
        },
      ]
    : [];
  return [...fromShape(route.params, 'path'), ...fromShape(route.query, 'query'), ...idempotencyKey];
}

/**
 * What an artifact download can be: export files by format, a database archive, import reports and uploads. Listed
 * by media type so that generated clients read the bytes as text or a blob instead of JSON-parsing a CSV.
 */
const DOWNLOAD_CONTENT: Record<string, JsonSchema> = {
  [CONTENT_TYPES.csv]: { schema: { type: 'string' } },
  [CONTENT_TYPES.jsonl]: { schema: { type: 'string', description: 'One JSON document per line.' } },
  [CONTENT_TYPES.xlsx]: { schema: { type: 'string', contentEncoding: 'binary' } },
  'application/zip': {
    schema: { type: 'string', contentEncoding: 'binary', description: 'A database export: one file per table.' },
  },
};

function successOf(route: Route, components: SchemaComponents): JsonSchema {
  const requestId = { 'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' } };
  if (route.file) {
    return {
      description: 'The file itself, with its own content type.',
      headers: {
        ...requestId,
        'Content-Digest': { description: 'RFC 9530 sha-256 of the body.', required: true, schema: { type: 'string' } },
      },
      content: DOWNLOAD_CONTENT,
    };
  }
  if (route.stream) {
    return {
      description:
        'Server-sent events: each `data:` line is one JSON event (x-event-schema); `event: error` carries the ' +
        'error envelope and ends the stream; `:` comment lines are heartbeats. The stream closes after the last event.',
      headers: requestId,
      content: {
        'text/event-stream': { schema: { type: 'string' }, 'x-event-schema': components.of(route.response, 'output') },
      },
    };
  }
  const json = { 'application/json': { schema: components.of(route.response, 'output') } };
  if (route.eventStream) {
    return {
      description:
        'JSON; or, when `Accept` names `text/event-stream`, server-sent events: one `data:` line per event ' +
        '(x-event-schema) with `id:` = its cursor (a reconnect with `Last-Event-ID` resumes after it), `event: error` ' +
        'frames as for job events, `:` heartbeats.',
      headers: requestId,
      content: {
        ...json,
        'text/event-stream': {
          schema: { type: 'string' },
          'x-event-schema': components.of(route.eventStream.response, 'output'),
        },
      },
    };
  }
  const shape = (route.response as Partial<z.ZodObject>).shape;
  const location =
    route.successStatus === 202 && shape && 'statusUrl' in shape
      ? {
          Location: {
            description: 'The accepted job’s status address (the body’s `statusUrl`).',
            required: true,
            schema: { type: 'string' },
          },
        }
      : {};
  return { description: 'Success', headers: { ...requestId, ...location }, content: json };
}

/**
 * The GraphQL operation's name; a second route running the same operation (POST …/rows/query runs ListRows) adds
 * its last path segment, since generators need unique ids.
 */
function operationIdOf(route: Route, taken: Set<string>): string {
  const definition = route.operation.definitions.find((d) => d.kind === 'OperationDefinition');
  const name = (definition && 'name' in definition ? definition.name?.value : undefined) ?? 'Operation';
  const segment =
    route.path
      .split('/')
      .filter((part) => part && !part.startsWith('{'))
      .at(-1) ?? '';
  const id = taken.has(name)
    ? `${name}${segment.replace(/(^|-)(\w)/g, (_m, _dash, letter: string) => letter.toUpperCase())}`
    : name;
  if (taken.has(id)) throw new Error(`${route.method} ${route.path}: operationId ${id} is taken`);
  taken.add(id);
  return id;
}

function operationOf(
  route: Route,
  components: SchemaComponents,
  schema: GraphQLSchema,
  operationIds: Set<string>,
): JsonSchema {
  const authority = authorityOf(route, schema);
  const scopeNote =
    authority.scopes.length > 0
      ? `OAuth scope: ${authority.scopes.map((scope) => `\`${scope}\``).join(' or ')}${authority.alsoRequired.map((scope) => ` and \`${scope}\``).join('')}.`
      : 'No OAuth scope needed.';
  return {
    operationId: operationIdOf(route, operationIds),
    summary: route.summary,
    description: `${scopeNote} Runs the GraphQL field \`${authority.field}\`.`,
    tags: route.tags,
    parameters: parametersOf(route, components),
    ...(route.body
      ? {
          requestBody: {
            required: true,
            content: { 'application/json': { schema: components.of(route.body, 'input') } },
          },
        }
      : {}),
    responses: { [String(route.successStatus)]: successOf(route, components), ...errorResponsesOf(route, authority) },
    security: securityOf(authority),
  };
}

/**
 * The OpenAPI 3.1 document of /v1, generated from the same route declarations and zod schemas that validate.
 * Every `$ref` points into `components`; each operation lists its error statuses and the OAuth scope of the
 * GraphQL field it runs.
 */
export function openApiDocument(routes: readonly Route[], schema: GraphQLSchema = graphSchema): JsonSchema {
  const components = new SchemaComponents({ Error: ErrorEnvelope, OAuthError: OAuthErrorBody });
  const paths: Record<string, Record<string, JsonSchema>> = handWrittenPaths(components);
  const operationIds = new Set<string>();
  for (const route of routes) {
    paths[route.path] = {
      ...paths[route.path],
      [route.method.toLowerCase()]: operationOf(route, components, schema, operationIds),
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Workspace Data Service', version: '0.2.2' },
    // Relative to where this document is served: the service that serves it answers its paths.
    servers: [{ url: '/', description: 'The service serving this document' }],
    paths,
    webhooks: webhookMessages(components),
    components: {
      schemas: components.schemas,
      responses: errorResponseComponents(),
      headers: HEADERS,
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'Personal or team API key' },
        clientBasic: {
          type: 'http',
          scheme: 'basic',
          description: 'An OAuth client’s id and secret (RFC 6749 §2.3.1)',
        },
        session: {
          type: 'apiKey',
          in: 'cookie',
          name: SESSION_COOKIE,
          description: 'Browser session from POST /v1/auth/login; changes also need its X-CSRF-Token header.',
        },
        oauth: {
          type: 'oauth2',
          flows: {
            authorizationCode: {
              authorizationUrl: '/oauth/authorize',
              tokenUrl: '/oauth/token',
              refreshUrl: '/oauth/token',
              scopes: Object.fromEntries(OAUTH_SCOPES.map((scope) => [scope, scope])),
            },
          },
        },
      },
    },
  };
}
