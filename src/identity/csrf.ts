import { DomainError } from '../kernel/errors.ts';
import type { Caller } from '../kernel/caller.ts';

const CSRF_REFUSAL = 'Cookie-authenticated changes need the session’s X-CSRF-Token header.';

/**
 * The one CSRF rule: a change made with a browser session must carry the session's CSRF token (double submit,
 * X-CSRF-Token), which a cross-site page cannot read. Bearer credentials are not sent by browsers on their own, so
 * they need none. Mutations (src/idempotency/run.ts), step-up and OAuth consent all pass here.
 */
export function requireCsrfProof(caller: Caller, message = CSRF_REFUSAL): void {
  if (caller.credential.session && !caller.credential.session.csrfVerified) {
    throw new DomainError('ACCESS_DENIED', message, { details: { reason: 'csrf_token_mismatch' } });
  }
}
