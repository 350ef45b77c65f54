import type { TransactionClient } from '../../db/prisma.ts';
import type { Context } from './context.ts';
import type { Json } from '../../kernel/formats.ts';
import { idempotent } from '../../idempotency/run.ts';
import type { IdempotentCall } from '../../idempotency/key.ts';

/**
 * Runs a creation that issues a secret (a key, an invitation token) through `idempotent`, recording the created
 * resource without the secret: idempotency records keep outcomes for a day, and only hashes of secrets may be
 * stored. The live answer carries the secret; a replay with the same Idempotency-Key answers `secret: null`.
 */
export async function idempotentWithSecret<T extends { id: string } & Json>(
  context: Context,
  call: IdempotentCall,
  create: (tx: TransactionClient) => Promise<{ value: T; secret: string }>,
): Promise<{ value: T; secret: string | null }> {
  let issued: { id: string; secret: string } | undefined;
  const recorded = await idempotent(context, call, async (tx) => {
    const { value, secret } = await create(tx);
    issued = { id: value.id, secret };
    return value;
  });
  return { value: recorded, secret: issued && issued.id === recorded.id ? issued.secret : null };
}
