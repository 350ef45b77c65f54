import { idFromConstraint } from './identifiers.ts';

/**
 * The PostgreSQL errors a data-plane write can expect, recognised from what `pg` or Prisma's pg adapter reports
 * (the SQLSTATE and, for constraint violations, the index or constraint name).
 */
export type DataPlaneFailure =
  | { kind: 'unique'; ruleId: string }
  | { kind: 'foreignKey'; foreignKeyId: string }
  | { kind: 'sequenceExhausted' }
  | { kind: 'tableFull' }
  | { kind: 'schemaChanged' };

interface AdapterCause {
  originalCode?: string;
  code?: string;
  constraint?: { index?: string; name?: string } | string;
  originalMessage?: string;
}

/** Prisma's pg adapter wraps the PostgreSQL error; `pg` itself throws it with `code` and `constraint`. */
function causeOf(error: unknown): AdapterCause | null {
  const meta = (error as { meta?: { driverAdapterError?: { cause?: AdapterCause } } } | null)?.meta;
  if (meta?.driverAdapterError?.cause) return meta.driverAdapterError.cause;
  const raw = error as { code?: unknown; constraint?: unknown; message?: unknown; severity?: unknown } | null;
  if (typeof raw?.code !== 'string' || raw.severity === undefined) return null;
  return {
    code: raw.code,
    ...(typeof raw.constraint === 'string' ? { constraint: raw.constraint } : {}),
    ...(typeof raw.message === 'string' ? { originalMessage: raw.message } : {}),
  };
}

function constraintName(cause: AdapterCause): string | undefined {
  if (typeof cause.constraint === 'string') return cause.constraint;
  if (cause.constraint?.index) return cause.constraint.index;
  if (cause.constraint?.name) return cause.constraint.name;
  // Foreign key violations name the constraint only in the message.
  return cause.originalMessage?.match(/constraint "([^"]+)"/)?.[1];
}

/** SQLSTATE classes: https://www.postgresql.org/docs/15/errcodes-appendix.html */
export function recogniseFailure(error: unknown): DataPlaneFailure | null {
  const cause = causeOf(error);
  if (!cause) return null;
  const sqlState = cause.originalCode ?? cause.code;
  switch (sqlState) {
    case '23505': // unique_violation (btree rules)
    case '23P01': { // exclusion_violation (hashed rules, src/data/unique-keys.ts)
      const ruleId = idFromConstraint(constraintName(cause), 'u');
      return ruleId ? { kind: 'unique', ruleId } : null;
    }
    case '23503': {
      const foreignKeyId = idFromConstraint(constraintName(cause), 'k');
      return foreignKeyId ? { kind: 'foreignKey', foreignKeyId } : null;
    }
    case 'WDS01': // raised by wds_claim_row (prisma/migrations/*_row_capacity)
      return { kind: 'tableFull' };
    case '2200H': // sequence_generator_limit_exceeded
      return { kind: 'sequenceExhausted' };
    case '42703': // undefined_column: a schema change committed between reading the schema and writing
    case '42P01': // undefined_table
    case '42804': // datatype_mismatch: a write that waited behind a conversion's cutover meets the new column type
      return { kind: 'schemaChanged' };
    default:
      return null;
  }
}
