import { Secret, TOTP } from 'otpauth';
import type { PrismaClient, TransactionClient } from '../db/prisma.ts';

/** RFC 6238 defaults every authenticator app understands: SHA-1, 6 digits, 30 s; ±1 step of clock drift. */
const PERIOD_SECONDS = 30;

function totpOf(base32: string, label = 'account'): TOTP {
  return new TOTP({
    issuer: 'Workspace Data Service',
    label,
    algorithm: 'SHA1',
    digits: 6,
    period: PERIOD_SECONDS,
    secret: Secret.fromBase32(base32),
  });
}

export function newTotpSecret(): string {
  return new Secret({ size: 20 }).base32;
}

export function totpUri(base32: string, email: string): string {
  return totpOf(base32, email).toString();
}

/** The time step a code belongs to (now ±1), or null when it matches none. */
function stepOf(base32: string, code: string, now = Date.now()): number | null {
  if (!/^\d{6}$/.test(code)) return null;
  const delta = totpOf(base32).validate({ token: code, window: 1, timestamp: now });
  return delta === null ? null : Math.floor(now / 1000 / PERIOD_SECONDS) + delta;
}

/**
 * Accepts a code at most once (RFC 6238 §5.2): it must match, and its time step must be later than the last
 * accepted one, recorded in the same statement so that two requests cannot both use it.
 */
export async function consumeTotp(
  db: PrismaClient | TransactionClient,
  userId: string,
  base32: string,
  code: string,
): Promise<boolean> {
  const step = stepOf(base32, code);
  if (step === null) return false;
  const accepted = await db.$executeRaw`
    UPDATE users SET totp_last_step = ${step} WHERE id = ${userId}::bpchar AND (totp_last_step IS NULL OR totp_last_step < ${step})`;
  return accepted === 1;
}

/** For tests and tools: the code an authenticator shows `steps` periods from now. */
export function currentTotp(base32: string, steps = 0): string {
  return totpOf(base32).generate({ timestamp: Date.now() + steps * PERIOD_SECONDS * 1000 });
}
