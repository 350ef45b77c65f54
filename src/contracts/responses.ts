import { z } from 'zod';
import { Id } from '../kernel/formats.ts';

/** Spec §7: the error envelope, with no other properties. */
export const ErrorEnvelope = z.strictObject({
  error: z.strictObject({
    code: z.string(),
    message: z.string(),
    requestId: z.string(),
    details: z.unknown().optional(),
  }),
});

/** Spec 2.8: cancel invitation, revoke team key, revoke session (and the other revocations). */
export const DeletionResponse = z.strictObject({ deleted: z.boolean(), mutationId: Id });
