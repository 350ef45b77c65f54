import { typeSpecOf, type FieldDefinition } from './field-types.ts';
import { columnOf, rowsTableOf } from './identifiers.ts';
import { Params, type Statement } from './statement.ts';

/**
 * What stands in the way of a new unique rule or foreign key: existing duplicates and orphans, listed so the
 * client can fix them (at most `limit` groups). Rows with an empty key field are exempt from both, as in
 * PostgreSQL (NULLs are distinct in unique indexes; MATCH SIMPLE foreign keys skip them).
 */
const readCell = (field: FieldDefinition, index: number) =>
  `${typeSpecOf(field.type).read(`r.${columnOf(field.id)}`)} AS c${index}`;
const allPresent = (fields: readonly FieldDefinition[]) =>
  fields.map((field) => `r.${columnOf(field.id)} IS NOT NULL`).join(' AND ');

export function selectDuplicates(
  databaseId: string,
  tableId: string,
  fields: readonly FieldDefinition[],
  filter: ((params: Params) => string) | null,
  limit: number,
): Statement {
  const params = new Params();
  const conditions = [allPresent(fields), ...(filter ? [filter(params)] : [])];
  const sql = `SELECT array_agg(r.id ORDER BY r.id) AS row_ids, ${fields.map(readCell).join(', ')}
      FROM ${rowsTableOf(databaseId, tableId)} r
     WHERE ${conditions.join(' AND ')}
     GROUP BY ${fields.map((field) => `r.${columnOf(field.id)}`).join(', ')}
    HAVING count(*) > 1
     ORDER BY min(r.id)
     LIMIT ${params.add(limit, 'int')}`;
  return { sql, params: params.values };
}

export function selectOrphans(
  databaseId: string,
  key: {
    tableId: string;
    fields: readonly FieldDefinition[];
    referencedTableId: string;
    referencedFields: readonly FieldDefinition[];
  },
  limit: number,
): Statement {
  const params = new Params();
  const matches = key.fields
    .map((field, index) => `t.${columnOf(key.referencedFields[index]!.id)} = r.${columnOf(field.id)}`)
    .join(' AND ');
  const sql = `SELECT r.id, ${key.fields.map(readCell).join(', ')}
      FROM ${rowsTableOf(databaseId, key.tableId)} r
     WHERE ${allPresent(key.fields)}
       AND NOT EXISTS (SELECT 1 FROM ${rowsTableOf(databaseId, key.referencedTableId)} t WHERE ${matches})
     ORDER BY r.id
     LIMIT ${params.add(limit, 'int')}`;
  return { sql, params: params.values };
}
