import { z } from 'zod';
import { typeSpecOf, type FieldDefinition } from './field-types.ts';
import { FieldReference } from './filter.ts';
import { columnOf, keyLockOf, keyTypeOf, rowsTableOf, uniqueIndexOf } from './identifiers.ts';
import type { Statement } from './statement.ts';

/**
 * How a unique rule is enforced (docs/decisions/bulk-writes.md). A key that fits a btree entry (`INDEX_BUDGET_BYTES`) gets a unique btree index on its columns, which foreign keys can reference and
 * which is built CONCURRENTLY. A wider key gets an exclusion constraint `EXCLUDE USING hash (key WITH =)`: the
 * hash index stores a 4-byte hash code whatever the value's length, and PostgreSQL re-checks every candidate it
 * finds with the real `=`, so two different values whose hashes collide never conflict. A multi-field key is
 * hashed as one value of a composite type `r_<rule id>` (hash indexes take one column; an anonymous ROW() is a
 * pseudo-type that no index accepts).
 */
export type KeyEnforcement = 'btree' | 'hash';

/** The fields of a unique rule or a foreign key, each a field id or exact name, in the key's order: 1..8. */
export const KeyFieldReferences = z.array(FieldReference).min(1).max(8);

/**
 * btree entries must fit a third of a page (2704 bytes); keep headroom for tuple headers. A key that may be wider
 * is enforced through a hash instead, which foreign keys cannot reference.
 */
export const INDEX_BUDGET_BYTES = 2_600;

/** The widest entry a key over these fields can make, in bytes (a field without a btree order counts nothing). */
export function keyBytes(fields: readonly FieldDefinition[]): number {
  return fields.reduce((sum, field) => sum + (typeSpecOf(field.type).indexBytes(field.options) ?? 0), 0);
}

const plain = (sql: string): Statement => ({ sql, params: [] });

/** The key of a hashed rule as one composite value, over the columns of `alias` (or unqualified). */
export function hashedKeyExpression(
  databaseId: string,
  ruleId: string,
  fieldIds: readonly string[],
  alias?: string,
): string {
  const columns = fieldIds.map((id) => (alias ? `${alias}.${columnOf(id)}` : columnOf(id)));
  return `ROW(${columns.join(', ')})::${keyTypeOf(databaseId, ruleId)}`;
}

/** Rows with an empty key field take no part in a rule, as with a unique index (NULLs are distinct). */
export function keyPresent(fieldIds: readonly string[], alias?: string): string {
  return fieldIds.map((id) => `${alias ? `${alias}.` : ''}${columnOf(id)} IS NOT NULL`).join(' AND ');
}

/**
 * The hashed rule: its composite type, the key lock, then the constraint. Not CONCURRENTLY (PostgreSQL has no such
 * form for a constraint): the build holds the table's ACCESS EXCLUSIVE lock while the hash index is built.
 */
export function buildHashedKey(
  databaseId: string,
  tableId: string,
  ruleId: string,
  fields: readonly FieldDefinition[],
  predicate: string | null,
): Statement[] {
  const members = fields.map((field) => `${columnOf(field.id)} ${typeSpecOf(field.type).column(field.options)}`);
  const ids = fields.map((field) => field.id);
  const where = [keyPresent(ids), ...(predicate ? [`(${predicate})`] : [])].join(' AND ');
  return [
    plain(`CREATE TYPE ${keyTypeOf(databaseId, ruleId)} AS (${members.join(', ')})`),
    ...buildKeyLock(databaseId, tableId, ruleId, ids),
    plain(`ALTER TABLE ${rowsTableOf(databaseId, tableId)} ADD CONSTRAINT ${uniqueIndexOf(ruleId)}
      EXCLUDE USING hash ((${hashedKeyExpression(databaseId, ruleId, ids)}) WITH =) WHERE (${where})`),
  ];
}

/**
 * A BEFORE trigger that takes a transaction advisory lock on the key's hash before the row is written. An exclusion
 * constraint inserts first and checks after, so two transactions writing the same key each wait for the other:
 * a deadlock that PostgreSQL only breaks after deadlock_timeout (1 s), longer than a request's statement budget,
 * so both answered 503 or 500 where a unique index answers one 201 and one 409. With the lock, the second writer
 * waits for the first to end and then meets its committed row: UNIQUE_CONFLICT at once. The seed keeps rules
 * apart; rows whose key is empty take no part, as in the constraint. The body names no schema (an anonymous ROW
 * hashes as the composite does), so it survives a restore's schema rename.
 */
function buildKeyLock(databaseId: string, tableId: string, ruleId: string, fieldIds: readonly string[]): Statement[] {
  const key = `ROW(${fieldIds.map((id) => `NEW.${columnOf(id)}`).join(', ')})`;
  const lock = keyLockOf(databaseId, ruleId);
  return [
    plain(`CREATE FUNCTION ${lock}() RETURNS trigger LANGUAGE plpgsql AS $body$
      BEGIN
        PERFORM pg_advisory_xact_lock(hash_record_extended(${key}, hashtextextended('${uniqueIndexOf(ruleId).slice(1, -1)}', 0)));
        RETURN NEW;
      END $body$`),
    plain(`CREATE TRIGGER ${uniqueIndexOf(ruleId)} BEFORE INSERT OR UPDATE ON ${rowsTableOf(databaseId, tableId)}
      FOR EACH ROW WHEN (${keyPresent(fieldIds, 'NEW')}) EXECUTE FUNCTION ${lock}()`),
  ];
}

/** Undoes a hashed rule, or what an interrupted build left of it. */
export function dropHashedKey(databaseId: string, tableId: string, ruleId: string): Statement[] {
  return [
    plain(`ALTER TABLE ${rowsTableOf(databaseId, tableId)} DROP CONSTRAINT IF EXISTS ${uniqueIndexOf(ruleId)}`),
    plain(`DROP FUNCTION IF EXISTS ${keyLockOf(databaseId, ruleId)}() CASCADE`),
    plain(`DROP TYPE IF EXISTS ${keyTypeOf(databaseId, ruleId)}`),
  ];
}
