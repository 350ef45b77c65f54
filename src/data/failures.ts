import { idFromConstraint } from './identifiers.ts';
import { SQLSTATE, sqlStateOf } from '../db/pg-errors.ts';

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

/** The rule a refused data-plane write broke, read from its SQLSTATE (src/db/pg-errors.ts) and constraint name. */
export function recogniseFailure(error: unknown): DataPlaneFailure | null {
  const cause = causeOf(error);
  if (!cause) return null;
  const sqlState = cause.originalCode ?? cause.code;
  switch (sqlState) {
    case SQLSTATE.uniqueViolation: // btree rules
    case SQLSTATE.exclusionViolation: {
      // hashed rules
      const ruleId = idFromConstraint(constraintName(cause), 'u');
      return ruleId ? { kind: 'unique', ruleId } : null;
    }
    case SQLSTATE.foreignKeyViolation: {
      const foreignKeyId = idFromConstraint(constraintName(cause), 'k');
      return foreignKeyId ? { kind: 'foreignKey', foreignKeyId } : null;
    }
    case SQLSTATE.tableFull:
      return { kind: 'tableFull' };
    case SQLSTATE.sequenceGeneratorLimitExceeded:
      return { kind: 'sequenceExhausted' };
    // A schema change committed between reading the schema and writing; or a write that waited behind a
    // conversion's cutover meets the new column type.
    case SQLSTATE.undefinedColumn:
    case SQLSTATE.undefinedTable:
    case SQLSTATE.datatypeMismatch:
      return { kind: 'schemaChanged' };
    default:
      return null;
  }
}

/**
 * A read built from a cached table definition (a guarded page or lookup) met a column, type or function that a
 * committed schema change dropped or retyped: the definition was stale, and the read is made again from the
 * current one.
 */
export function isStaleDefinition(error: unknown): boolean {
  const state = sqlStateOf(error);
  return (
    state === SQLSTATE.undefinedColumn ||
    state === SQLSTATE.undefinedTable ||
    state === SQLSTATE.undefinedObject ||
    state === SQLSTATE.undefinedFunction ||
    state === SQLSTATE.datatypeMismatch
  );
}
