import { grantAuthenticatedAt } from '../../identity/oauth/grants.ts';
import { DomainError } from '../../kernel/errors.ts';
import type { Context } from './context.ts';
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

/**
 * Security settings (sessions, two-factor, OAuth grants) change only from an interactive credential that proved
 * the user recently: a browser session within the step-up window, or an OAuth token (with `account:security`,
 * checked by the field) whose grant was consented to within that window. An API key never does, whatever its
 * access: a read-only key must not lock its owner out by enrolling two-factor (issue 19 §4).
 */
export async function requireSecurityCredential(context: Context): Promise<void> {
  const credential = requireCaller(context).credential;
  if (credential.type === 'api-key') {
    throw new DomainError(
      'ACCESS_DENIED',
      'Security settings change only from a browser session (or an OAuth token with account:security), not an API key.',
      {
        details: { reason: 'interactive_credential_required' },
      },
    );
  }
  if (credential.type === 'session') return requireFreshStrongAuth(context);
  const statement = grantAuthenticatedAt(credential.id);
  const [grant] = await context.prisma.$queryRawUnsafe<{ authenticated_at: Date }[]>(
    statement.sql,
    ...statement.params,
  );
  const ageSeconds = grant ? (Date.now() - grant.authenticated_at.getTime()) / 1000 : Infinity;
  if (ageSeconds > context.config.STEP_UP_WINDOW_SECONDS) {
    throw new DomainError(
      'STEP_UP_REQUIRED',
      'This application’s grant is too old to change security settings: authorize it again.',
      {
        details: { maxAgeSeconds: context.config.STEP_UP_WINDOW_SECONDS },
      },
    );
  }
}
