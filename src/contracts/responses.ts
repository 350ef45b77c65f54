import { z } from 'zod';
import { Id } from '../kernel/formats.ts';
import { ErrorObject } from './error-details.ts';

/** Spec §7: the error envelope, with no other properties; `error.details` typed per code. */
export const ErrorEnvelope = z.strictObject({ error: ErrorObject });

/** Spec 2.8: cancel invitation, revoke team key, revoke session (and the other revocations). */
export const DeletionResponse = z.strictObject({ deleted: z.boolean(), mutationId: Id });
