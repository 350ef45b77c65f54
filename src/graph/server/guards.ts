import { credentialRequired, DomainError, notFound } from '../../kernel/errors.ts';
import type { Context } from './context.ts';
import type { Capability, OAuthScope } from '../../kernel/authority.ts';
import { hasScope, type Caller, type OrgAuthority } from '../../kernel/caller.ts';

/**
 * The checks behind the auth scopes of builder.ts, usable directly where a resolver needs the result
 * (e.g. the caller's authority to compute `canEdit`). Each throws the DomainError that explains the refusal.
 */
export function requireCaller(context: Context): Caller {
  if (!context.caller) throw credentialRequired();
  return context.caller;
}

export function requirePersonalIdentity(context: Context): Caller & { userId: string } {
  const caller = requireCaller(context);
  if (caller.kind !== 'user' || caller.userId === null) {
    throw new DomainError(
      'PERSONAL_IDENTITY_REQUIRED',
      'This operation needs a credential that belongs to a person, not a team key.',
    );
  }
  return caller as Caller & { userId: string };
}

export function requireScope(context: Context, scope: OAuthScope): Caller {
  const caller = requireCaller(context);
  if (!hasScope(caller, scope)) {
    throw new DomainError('INSUFFICIENT_SCOPE', `The credential lacks the scope ${scope}.`, {
      details: { requiredScope: scope },
    });
  }
  return caller;
}

/** An org the caller cannot reach answers 404, never 403: its existence is not disclosed (DESIGN §3). */
export function requireOrg(context: Context, orgId: string): OrgAuthority {
  const authority = requireCaller(context).orgs.get(orgId);
  if (!authority) throw notFound('organisation');
  return authority;
}

export function requireCapability(context: Context, orgId: string, capability: Capability): OrgAuthority {
  const authority = requireOrg(context, orgId);
  if (!authority.capabilities.has(capability)) {
    throw new DomainError('FORBIDDEN', `Your current authority in this organisation does not include ${capability}.`, {
      details: { requiredCapability: capability },
    });
  }
  return authority;
}
