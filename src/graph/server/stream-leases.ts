import type { OAuthScope } from '../../kernel/authority.ts';
import { DomainError } from '../../kernel/errors.ts';
import type { StreamLease } from '../../kernel/stream-limits.ts';
import type { Context } from './context.ts';

/** The error a stream of `orgId` ends with once its caller may no longer read it (or lost `scope`); null while it may. */
async function authorityLost(context: Context, orgId: string, scope: OAuthScope): Promise<DomainError | null> {
  let caller;
  try {
    caller = await context.resolveCallerAgain();
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  if (!caller) return new DomainError('UNAUTHENTICATED', 'The credential of this stream is no longer valid.');
  if (!caller.orgs.get(orgId)?.capabilities.has('read')) {
    return new DomainError(
      'ACCESS_DENIED',
      'The caller of this stream is no longer a member who may read this organisation.',
    );
  }
  if (caller.scopes !== 'all' && !caller.scopes.has(scope)) {
    return new DomainError('INSUFFICIENT_SCOPE', `The token of this stream no longer carries ${scope}.`, {
      details: { requiredScope: scope },
    });
  }
  return null;
}

/**
 * A lease on one of the caller's open streams in `orgId` (job events, change feeds, long polls): counted against the
 * per-credential and per-org caps (429 beyond), and revoked when the caller may no longer read `orgId` with `scope`.
 * `onRevoked` wakes the stream so that it ends with `lease.revoked`.
 */
export function acquireStream(
  context: Context,
  orgId: string,
  scope: OAuthScope,
  onRevoked: () => void,
): Promise<StreamLease> {
  const credential = context.caller!.credential;
  return context.streams.acquire(
    `${credential.type}:${credential.id}`,
    orgId,
    () => authorityLost(context, orgId, scope),
    onRevoked,
  );
}
