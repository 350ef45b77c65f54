import { GraphQLError } from 'graphql';
import type { ErrorDetailsOf } from './error-details.ts';

/**
 * The one table that maps every error code to its HTTP status (spec §7 lists the codes, not the mapping).
 * Codes not in the spec's list are marked; clients must tolerate unknown codes (spec §9).
 */
export const HTTP_STATUS_BY_CODE = {
  BAD_REQUEST: 400, // not in spec §7: malformed JSON, malformed path ID or Idempotency-Key
  CURSOR_INVALID: 400,
  QUERY_TOO_COMPLEX: 400, // not in spec §7: a GraphQL document over a depth, alias, token, directive or cost limit
  UNAUTHENTICATED: 401,
  ACCESS_DENIED: 403,
  FORBIDDEN: 403,
  INSUFFICIENT_SCOPE: 403,
  PERSONAL_IDENTITY_REQUIRED: 403,
  DELEGATION_EXCEEDS_AUTHORITY: 403,
  STEP_UP_REQUIRED: 403,
  RESOURCE_NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405, // not in spec §7
  REQUEST_TIMEOUT: 408,
  ROW_VERSION_CONFLICT: 409,
  SCHEMA_VERSION_CONFLICT: 409,
  UNIQUE_CONFLICT: 409,
  FOREIGN_KEY_CONFLICT: 409,
  LAST_ADMIN: 409,
  IDEMPOTENCY_CONFLICT: 409,
  IDEMPOTENCY_IN_PROGRESS: 409, // not in spec §7: same key while the first request is still running
  INVITATION_ACCEPTED: 409, // an accepted invitation cannot be cancelled (spec §3)
  TWO_FACTOR_ENABLED: 409, // not in spec §7: enrolling again while two-factor is on
  AUTO_INCREMENT_EXHAUSTED: 409,
  ROW_LIMIT_REACHED: 409,
  CAPACITY_LIMIT: 409,
  SCHEMA_MAINTENANCE: 409,
  JOB_FAILED: 409,
  // Cancel of a finished job, retry of one that did not fail (issue 5).
  JOB_STATE_CONFLICT: 409,
  ARTIFACT_UNVERIFIED: 409,
  ARTIFACT_EXPIRED: 410,
  PAYLOAD_TOO_LARGE: 413,
  ROW_SIZE_LIMIT: 413,
  UNSUPPORTED_MEDIA_TYPE: 415, // not in spec §7
  HEADERS_TOO_LARGE: 431, // not in spec §7: request line and headers over Node's 16 KiB limit (src/http/client-errors.ts)
  VALIDATION_FAILED: 422,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  DEPENDENCY_UNAVAILABLE: 502,
  CONFIGURATION_INVALID: 503,
  QUERY_TIMEOUT: 503,
  // Not in spec §7: the process is stopping (SIGTERM); an open event stream ends with it, and the client reconnects.
  SERVICE_RESTARTING: 503,
} as const;

export type ErrorCode = keyof typeof HTTP_STATUS_BY_CODE;

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(HTTP_STATUS_BY_CODE, value);
}

export function httpStatusOf(code: ErrorCode): number {
  return HTTP_STATUS_BY_CODE[code];
}

/** RFC 6750 §3: a rejected token names `invalid_token`; a request without one gets the bare challenge. */
export function bearerChallenge(tokenPresented: boolean): string {
  return tokenPresented
    ? 'Bearer realm="workspace-data-service", error="invalid_token", error_description="The access token is invalid, expired or revoked."'
    : 'Bearer realm="workspace-data-service"';
}

export interface DomainErrorOptions<Code extends ErrorCode = ErrorCode> {
  /** What src/kernel/error-details.ts declares for the code (the OpenAPI document types it per code). */
  details?: ErrorDetailsOf<Code>;
  /** Whole seconds; becomes the Retry-After header on REST and `extensions.retryAfter` on GraphQL. */
  retryAfter?: number;
  /** For UNAUTHENTICATED: whether a credential was presented (selects the WWW-Authenticate challenge). */
  tokenPresented?: boolean;
  /**
   * The HTTP status when it must differ from the code's entry in the table: CAPACITY_LIMIT is 409 for a full
   * collection (saved views) but 429 for a full job queue, which clears as jobs finish (issue 18).
   */
  status?: number;
}

/** Yoga reads `extensions.http` to answer /graphql with the right status and headers (and strips it from bodies). */
function httpExtension(
  code: ErrorCode,
  options: Pick<DomainErrorOptions, 'status' | 'tokenPresented'>,
): Record<string, unknown> {
  if (options.status !== undefined) return { http: { status: options.status } };
  if (code !== 'UNAUTHENTICATED') return {};
  return { http: { status: 401, headers: { 'WWW-Authenticate': bearerChallenge(options.tokenPresented ?? false) } } };
}

/**
 * An expected failure with a code from spec §7. It is a GraphQLError so that Yoga's masking lets it through
 * unchanged and GraphQL clients see the same `code` in `extensions` that REST clients see in the envelope.
 */
export class DomainError<Code extends ErrorCode = ErrorCode> extends GraphQLError {
  readonly code: Code;
  readonly details: unknown;
  readonly retryAfter: number | undefined;
  /** The HTTP status: the code's, unless the error overrides it (DomainErrorOptions.status). */
  readonly status: number;

  constructor(code: Code, message: string, options: DomainErrorOptions<Code> = {}) {
    super(message, {
      extensions: {
        code,
        ...(options.details === undefined ? {} : { details: options.details }),
        ...(options.retryAfter === undefined ? {} : { retryAfter: options.retryAfter }),
        ...httpExtension(code, options),
      },
    });
    this.name = 'DomainError';
    this.code = code;
    this.details = options.details;
    this.retryAfter = options.retryAfter;
    this.status = options.status ?? httpStatusOf(code);
  }
}

/** One problem in a request, pointing at the JSON path where it was found. */
export interface FieldProblem {
  path: (string | number)[];
  message: string;
  /** For problems with a table's cells or filters: the field concerned, whichever way the request named it. */
  fieldId?: string;
}

export function validationFailed(
  problems: FieldProblem[],
  message = 'The request did not pass validation.',
): DomainError {
  return new DomainError('VALIDATION_FAILED', message, { details: { problems } });
}

export function notFound(what = 'resource'): DomainError {
  return new DomainError('RESOURCE_NOT_FOUND', `The ${what} does not exist or is not visible to you.`);
}

/** The refusal of a request that presented no credential to a field that needs one (REST answers it before input). */
export function credentialRequired(): DomainError {
  return new DomainError('UNAUTHENTICATED', 'A bearer credential is required.');
}
