/**
 * Every PostgreSQL error code the service reacts to, by name (https://www.postgresql.org/docs/15/errcodes-appendix.html),
 * plus our own WDS01. Code elsewhere compares against these names, never against a literal.
 */
export const SQLSTATE = {
  uniqueViolation: '23505',
  /** Hashed unique rules are exclusion constraints (src/data/unique-keys.ts). */
  exclusionViolation: '23P01',
  foreignKeyViolation: '23503',
  sequenceGeneratorLimitExceeded: '2200H',
  undefinedColumn: '42703',
  undefinedTable: '42P01',
  /** A type or function a schema change dropped (a hashed rule's key type, src/data/unique-keys.ts). */
  undefinedObject: '42704',
  undefinedFunction: '42883',
  invalidSchemaName: '3F000',
  datatypeMismatch: '42804',
  /** statement_timeout (QUERY_TIMEOUT) or a cancel request. */
  queryCanceled: '57014',
  deadlockDetected: '40P01',
  /** FATAL at connection start: the database does not allow connections (src/db/availability.ts). */
  objectNotInPrerequisiteState: '55000',
  serializationFailure: '40001',
  /** Raised by wds_claim_row when a table is full (prisma/migrations/*_row_capacity). */
  tableFull: 'WDS01',
} as const;

export type SqlState = (typeof SQLSTATE)[keyof typeof SQLSTATE];

/** The SQLSTATE of a pg error (`code`) or of Prisma's driver-adapter error (`originalCode`), if the value has one. */
export function sqlStateOf(error: unknown): string | undefined {
  const record = error as { code?: unknown; originalCode?: unknown } | null;
  if (typeof record?.originalCode === 'string') return record.originalCode;
  return typeof record?.code === 'string' ? record.code : undefined;
}

/** Prisma's code for a unique constraint violated by a model query (https://www.prisma.io/docs/orm/reference/error-reference). */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'P2002') return true;
  const cause = (error as { meta?: { driverAdapterError?: { cause?: { originalCode?: string } } } } | null)?.meta
    ?.driverAdapterError?.cause;
  return cause?.originalCode === SQLSTATE.uniqueViolation;
}
