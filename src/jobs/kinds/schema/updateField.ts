import type { SqlExecutor } from '../../../db/sql.ts';
import { DomainError, validationFailed } from '../../../kernel/errors.ts';
import type { TableSchema } from '../../../catalog/table-schema.ts';
import * as ddl from './change-statements.ts';
import { keysThatNoLongerFit, renamedInWhere } from './plan.ts';
import { FieldChangeResult } from './results.ts';
import { changeOf, directChange, fieldIn, type ChangeOf, type SchemaChangeRun } from './schema-change.ts';

async function rename(sql: SqlExecutor, schema: TableSchema, change: ChangeOf<'rename_field'>): Promise<void> {
  // Conditional rules name fields in their `where` as the client wrote it, often by name: follow the rename.
  const wheres = schema.uniqueRules.flatMap((rule) => {
    const where = renamedInWhere(schema, rule.where, change.fieldId, change.name);
    return where === null ? [] : [ddl.updateRuleWhere(rule.id, where)];
  });
  await sql.runEach([ddl.renameField(fieldIn(schema, change.fieldId).id, change.name), ...wheres]);
}

/** New settings apply only when every row already meets them (writes wait meanwhile): 422 with a sample otherwise. */
async function updateSettings(
  sql: SqlExecutor,
  run: SchemaChangeRun<unknown>,
  schema: TableSchema,
  change: ChangeOf<'update_field'>,
): Promise<void> {
  const { databaseId, tableId } = run.payload;
  const field = fieldIn(schema, change.fieldId);
  const unfit = keysThatNoLongerFit(schema, { ...field, options: change.options });
  if (unfit.length > 0)
    throw validationFailed(
      unfit,
      'An index or unique rule added since this change was accepted cannot hold the new maxLength.',
    );
  await sql.run(ddl.blockWrites(databaseId, tableId));
  const check = ddl.selectViolations(databaseId, tableId, field, change.required && !field.required, change.options);
  const [violations] = await sql.run<{ count: number; sample: string[] }>(check);
  if (violations!.count > 0) {
    throw new DomainError(
      'VALIDATION_FAILED',
      `${violations!.count} rows hold values that the new settings would not allow; change them first.`,
      {
        details: { violations: violations!.count, rowIds: violations!.sample },
      },
    );
  }
  await sql.run(ddl.updateFieldSettings(field.id, field.type, change.required, change.options));
  if (change.required !== field.required)
    await sql.run(ddl.setRequired(databaseId, tableId, field.id, change.required));
}

/** rename_field and update_field (`field.update`), each one transaction. */
export const updateField = directChange('updateField', FieldChangeResult, async (sql, run, schema) => {
  const change = changeOf(run.payload, 'rename_field', 'update_field');
  if (change.kind === 'rename_field') await rename(sql, schema, change);
  else await updateSettings(sql, run, schema, change);
  return { fieldId: change.fieldId };
});
