import type { GraphQLSchema } from 'graphql';
import type { OAuthScope } from '../../kernel/authority.ts';
import type { Route } from '../rest/route.ts';

/** What the GraphQL field a route runs demands of its caller, read from the field's Pothos `authScopes`. */
export interface FieldAuthority {
  field: string;
  /** Alternatives: any one of these OAuth scopes lets an OAuth token through. Empty: no scope is needed. */
  scopes: OAuthScope[];
  /** Scopes an OAuth token needs besides one of `scopes` (a webhook's writes also need `rows:read`). */
  alsoRequired: OAuthScope[];
  /** A caller may present no credential at all. */
  anonymous: boolean;
  /** A refusal for authority, identity or scope (403) is possible. */
  mayForbid: boolean;
}

/**
 * The two fields that check their scope inside the resolver, because it depends on the request: a member renaming
 * themself needs `profile:manage`, anything else `members:manage` (src/graph/members/members.ts); accepting an invitation
 * needs no credential, and a caller who presents one needs `profile:manage` (src/graph/invitations/invitations.ts).
 * test/openapi-document.test.ts compares every route's scopes with test/helpers/scope-table.ts.
 */
const CHECKED_IN_RESOLVER: Record<string, Omit<FieldAuthority, 'field'>> = {
  updateMember: { scopes: ['members:manage', 'profile:manage'], alsoRequired: [], anonymous: false, mayForbid: true },
  acceptInvitation: { scopes: ['profile:manage'], alsoRequired: [], anonymous: true, mayForbid: true },
};

interface AuthScopeMap {
  authenticated?: boolean;
  personal?: boolean;
  org?: unknown;
  oauth?: OAuthScope;
  /** Pothos' compound scope: every scope in it is needed too. */
  $all?: { oauth?: OAuthScope };
}

export function rootFieldOf(route: Route): string {
  for (const definition of route.operation.definitions) {
    if (definition.kind !== 'OperationDefinition') continue;
    const [selection] = definition.selectionSet.selections;
    if (selection?.kind === 'Field') return selection.name.value;
  }
  throw new Error(`${route.method} ${route.path}: its operation selects no root field`);
}

export function authorityOf(route: Route, schema: GraphQLSchema): FieldAuthority {
  const field = rootFieldOf(route);
  if (CHECKED_IN_RESOLVER[field]) return { field, ...CHECKED_IN_RESOLVER[field] };
  const definition =
    schema.getQueryType()?.getFields()[field] ??
    schema.getMutationType()?.getFields()[field] ??
    schema.getSubscriptionType()?.getFields()[field];
  if (!definition) throw new Error(`${route.method} ${route.path}: no root field ${field}`);
  const declared = (definition.extensions as { pothosOptions?: { authScopes?: unknown } }).pothosOptions?.authScopes;
  // Every field's loader reads only its arguments (the org to check); the scope it names does not depend on them.
  const scopes = (
    typeof declared === 'function' ? declared(undefined, { orgId: '' }, undefined, undefined) : declared
  ) as AuthScopeMap | undefined;
  return {
    field,
    scopes: scopes?.oauth ? [scopes.oauth] : [],
    alsoRequired: scopes?.$all?.oauth ? [scopes.$all.oauth] : [],
    anonymous: scopes === undefined,
    mayForbid: Boolean(scopes?.oauth || scopes?.personal || scopes?.org) || route.idempotent,
  };
}

/**
 * Security requirements are alternatives: an API key, a browser session, or an OAuth token with one of the scopes
 * (and every scope of `alsoRequired`: the scopes of one requirement are all needed, OpenAPI 3.1 §4.8.30).
 */
export function securityOf(authority: FieldAuthority): Record<string, string[]>[] {
  const oauth =
    authority.scopes.length === 0
      ? [{ oauth: [] }]
      : authority.scopes.map((scope) => ({ oauth: [scope, ...authority.alsoRequired] }));
  return [...(authority.anonymous ? [{}] : []), { apiKey: [] }, { session: [] }, ...oauth];
}
