import { typeSpecOf, type FieldDefinition } from './field-types.ts';
import { columnOf, keyTypeOf, rowsTableOf, uniqueIndexOf } from './identifiers.ts';
import type { Statement } from './sql.ts';

/**
 * How a unique rule is enforced (docs/decisions.md, issue 13). A key that fits a btree entry (2600 bytes, see
 * src/graph/tables/unique-rules.ts) gets a unique btree index on its columns, which foreign keys can reference and
 * which is built CONCURRENTLY. A wider key gets an exclusion constraint `EXCLUDE USING hash (key WITH =)`: the
 * hash index stores a 4-byte hash code whatever the value's length, and PostgreSQL re-checks every candidate it
 * finds with the real `=`, so two different values whose hashes collide never conflict. A multi-field key is
 * hashed as one value of a composite type `r_<rule id>` (hash indexes take one column; an anonymous ROW() is a
 * pseudo-type that no index accepts).
 */
export type KeyEnforcement = 'btree' | 'hash';

const plain = (sql: string): Statement => ({ sql, params: [] });

/** The key of a hashed rule as one composite value, over the columns of `alias` (or unqualified). */
export function hashedKeyExpression(databaseId: string, ruleId: string, fieldIds: readonly string[], alias?: string): string {
  const columns = fieldIds.map((id) => (alias ? `${alias}.${columnOf(id)}` : columnOf(id)));
  return `ROW(${columns.join(', ')})::${keyTypeOf(databaseId, ruleId)}`;
}

/** Rows with an empty key field take no part in a rule, as with a unique index (NULLs are distinct). */
export function keyPresent(fieldIds: readonly string[], alias?: string): string {
  return fieldIds.map((id) => `${alias ? `${alias}.` : ''}${columnOf(id)} IS NOT NULL`).join(' AND ');
}

/**
 * The hashed rule: its composite type, then the constraint. Not CONCURRENTLY (PostgreSQL has no such form for a
 * constraint): the build holds the table's ACCESS EXCLUSIVE lock while the hash index is built.
 */
export function buildHashedKey(databaseId: string, tableId: string, ruleId: string, fields: readonly FieldDefinition[], predicate: string | null): Statement[] {
  const members = fields.map((field) => `${columnOf(field.id)} ${typeSpecOf(field.type).column(field.options)}`);
  const ids = fields.map((field) => field.id);
  const where = [keyPresent(ids), ...(predicate ? [`(${predicate})`] : [])].join(' AND ');
  return [
    plain(`CREATE TYPE ${keyTypeOf(databaseId, ruleId)} AS (${members.join(', ')})`),
    plain(`ALTER TABLE ${rowsTableOf(databaseId, tableId)} ADD CONSTRAINT ${uniqueIndexOf(ruleId)}
      EXCLUDE USING hash ((${hashedKeyExpression(databaseId, ruleId, ids)}) WITH =) WHERE (${where})`),
  ];
}

/** Undoes a hashed rule, or what an interrupted build left of it. */
export function dropHashedKey(databaseId: string, tableId: string, ruleId: string): Statement[] {
  return [
    plain(`ALTER TABLE ${rowsTableOf(databaseId, tableId)} DROP CONSTRAINT IF EXISTS ${uniqueIndexOf(ruleId)}`),
    plain(`DROP TYPE IF EXISTS ${keyTypeOf(databaseId, ruleId)}`),
  ];
}
