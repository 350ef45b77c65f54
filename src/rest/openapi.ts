import { z } from 'zod';
import { OAUTH_SCOPES } from '../graph/auth/authority.ts';
import { ErrorEnvelope } from './routes/formats.ts';
import type { Route } from './route.ts';

type JsonSchema = Record<string, unknown>;

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as JsonSchema;
  return rest;
}

function parametersOf(route: Route): JsonSchema[] {
  const fromShape = (shape: z.ZodObject | undefined, location: 'path' | 'query') =>
    Object.entries(shape?.shape ?? {}).map(([name, schema]) => ({
      name,
      in: location,
      required: location === 'path' || !(schema as z.ZodType).safeParse(undefined).success,
      schema: jsonSchema(schema as z.ZodType, 'input'),
    }));
  const idempotencyKey = route.idempotent
    ? [{ name: 'Idempotency-Key', in: 'header', required: true, schema: { type: 'string', minLength: 8, maxLength: 255 } }]
    : [];
  return [...fromShape(route.params, 'path'), ...fromShape(route.query, 'query'), ...idempotencyKey];
}

function operationOf(route: Route): JsonSchema {
  const operationName = route.operation.definitions.find((d) => d.kind === 'OperationDefinition');
  return {
    operationId: operationName && 'name' in operationName ? operationName.name?.value : undefined,
    summary: route.summary,
    tags: route.tags,
    parameters: parametersOf(route),
    ...(route.body
      ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(route.body, 'input') } } } }
      : {}),
    responses: {
      [String(route.successStatus)]: { description: 'Success', content: { 'application/json': { schema: jsonSchema(route.response, 'output') } } },
      default: { description: 'Error (spec §7)', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
    },
    security: [{ apiKey: [] }, { oauth: [] }],
  };
}

/** The OpenAPI 3.1 document of /v1, generated from the same route declarations and zod schemas that validate. */
export function openApiDocument(routes: readonly Route[]): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const route of routes) {
    paths[route.path] = { ...paths[route.path], [route.method.toLowerCase()]: operationOf(route) };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Workspace Data Service', version: '0.2.2' },
    paths,
    components: {
      schemas: { Error: jsonSchema(ErrorEnvelope, 'output') },
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'Personal or team API key' },
        oauth: {
          type: 'oauth2',
          flows: {
            authorizationCode: {
              authorizationUrl: '/oauth/authorize',
              tokenUrl: '/oauth/token',
              scopes: Object.fromEntries(OAUTH_SCOPES.map((scope) => [scope, scope])),
            },
          },
        },
      },
    },
  };
}
