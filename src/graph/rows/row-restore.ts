import type { SqlExecutor } from '../../db/sql.ts';
import { typeSpecOf, type CellValue } from '../../data/field-types.ts';
import {
  restoreRow,
  selectLastCells,
  selectLastEntry,
  type LastCellRecord,
  type LastEntryRecord,
} from '../../data/row-restore.ts';
import { claimRowCapacity, rowGuardState, selectRow, type RowRecord } from '../../data/rows.ts';
import { DomainError, notFound } from '../../kernel/errors.ts';
import type { ErrorDetailsOf } from '../../kernel/error-details.ts';
import { Id, storedVersion } from '../../kernel/formats.ts';
import { RestoreRowBody } from '../../contracts/rows.ts';
import { builder } from '../server/builder.ts';
import type { Context } from '../server/context.ts';
import { idempotentSql, type IdempotentTransaction } from '../../idempotency/run.ts';
import { schemaVersionConflict, type TableSchema } from '../../catalog/table-schema.ts';
import { addressOf, tableAddressArgs } from '../tables/address.ts';
import { checkRowSize, checkValues } from './row-values.ts';
import {
  allocateGeneratedValues,
  checkSchemaVersion,
  rowEvent,
  rowLimitReached,
  RowMutation,
  run,
  type RowMutationShape,
} from './rows.ts';
import { currentSchema } from '../tables/schema-endpoint.ts';

/** Restoring a deleted row from its cell history (docs/decisions/lifecycle.md, "Row restore"). */
const RestoreRowInput = builder
  .inputType('RestoreRowInput', {
    fields: (t) => ({ expectedVersion: t.string({ required: true }), expectedSchemaVersion: t.int() }),
  })
  .validate(RestoreRowBody);

function versionConflict(message: string, details: Record<string, unknown>): DomainError {
  return new DomainError('ROW_VERSION_CONFLICT', message, { details });
}

/**
 * A row whose newest history entry is not its deletion at `expectedVersion` cannot be restored. A live row is a
 * revision conflict too (ROW_VERSION_CONFLICT with `deleted: false`): the client's picture of it — deleted at
 * that version — is stale, exactly what the code says for updates and deletes.
 */
async function checkRestorable(
  executor: SqlExecutor,
  schema: TableSchema,
  rowId: string,
  last: LastEntryRecord | undefined,
  expectedVersion: string,
): Promise<void> {
  if (!last) throw notFound('row');
  if (last.operation !== 'delete') {
    const [current] = await run<RowRecord>(executor, schema, selectRow(schema, rowId));
    throw versionConflict('The row is not deleted; there is nothing to restore.', {
      expectedVersion,
      currentVersion: current?.version ?? last.version,
      deleted: false,
    });
  }
  if (last.version !== expectedVersion) {
    throw versionConflict('The row changed since that deletion; read its history again and retry.', {
      expectedVersion,
      currentVersion: last.version,
      deleted: true,
    });
  }
}

/**
 * Today's schema decides the restored values: each field's last value before the delete, null for a field added
 * since (no history), nothing for a field deleted since. They are validated like a create's values, so a value a
 * conversion no longer accepts, or a required field that was added since, is a 422 naming the field. Generated
 * (autoNumber) fields keep their old number; one added since draws a new one.
 */
async function restoredValues(
  executor: SqlExecutor,
  schema: TableSchema,
  cells: readonly LastCellRecord[],
): Promise<Map<string, CellValue>> {
  const old = new Map(cells.map((cell) => [cell.field_id, cell.value]));
  const editable = schema.fields.filter((field) => !typeSpecOf(field.type).generated);
  let values: Map<string, CellValue>;
  try {
    values = checkValues(
      schema,
      Object.fromEntries(editable.map((field) => [field.id, old.get(field.id) ?? null])),
      'create',
    );
  } catch (error) {
    if (!(error instanceof DomainError) || error.code !== 'VALIDATION_FAILED') throw error;
    throw new DomainError('VALIDATION_FAILED', 'The row’s last values do not fit the table’s schema as it is today.', {
      // The same code's details, typed when checkValues raised them.
      details: error.details as ErrorDetailsOf<'VALIDATION_FAILED'>,
    });
  }
  const generated = schema.fields.filter((field) => typeSpecOf(field.type).generated);
  if (generated.some((field) => typeof old.get(field.id) !== 'number'))
    await allocateGeneratedValues(executor, schema, values);
  for (const field of generated) {
    const number = old.get(field.id);
    if (typeof number === 'number') values.set(field.id, number);
  }
  return values;
}

/** Why the guarded insert wrote nothing: the table changed or left, or another request changed the row first. */
async function explainRefusedRestore(
  executor: SqlExecutor,
  schema: TableSchema,
  rowId: string,
  expectedVersion: string,
): Promise<never> {
  const [state] = await run<{ schema_version: number; state: string }>(executor, schema, rowGuardState(schema.tableId));
  if (state?.state !== 'active') throw notFound('table');
  if (state.schema_version !== schema.schemaVersion)
    throw schemaVersionConflict(schema.schemaVersion, state.schema_version);
  const [last] = await run<LastEntryRecord>(executor, schema, selectLastEntry(schema, rowId));
  await checkRestorable(executor, schema, rowId, last, expectedVersion);
  throw versionConflict('The row was restored by someone else; read it again.', { expectedVersion, deleted: false });
}

async function bringBack(
  context: Context,
  tx: IdempotentTransaction,
  schema: TableSchema,
  rowId: string,
  body: RestoreRowBody,
): Promise<RowMutationShape> {
  checkSchemaVersion(schema, body.expectedSchemaVersion);
  const [last] = await run<LastEntryRecord>(tx.executor, schema, selectLastEntry(schema, rowId));
  await checkRestorable(tx.executor, schema, rowId, last, body.expectedVersion);
  const deletedVersion = storedVersion(body.expectedVersion)!; // equal to a stored version, checked above
  const cells = await run<LastCellRecord>(tx.executor, schema, selectLastCells(schema, rowId));
  const values = await restoredValues(tx.executor, schema, cells);
  checkRowSize(values, context.config.ROW_SIZE_LIMIT_BYTES);
  const event = rowEvent(context, schema, 'Restored 1 row');
  const row = {
    id: rowId,
    version: (deletedVersion + 1n).toString(),
    createdAt: last!.created_at,
    updatedAt: event.at,
    values: Object.fromEntries(schema.fields.map((field) => [field.id, values.get(field.id) ?? null])),
  };
  const result: RowMutationShape = { row, mutationId: event.mutationId };
  const statement = restoreRow(
    schema,
    { rowId, deletedVersion, schemaVersion: schema.schemaVersion, createdAt: row.createdAt, values, event },
    (params, source) => tx.recordWith(result, params, source),
  );
  const [inserted] = await run<{ id: string }>(tx.executor, schema, statement);
  if (!inserted) return explainRefusedRestore(tx.executor, schema, rowId, body.expectedVersion);
  const rowLimit = context.config.TABLE_ROW_LIMIT;
  tx.guardCommit({
    sql: claimRowCapacity(schema.tableId, rowLimit),
    explain: async (error) => rowLimitReached(error, rowLimit),
  });
  return result;
}

builder.mutationFields((t) => ({
  restoreRow: t.field({
    type: RowMutation,
    description:
      'Brings a deleted row back from its cell history, with its old id, at the version after its deletion ' +
      '(`expectedVersion` = the deletion’s version). Values are checked against today’s schema; unique rules, foreign ' +
      'keys, the row limit, cell history (operation `restore`), a `records.changed` event and idempotency as for a create.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      rowId: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: RestoreRowInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'write' }, oauth: 'rows:write' }),
    resolve: async (_root, { input: body, ...args }, context) => {
      const address = addressOf(args);
      const rowId = String(args.rowId);
      const schema = await currentSchema(context, address);
      return idempotentSql(
        context,
        { operation: 'restoreRow', key: args.idempotencyKey, input: { ...address, rowId, ...body } },
        (tx) => bringBack(context, tx, schema, rowId, body),
      );
    },
  }),
}));
