import type { Config } from '../kernel/config.ts';
import type { PrismaClient, TransactionClient } from '../db/prisma.ts';
import { DomainError } from '../kernel/errors.ts';

type LockoutConfig = Pick<
  Config,
  'LOGIN_LOCKOUT_THRESHOLD' | 'LOGIN_LOCKOUT_BASE_SECONDS' | 'LOGIN_LOCKOUT_MAX_SECONDS'
>;

/**
 * One lockout for every check of a user's secrets: password logins, step-up and TOTP codes at two-factor
 * confirm and disable. An attempt is counted *before* the secret is checked, in one UPDATE that also sets the
 * lock when the count reaches the threshold, so concurrent guesses serialise on the user's row: with a threshold
 * of 5, 25 parallel wrong passwords get five 401s and twenty 429s (before, all 25 were checked, then locked).
 * A success clears the count (`clearFailures`).
 */
export async function countAttempt(
  db: PrismaClient | TransactionClient,
  config: LockoutConfig,
  userId: string,
): Promise<void> {
  const counted = await db.$queryRaw<{ failed_logins: number }[]>`
    UPDATE users
       SET failed_logins = failed_logins + 1,
           locked_until = CASE WHEN failed_logins + 1 >= ${config.LOGIN_LOCKOUT_THRESHOLD}::int
             THEN now() + make_interval(secs => LEAST(${config.LOGIN_LOCKOUT_BASE_SECONDS}::int * power(2, LEAST(failed_logins + 1 - ${config.LOGIN_LOCKOUT_THRESHOLD}::int, 20)), ${config.LOGIN_LOCKOUT_MAX_SECONDS}::int))
             ELSE locked_until END
     WHERE id = ${userId}::bpchar AND (locked_until IS NULL OR locked_until <= now())
     RETURNING failed_logins`;
  if (counted.length > 0) return;
  const [row] = await db.$queryRaw<{ seconds: number }[]>`
    SELECT GREATEST(1, CEIL(EXTRACT(EPOCH FROM locked_until - now())))::int AS seconds FROM users WHERE id = ${userId}::bpchar`;
  throw new DomainError('RATE_LIMITED', 'Too many failed attempts; try again later.', {
    retryAfter: row?.seconds ?? 1,
  });
}

/** The attempt succeeded: the count starts again. */
export async function clearFailures(db: PrismaClient | TransactionClient, userId: string): Promise<void> {
  await db.$executeRaw`UPDATE users SET failed_logins = 0, locked_until = NULL WHERE id = ${userId}::bpchar AND (failed_logins > 0 OR locked_until IS NOT NULL)`;
}
