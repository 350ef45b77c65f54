import { z } from 'zod';
import { OAUTH_SCOPES } from '../../kernel/authority.ts';
import { LoginBody, StepUpBody } from '../../identity/login.ts';
import { VerifyEmailBody } from '../../identity/email-verification.ts';
import { CSRF_HEADER, SESSION_COOKIE } from '../../identity/session-tokens.ts';
import type { JsonSchema, SchemaComponents } from './json-schema.ts';
import { errorResponses } from './responses.ts';

/**
 * The routes that are plain handlers rather than route declarations (src/http/session-routes.ts,
 * src/http/oauth-routes.ts), described by hand from the zod schemas they parse with. The OAuth ones speak RFC 6749's
 * formats: form bodies, `{error, error_description}` and 303 redirects back to the client.
 */
const Timestamp = z.string().describe('UTC, YYYY-MM-DDTHH:MM:SS.mmmZ');
const IssuedSession = z.strictObject({
  session: z.strictObject({ id: z.string(), createdAt: Timestamp, expiresAt: Timestamp }),
  csrfToken: z.string().describe(`Send it as ${CSRF_HEADER} with every change the session makes`),
});
const StepUpResult = z.strictObject({ strongAuthAt: Timestamp });
const VerifiedEmail = z.strictObject({ email: z.string(), verified: z.literal(true) });

const AuthorizeParams = z.object({
  response_type: z.literal('code'),
  client_id: z.string(),
  redirect_uri: z.string(),
  scope: z.string().describe(`Space-separated: ${OAUTH_SCOPES.join(' ')}`),
  state: z.string().optional(),
  code_challenge: z.string().describe('RFC 7636 PKCE, S256'),
  code_challenge_method: z.literal('S256'),
  resource: z.string().optional(),
});
const Decision = AuthorizeParams.extend({
  decision: z.enum(['approve', 'deny']),
  csrf_token: z.string().optional().describe(`The session's CSRF token, when not sent as ${CSRF_HEADER}`),
});
const ConsentRequest = z.strictObject({
  client: z.strictObject({ id: z.string(), name: z.string() }),
  redirectUri: z.string(),
  scopes: z.array(z.enum(OAUTH_SCOPES)),
  state: z.string().nullable(),
});
const TokenRequest = z.object({
  grant_type: z.enum(['authorization_code', 'refresh_token']),
  code: z.string().optional(),
  redirect_uri: z.string().optional(),
  code_verifier: z.string().optional(),
  refresh_token: z.string().optional(),
  scope: z.string().optional(),
  client_id: z.string().optional().describe('With client_secret, when not sent as HTTP Basic credentials'),
  client_secret: z.string().optional(),
});
const TokenResponse = z.strictObject({
  access_token: z.string(),
  token_type: z.literal('Bearer'),
  expires_in: z.number().int(),
  refresh_token: z.string(),
  scope: z.string(),
});
const RevokeRequest = z.object({
  token: z.string(),
  token_type_hint: z.enum(['access_token', 'refresh_token']).optional(),
});
export const OAuthErrorBody = z.strictObject({
  error: z.enum([
    'invalid_request',
    'invalid_client',
    'invalid_grant',
    'unauthorized_client',
    'unsupported_grant_type',
    'invalid_scope',
    'access_denied',
    'unsupported_response_type',
    'invalid_target',
  ]),
  error_description: z.string(),
});

const json = (schema: JsonSchema) => ({ 'application/json': { schema } });
const form = (schema: JsonSchema) => ({ 'application/x-www-form-urlencoded': { schema } });
const oauthError = (description: string) => ({
  description,
  content: json({ $ref: '#/components/schemas/OAuthError' }),
});
const redirect = {
  description:
    'Back to the client’s redirect_uri with `code` and `state`, or with `error`; the body only names the address.',
  headers: { Location: { required: true, schema: { type: 'string' } } },
  content: { 'text/plain': { schema: { type: 'string' } }, 'text/html': { schema: { type: 'string' } } },
};
const basic = { clientBasic: [] };

export function handWrittenPaths(components: SchemaComponents): Record<string, Record<string, JsonSchema>> {
  const query = (schema: z.ZodObject) =>
    Object.entries(schema.shape).map(([name, item]) => ({
      name,
      in: 'query',
      required: !(item as z.ZodType).safeParse(undefined).success,
      schema: components.of(item as z.ZodType, 'input'),
    }));
  return {
    '/v1/auth/login': {
      post: {
        operationId: 'Login',
        tags: ['auth'],
        summary: 'Sign in: starts a browser session (cookie) and returns its CSRF token',
        security: [{}],
        requestBody: { required: true, content: json(components.of(LoginBody, 'input')) },
        responses: {
          201: {
            description: 'Signed in',
            headers: {
              'Set-Cookie': {
                required: true,
                description: `${SESSION_COOKIE}, HttpOnly, Secure, SameSite=Strict`,
                schema: { type: 'string' },
              },
            },
            content: json(components.of(IssuedSession, 'output')),
          },
          ...errorResponses([400, 401, 408, 413, 415, 422, 429, 431, 500, 503]),
        },
      },
    },
    '/v1/auth/step-up': {
      post: {
        operationId: 'StepUp',
        tags: ['auth'],
        summary: 'Proves the password again, for sensitive changes (STEP_UP_REQUIRED)',
        security: [{ session: [] }],
        parameters: [{ name: CSRF_HEADER, in: 'header', required: true, schema: { type: 'string' } }],
        requestBody: { required: true, content: json(components.of(StepUpBody, 'input')) },
        responses: {
          200: { description: 'Strong authentication renewed', content: json(components.of(StepUpResult, 'output')) },
          ...errorResponses([400, 401, 403, 408, 413, 415, 422, 429, 431, 500, 503]),
        },
      },
    },
    '/v1/auth/verify-email': {
      post: {
        operationId: 'VerifyEmail',
        tags: ['auth'],
        summary: 'Spends a mailbox verification token; the token is the proof, so no credential',
        security: [{}],
        requestBody: { required: true, content: json(components.of(VerifyEmailBody, 'input')) },
        responses: {
          200: { description: 'The account is verified', content: json(components.of(VerifiedEmail, 'output')) },
          ...errorResponses([400, 404, 408, 413, 415, 422, 429, 431, 500, 503]),
        },
      },
    },
    '/v1/openapi.json': {
      get: {
        operationId: 'OpenApiDocument',
        tags: ['meta'],
        summary: 'This OpenAPI 3.1 document',
        security: [{}],
        responses: {
          200: { description: 'The document', content: json({ type: 'object', required: ['openapi', 'paths'] }) },
          ...errorResponses([429, 431, 500, 503]),
        },
      },
    },
    '/oauth/authorize': {
      get: {
        operationId: 'DescribeAuthorization',
        tags: ['oauth'],
        summary: 'Describes an authorization request for the consent screen',
        security: [{ session: [] }],
        parameters: query(AuthorizeParams),
        responses: {
          200: {
            description: 'What the user is asked to approve',
            content: json(components.of(ConsentRequest, 'output')),
          },
          303: redirect,
          400: oauthError('Invalid client or redirect URI (never redirected)'),
          ...errorResponses([401, 429, 431, 500, 503]),
        },
      },
      post: {
        operationId: 'DecideAuthorization',
        tags: ['oauth'],
        summary: 'The user approves or denies; redirects back to the client',
        security: [{ session: [] }],
        requestBody: {
          required: true,
          content: { ...form(components.of(Decision, 'input')), ...json(components.of(Decision, 'input')) },
        },
        responses: {
          303: redirect,
          400: oauthError('Invalid client or redirect URI (never redirected)'),
          ...errorResponses([401, 403, 408, 413, 429, 431, 500, 503]),
        },
      },
    },
    '/oauth/token': {
      post: {
        operationId: 'Token',
        tags: ['oauth'],
        summary: 'RFC 6749 token endpoint: authorization code (with PKCE) or refresh token',
        security: [basic, {}],
        requestBody: { required: true, content: form(components.of(TokenRequest, 'input')) },
        responses: {
          200: { description: 'Tokens', content: json(components.of(TokenResponse, 'output')) },
          400: oauthError('RFC 6749 §5.2 error'),
          401: {
            ...oauthError('invalid_client'),
            headers: { 'WWW-Authenticate': { required: true, schema: { type: 'string' } } },
          },
          ...errorResponses([408, 413, 429, 431, 500, 503]),
        },
      },
    },
    '/oauth/revoke': {
      post: {
        operationId: 'RevokeToken',
        tags: ['oauth'],
        summary: 'RFC 7009 token revocation',
        security: [basic, {}],
        requestBody: { required: true, content: form(components.of(RevokeRequest, 'input')) },
        responses: {
          200: { description: 'Revoked, or the token was unknown (RFC 7009 §2.2)' },
          400: oauthError('RFC 6749 §5.2 error'),
          401: {
            ...oauthError('invalid_client'),
            headers: { 'WWW-Authenticate': { required: true, schema: { type: 'string' } } },
          },
          ...errorResponses([408, 413, 429, 431, 500, 503]),
        },
      },
    },
  };
}
