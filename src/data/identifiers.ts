import { isId } from '../kernel/ids.ts';

/**
 * Every identifier in data-plane SQL comes from here, and is derived from a ULID only (DESIGN §2): user text never
 * reaches DDL or a query's structure. A ULID is [0-9A-Z], so its lowercase form is a safe unquoted identifier;
 * we quote anyway so that a future change of alphabet cannot turn into an injection.
 */
function fromId(prefix: string, id: string): string {
  if (!isId(id)) throw new Error(`Refusing to derive an SQL identifier from a non-ULID: ${JSON.stringify(id)}`);
  return `"${prefix}_${id.toLowerCase()}"`;
}

/** The PostgreSQL schema that holds one workspace database. */
export const schemaOf = (databaseId: string): string => fromId('d', databaseId);

/** The physical table of a workspace table, schema-qualified. */
export const rowsTableOf = (databaseId: string, tableId: string): string =>
  `${schemaOf(databaseId)}.${fromId('t', tableId)}`;

/** The append-only cell history of a workspace table, schema-qualified. */
export const historyTableOf = (databaseId: string, tableId: string): string =>
  `${schemaOf(databaseId)}.${fromId('h', tableId)}`;

/** The column of a field. */
export const columnOf = (fieldId: string): string => fromId('f', fieldId);

/** The column's bare name: the JSON key under which a jsonb row carries the field, for `jsonb_to_recordset`. */
export const columnKeyOf = (fieldId: string): string => fromId('f', fieldId).slice(1, -1);

/** The sequence behind an autoNumber field, schema-qualified. */
export const sequenceOf = (databaseId: string, fieldId: string): string =>
  `${schemaOf(databaseId)}.${fromId('s', fieldId)}`;

/** The composite type a hashed unique key is cast to (src/data/unique-keys.ts), schema-qualified. */
export const keyTypeOf = (databaseId: string, ruleId: string): string =>
  `${schemaOf(databaseId)}.${fromId('r', ruleId)}`;

/** The trigger function that serialises writers of one hashed key (src/data/unique-keys.ts), schema-qualified. */
export const keyLockOf = (databaseId: string, ruleId: string): string =>
  `${schemaOf(databaseId)}.${fromId('l', ruleId)}`;

/** Unqualified names of indexes and constraints, which PostgreSQL reports back in errors. */
export const uniqueIndexOf = (ruleId: string): string => fromId('u', ruleId);
export const foreignKeyConstraintOf = (foreignKeyId: string): string => fromId('k', foreignKeyId);
/** A sort index (issue 14); unqualified, as `pg_class.relname` holds it. */
export const sortIndexOf = (indexId: string): string => fromId('i', indexId);

/**
 * The rule or foreign key id behind an index / constraint name reported by PostgreSQL, if it is one of ours. On
 * Citus the error comes from a worker's shard, whose constraints carry the shard id: `u_<id>_102009`.
 */
export function idFromConstraint(name: string | undefined, prefix: 'u' | 'k'): string | null {
  const match = name?.match(new RegExp(`^${prefix}_([0-9a-z]{26})(?:_[0-9]+)?$`));
  return match?.[1] ? match[1].toUpperCase() : null;
}
