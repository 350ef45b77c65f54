import { z } from 'zod';
import type { Config } from '../kernel/config.ts';
import type { PrismaClient } from '../db/prisma.ts';
import { DomainError } from '../kernel/errors.ts';
import { newId } from '../kernel/ids.ts';
import { Email } from '../kernel/formats.ts';
import { verifyPassword } from './passwords.ts';
import { issueSessionSecrets } from './session-tokens.ts';
import { consumeTotp } from './totp.ts';
import { clearFailures, countAttempt } from './attempts.ts';

/**
 * Password login and step-up: the decisions behind `POST /v1/auth/login` and `POST /v1/auth/step-up`, which are
 * plain HTTP handlers (they set a cookie; there is no caller yet to scope an Idempotency-Key to).
 */
export const LoginBody = z.strictObject({
  email: Email,
  password: z.string().min(1).max(256),
  totp: z.string().max(16).optional(),
});
export const StepUpBody = z.strictObject({ password: z.string().min(1).max(256), totp: z.string().max(16).optional() });

export interface IssuedSession {
  /** For the Set-Cookie header only. */
  token: string;
  body: { session: { id: string; createdAt: string; expiresAt: string }; csrfToken: string };
  maxAgeSeconds: number;
}

interface LoginUser {
  id: string;
  passwordHash: string | null;
  twoFactorEnabled: boolean;
  totpSecret: string | null;
}

const REFUSED = 'The e-mail address, password or two-factor code is not right.';

/** Exponential backoff: the threshold-th failure locks for the base time, each further one doubles it, up to the cap (attempts.ts applies it in SQL). */
export function lockDurationSeconds(
  failures: number,
  config: Pick<Config, 'LOGIN_LOCKOUT_THRESHOLD' | 'LOGIN_LOCKOUT_BASE_SECONDS' | 'LOGIN_LOCKOUT_MAX_SECONDS'>,
): number {
  if (failures < config.LOGIN_LOCKOUT_THRESHOLD) return 0;
  const doublings = Math.min(failures - config.LOGIN_LOCKOUT_THRESHOLD, 20);
  return Math.min(config.LOGIN_LOCKOUT_BASE_SECONDS * 2 ** doublings, config.LOGIN_LOCKOUT_MAX_SECONDS);
}

/**
 * Password, then TOTP when enrolled. The attempt is counted before either is checked (attempts.ts), every refusal
 * is the same 401 whichever factor failed (a right password without its code must not confirm the password), and
 * unknown addresses take as long as known ones.
 */
async function checkSecrets(
  prisma: PrismaClient,
  config: Config,
  user: LoginUser | null,
  password: string,
  totp: string | undefined,
): Promise<LoginUser> {
  if (!user) {
    await verifyPassword(password, null);
    throw new DomainError('UNAUTHENTICATED', REFUSED);
  }
  await countAttempt(prisma, config, user.id);
  const passwordOk = await verifyPassword(password, user.passwordHash);
  // The code is only consumed after the right password, so a wrong password cannot burn the current step.
  const totpOk =
    !user.twoFactorEnabled ||
    (passwordOk &&
      totp !== undefined &&
      user.totpSecret !== null &&
      (await consumeTotp(prisma, user.id, user.totpSecret, totp)));
  if (!passwordOk || !totpOk) throw new DomainError('UNAUTHENTICATED', REFUSED);
  await clearFailures(prisma, user.id);
  return user;
}

const loginSelect = { id: true, passwordHash: true, twoFactorEnabled: true, totpSecret: true } as const;

export async function login(
  prisma: PrismaClient,
  config: Config,
  body: z.infer<typeof LoginBody>,
  userAgent: string | undefined,
): Promise<IssuedSession> {
  const user = await prisma.user.findUnique({ where: { email: body.email }, select: loginSelect });
  const { id: userId } = await checkSecrets(prisma, config, user, body.password, body.totp);
  const secrets = issueSessionSecrets();
  const maxAgeSeconds = config.SESSION_TTL_HOURS * 3600;
  const session = await prisma.session.create({
    data: {
      id: newId(),
      userId,
      tokenHash: secrets.tokenHash,
      csrfTokenHash: secrets.csrfTokenHash,
      userAgent: userAgent?.slice(0, 512) ?? null,
      expiresAt: new Date(Date.now() + maxAgeSeconds * 1000),
    },
    select: { id: true, createdAt: true, expiresAt: true },
  });
  return {
    token: secrets.token,
    maxAgeSeconds,
    body: {
      session: {
        id: session.id,
        createdAt: session.createdAt.toISOString(),
        expiresAt: session.expiresAt.toISOString(),
      },
      csrfToken: secrets.csrfToken,
    },
  };
}

/** Proves the password (and TOTP) again for a live session, so that sensitive operations pass STEP_UP_REQUIRED. */
export async function stepUp(
  prisma: PrismaClient,
  config: Config,
  session: { id: string; userId: string },
  body: z.infer<typeof StepUpBody>,
): Promise<{ strongAuthAt: string }> {
  const user = await prisma.user.findUniqueOrThrow({ where: { id: session.userId }, select: loginSelect });
  await checkSecrets(prisma, config, user, body.password, body.totp);
  const updated = await prisma.session.update({
    where: { id: session.id },
    data: { strongAuthAt: new Date() },
    select: { strongAuthAt: true },
  });
  return { strongAuthAt: updated.strongAuthAt.toISOString() };
}
