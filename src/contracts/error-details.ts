import { z } from 'zod';
import { ERROR_DETAILS, hasDeclaredDetails, type DetailedCode } from '../kernel/error-details.ts';
import { HTTP_STATUS_BY_CODE, type ErrorCode } from '../kernel/errors.ts';

/*
 * The error object of spec §7, one variant per code that declares its details (src/kernel/error-details.ts) and one
 * for the codes that carry none: generated clients narrow `error.details` by `error.code`. The REST envelope adds
 * `requestId`; a failed job's `error` has none (no request made it).
 */

const CODES = Object.keys(HTTP_STATUS_BY_CODE) as ErrorCode[];
const DETAILED = CODES.filter(hasDeclaredDetails);
const PLAIN = CODES.filter((code) => !hasDeclaredDetails(code)) as [ErrorCode, ...ErrorCode[]];

function errorObject(withRequestId: boolean) {
  const requestId = withRequestId ? { requestId: z.string() } : {};
  const detailed = DETAILED.map((code: DetailedCode) =>
    z.strictObject({
      code: z.literal(code),
      message: z.string(),
      ...requestId,
      details: ERROR_DETAILS[code].optional(),
    }),
  );
  const plain = z.strictObject({
    code: z.enum(PLAIN),
    message: z.string(),
    ...requestId,
    details: z.looseObject({}).optional().describe('None documented for these codes.'),
  });
  return z
    .discriminatedUnion('code', [plain, ...detailed])
    .describe('Narrow `details` by `code`; a client must tolerate codes and detail keys it does not know (spec §9).');
}

/** A failed job's `error` (GET …/jobs/{jobId}). */
export const JobError = errorObject(false).meta({ id: 'JobError' });

/** The `error` of spec §7's envelope. */
export const ErrorObject = errorObject(true).meta({ id: 'ErrorObject' });
