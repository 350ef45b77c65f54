import { typeSpecOf } from '../../../data/field-types.ts';
import { DomainError } from '../../../kernel/errors.ts';
import * as ddl from './change-statements.ts';
import { FieldChangeResult } from './results.ts';
import { changeOf, directChange } from './schema-change.ts';

/** add_field (`field.create`): the catalog row and the column, in one transaction. */
export const createField = directChange('createField', FieldChangeResult, async (sql, run) => {
  const { databaseId, tableId } = run.payload;
  const change = changeOf(run.payload, 'add_field');
  if (change.field.required && !typeSpecOf(change.field.type).generated) {
    await sql.run(ddl.blockWrites(databaseId, tableId));
    const [rows] = await sql.query<{ present: boolean }>(ddl.hasRows(databaseId, tableId).sql);
    if (rows!.present) {
      throw new DomainError(
        'VALIDATION_FAILED',
        'A required field can be added only to an empty table: add it optional, fill it, then make it required with update_field.',
      );
    }
  }
  await sql.runEach([ddl.insertField(tableId, change.field), ...ddl.addColumn(databaseId, tableId, change.field)]);
  return { fieldId: change.field.id };
});
