import * as ddl from './change-statements.ts';
import { FieldChangeResult } from './results.ts';
import { changeOf, directChange, fieldIn } from './schema-change.ts';
import { forgetFieldIndexes } from './index-changes.ts';

/** delete_field (`field.delete`): the column, its catalog row and the rows of its indexes, in one transaction. */
export const deleteField = directChange('deleteField', FieldChangeResult, async (sql, run, schema) => {
  const { databaseId, tableId } = run.payload;
  const change = changeOf(run.payload, 'delete_field');
  await sql.runEach(ddl.deleteField(databaseId, tableId, fieldIn(schema, change.fieldId)));
  await forgetFieldIndexes(sql, tableId, change.fieldId);
  return { fieldId: change.fieldId };
});
