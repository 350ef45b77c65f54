import { DomainError } from '../../errors.ts';
import type { Context } from '../context.ts';
import { requireCaller } from './guards.ts';

/**
 * Sensitive operations (creating keys, changing roles) from a browser session need a recent strong
 * authentication: password (and TOTP when enrolled) within STEP_UP_WINDOW_SECONDS. API keys and OAuth tokens
 * are not sessions: their holder authenticated when the credential was issued.
 */
export function requireFreshStrongAuth(context: Context): void {
  const session = requireCaller(context).credential.session;
  if (!session) return;
  const ageSeconds = (Date.now() - session.strongAuthAt.getTime()) / 1000;
  if (ageSeconds > context.config.STEP_UP_WINDOW_SECONDS) {
    throw new DomainError('STEP_UP_REQUIRED', 'Confirm your password (POST /v1/auth/step-up) before this operation.', {
      details: { maxAgeSeconds: context.config.STEP_UP_WINDOW_SECONDS },
    });
  }
}
