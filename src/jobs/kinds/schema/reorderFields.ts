import * as ddl from './change-statements.ts';
import { ReorderFieldsResult } from './results.ts';
import { changeOf, directChange } from './schema-change.ts';

/** reorder_fields (`fields.reorder`): the fields' positions, in one transaction. */
export const reorderFields = directChange('reorderFields', ReorderFieldsResult, async (sql, run) => {
  const change = changeOf(run.payload, 'reorder_fields');
  await sql.runEach(ddl.reorderFields(run.payload.tableId, change.fieldIds));
  return { fieldIds: change.fieldIds };
});
