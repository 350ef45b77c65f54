import SchemaBuilder from '@pothos/core';
import PrismaPlugin from '@pothos/plugin-prisma';
import ScopeAuthPlugin from '@pothos/plugin-scope-auth';
import ValidationPlugin from '@pothos/plugin-validation';
import type PrismaTypes from '../../generated/pothos-types.ts';
import { getDatamodel } from '../../generated/pothos-types.ts';
import { DomainError } from '../../kernel/errors.ts';
import type { Capability, OAuthScope } from '../../kernel/authority.ts';
import type { Caller } from '../../kernel/caller.ts';
import { credentialRequired } from '../../kernel/errors.ts';
import { requireCapability, requireCaller, requirePersonalIdentity, requireScope } from './guards.ts';
import type { Context } from './context.ts';
import { problemsFromIssues } from '../../kernel/validation.ts';

/** Configuration only (Pothos app-layout guide): plugins, context and auth scopes. Types live in domain files. */
export interface OrgScope {
  orgId: string;
  capability: Capability;
}

export const builder = new SchemaBuilder<{
  Context: Context;
  DefaultFieldNullability: false;
  DefaultAuthStrategy: 'all';
  PrismaTypes: PrismaTypes;
  Scalars: { Timestamp: { Input: Date; Output: Date | string }; JSON: { Input: unknown; Output: unknown } };
  AuthScopes: { authenticated: boolean; personal: boolean; org: OrgScope; oauth: OAuthScope };
  AuthContexts: {
    authenticated: Context & { caller: Caller };
    personal: Context & { caller: Caller & { userId: string } };
    org: Context & { caller: Caller };
    oauth: Context & { caller: Caller };
  };
}>({
  // Scope-auth runs first so no other plugin sees an unauthorized request (Pothos docs).
  plugins: [ScopeAuthPlugin, ValidationPlugin, PrismaPlugin],
  defaultFieldNullability: false,
  scopeAuth: {
    defaultStrategy: 'all',
    // A subscription is refused when it is opened (REST answers that refusal as a plain 401/403/404), not as the
    // first event of a stream that then ends; its events follow the authority checked then (one call, one check).
    authorizeOnSubscribe: true,
    // Loaders throw DomainErrors so that the client learns exactly which rule refused it:
    // 401 no credential, 404 an org it may not know about, 403 too little authority or scope.
    authScopes: (context) => ({
      authenticated: () => Boolean(requireCaller(context)),
      personal: () => Boolean(requirePersonalIdentity(context)),
      org: ({ orgId, capability }) => Boolean(requireCapability(context, orgId, capability)),
      oauth: (scope) => Boolean(requireScope(context, scope)),
    }),
    unauthorizedError: (_parent, context) =>
      context.caller ? new DomainError('FORBIDDEN', 'Your current role does not allow this.') : credentialRequired(),
  },
  validation: {
    validationError: (result) =>
      new DomainError('VALIDATION_FAILED', 'The request did not pass validation.', {
        details: { problems: problemsFromIssues(result.issues) },
      }),
  },
  prisma: {
    client: (context) => context.prisma,
    dmmf: getDatamodel(),
    exposeDescriptions: true,
    filterConnectionTotalCount: true,
    onUnusedQuery: process.env.NODE_ENV === 'production' ? null : 'warn',
  },
});

builder.queryType({});
builder.mutationType({});
builder.subscriptionType({});
