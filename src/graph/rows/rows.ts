import type { SqlExecutor } from '../../db/sql.ts';
import { recogniseFailure } from '../../data/failures.ts';
import { typeSpecOf, type CellValue } from '../../data/field-types.ts';
import {
  allocateGenerated,
  claimRowCapacity,
  deleteRow,
  insertRow,
  releaseRowCapacity,
  rowGuardState,
  selectRow,
  toRowShape,
  updateRow,
  type RowEvent,
  type RowAnswer,
  type RowRecord,
  type RowShape,
} from '../../data/rows.ts';
import type { Statement } from '../../data/statement.ts';
import { DomainError, notFound } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { actorOf } from '../../catalog/activity.ts';
import { requireCaller } from '../server/guards.ts';
import { builder } from '../server/builder.ts';
import { Id, storedVersion } from '../../kernel/formats.ts';
import { CreateRowBody, DeleteRowBody, UpdateRowBody } from '../../contracts/rows.ts';
import { dataPlane, type Context } from '../server/context.ts';
import { idempotentSql, type IdempotentTransaction, type OneStatementWrite } from '../../idempotency/run.ts';
import { schemaVersionConflict, type TableAddress, type TableSchema } from '../../catalog/table-schema.ts';
import { addressOf, tableAddressArgs } from '../tables/address.ts';
import { failureToDomainError } from './row-failures.ts';
import { rowFromTable } from './row-origin.ts';
import { checkRowSize, checkValues } from './row-values.ts';
import { currentSchema, schemaExpecting } from '../tables/schema-endpoint.ts';

/** Spec 4.8 / 2.6: create, read, update and delete rows, each write one statement in one transaction. */
export type RowMutationShape = { row: RowShape; mutationId: string };
export type RowDeletionShape = { id: string; deleted: boolean; version: string; mutationId: string };

export const Row = builder.objectRef<RowAnswer>('Row').implement({
  description: 'A row: `values` holds every field’s cell keyed by field id (null when empty).',
  fields: (t) => ({
    id: t.exposeID('id'),
    version: t.exposeString('version'),
    createdAt: t.field({ type: 'Timestamp', resolve: (row) => row.createdAt }),
    updatedAt: t.field({ type: 'Timestamp', resolve: (row) => row.updatedAt }),
    values: t.field({ type: 'JSON', resolve: (row) => row.values }),
  }),
});

export const RowMutation = builder.objectRef<RowMutationShape>('RowMutation').implement({
  description: 'A committed row write and the mutation id recorded in its cell history and activity event.',
  fields: (t) => ({
    row: t.field({ type: Row, resolve: (result) => result.row }),
    mutationId: t.exposeID('mutationId'),
  }),
});

const RowDeletion = builder.objectRef<RowDeletionShape>('RowDeletion').implement({
  description: 'A deleted row: `version` is the version of the deletion recorded in its history.',
  fields: (t) => ({
    id: t.exposeID('id'),
    deleted: t.exposeBoolean('deleted'),
    version: t.exposeString('version'),
    mutationId: t.exposeID('mutationId'),
  }),
});

const CreateRowInput = builder
  .inputType('CreateRowInput', {
    fields: (t) => ({
      expectedSchemaVersion: t.int({ required: true }),
      values: t.field({ type: 'JSON', required: true }),
    }),
  })
  .validate(CreateRowBody);
const UpdateRowInput = builder
  .inputType('UpdateRowInput', {
    fields: (t) => ({
      expectedVersion: t.string({ required: true }),
      values: t.field({ type: 'JSON', required: true }),
      expectedSchemaVersion: t.int(),
    }),
  })
  .validate(UpdateRowBody);
const DeleteRowInput = builder
  .inputType('DeleteRowInput', {
    fields: (t) => ({ expectedVersion: t.string({ required: true }), expectedSchemaVersion: t.int() }),
  })
  .validate(DeleteRowBody);

export async function run<T>(executor: SqlExecutor, schema: TableSchema, statement: Statement): Promise<T[]> {
  try {
    return await executor.query<T>(statement.sql, statement.params);
  } catch (error) {
    throw failureToDomainError(schema, error) ?? error;
  }
}

export function rowEvent(context: Context, schema: TableSchema, summary: string): RowEvent {
  return {
    orgId: schema.orgId,
    mutationId: newId(),
    activityId: newId(),
    summary,
    actor: actorOf(requireCaller(context)),
    at: new Date().toISOString(),
  };
}

export function checkSchemaVersion(schema: TableSchema, expected: number | undefined): void {
  if (expected !== undefined && expected !== schema.schemaVersion)
    throw schemaVersionConflict(expected, schema.schemaVersion);
}

/** Why an insert found the table changed: its schema moved on, or it is gone. */
export async function explainRefusedInsert(executor: SqlExecutor, schema: TableSchema): Promise<never> {
  const [state] = await run<{ schema_version: number; state: string }>(executor, schema, rowGuardState(schema.tableId));
  if (state?.state !== 'active') throw notFound('table');
  throw schemaVersionConflict(schema.schemaVersion, state.schema_version);
}

export function rowLimitReached(error: unknown, rowLimit: number): DomainError | null {
  if (recogniseFailure(error)?.kind !== 'tableFull') return null;
  return new DomainError('ROW_LIMIT_REACHED', `The table holds its maximum of ${rowLimit} rows.`, {
    details: { limit: rowLimit },
  });
}

async function explainMissedRow(
  executor: SqlExecutor,
  schema: TableSchema,
  rowId: string,
  expectedVersion: string,
): Promise<never> {
  const [state] = await run<{ schema_version: number }>(executor, schema, rowGuardState(schema.tableId));
  if (state && state.schema_version !== schema.schemaVersion)
    throw schemaVersionConflict(schema.schemaVersion, state.schema_version);
  const [current] = await run<RowRecord>(executor, schema, selectRow(schema, rowId));
  if (!current) throw notFound('row');
  throw new DomainError('ROW_VERSION_CONFLICT', 'The row was changed by someone else; read it again and retry.', {
    details: { expectedVersion, currentVersion: current.version },
  });
}

interface PreparedCreate {
  values: Map<string, CellValue>;
  event: RowEvent;
  result: RowMutationShape;
}

/** The checked values of a create, its event and its response (see createRow). */
function prepareCreate(context: Context, schema: TableSchema, values: Map<string, CellValue>): PreparedCreate {
  const event = rowEvent(context, schema, 'Created 1 row');
  return { values, event, result: { row: newRowShape(schema, values, event), mutationId: event.mutationId } };
}

function checkedValues(context: Context, schema: TableSchema, body: CreateRowBody): Map<string, CellValue> {
  const values = checkValues(schema, body.values, 'create');
  checkRowSize(values, context.config.ROW_SIZE_LIMIT_BYTES);
  return values;
}

async function createRow(
  context: Context,
  tx: IdempotentTransaction,
  schema: TableSchema,
  body: CreateRowBody,
): Promise<RowMutationShape> {
  checkSchemaVersion(schema, body.expectedSchemaVersion);
  const values = checkedValues(context, schema, body);
  await allocateGeneratedValues(tx.executor, schema, values);
  const { event, result } = prepareCreate(context, schema, values);
  const rowLimit = context.config.TABLE_ROW_LIMIT;
  // Every cell is known before the insert (canonical values read back identically, src/data/field-types.ts),
  // so the response is built here and recorded for replays by the insert statement itself.
  const insert = insertRow(
    schema,
    { rowId: result.row.id, schemaVersion: schema.schemaVersion, values, event },
    {
      also: (params, source) => tx.recordWith(result, params, source),
    },
  );
  const [inserted] = await run<{ id: string }>(tx.executor, schema, insert);
  if (!inserted) return explainRefusedInsert(tx.executor, schema);
  tx.guardCommit({
    sql: claimRowCapacity(schema.tableId, rowLimit),
    explain: async (error) => rowLimitReached(error, rowLimit),
  });
  return result;
}

/**
 * The common case in one statement (see OneStatementWrite): the insert, its history, event, idempotency record
 * and row-limit claim. Null sends the request down createRow's path, which explains every refusal. A table with
 * autoNumber fields always goes that way: a number drawn here and then discarded would leave a gap for nothing.
 */
async function createRowAtOnce(
  context: Context,
  once: OneStatementWrite,
  schema: TableSchema,
  body: CreateRowBody,
): Promise<RowMutationShape | null> {
  if (allocateGenerated(schema) !== null || body.expectedSchemaVersion !== schema.schemaVersion) return null;
  const { values, event, result } = prepareCreate(context, schema, checkedValues(context, schema, body));
  const insert = insertRow(
    schema,
    { rowId: result.row.id, schemaVersion: schema.schemaVersion, values, event },
    {
      gate: once.gate,
      also: (params, source) => once.recordWith(result, params, source),
      rowLimit: context.config.TABLE_ROW_LIMIT,
    },
  );
  const [inserted] = await once.executor.query<{ id: string }>(insert.sql, insert.params);
  return inserted ? result : null;
}

/** Draws autoNumber values, so that the whole row is known before it is written. */
export async function allocateGeneratedValues(
  executor: SqlExecutor,
  schema: TableSchema,
  values: Map<string, CellValue>,
): Promise<void> {
  const statement = allocateGenerated(schema);
  if (!statement) return;
  const [drawn] = await run<Record<string, string>>(executor, schema, statement);
  schema.fields
    .filter((field) => typeSpecOf(field.type).generated)
    .forEach((field, index) => values.set(field.id, Number(drawn![`g${index}`])));
}

function newRowShape(schema: TableSchema, values: ReadonlyMap<string, CellValue>, event: RowEvent): RowShape {
  return {
    id: newId(),
    version: '1',
    createdAt: event.at,
    updatedAt: event.at,
    values: Object.fromEntries(schema.fields.map((field) => [field.id, values.get(field.id) ?? null])),
  };
}

async function changeRow(
  context: Context,
  tx: IdempotentTransaction,
  schema: TableSchema,
  rowId: string,
  body: UpdateRowBody,
): Promise<RowMutationShape> {
  checkSchemaVersion(schema, body.expectedSchemaVersion);
  const values: Map<string, CellValue> = checkValues(schema, body.values, 'update');
  const expectedVersion = storedVersion(body.expectedVersion);
  if (expectedVersion === null) return explainMissedRow(tx.executor, schema, rowId, body.expectedVersion);
  const event = rowEvent(context, schema, 'Updated 1 row');
  const [record] = await run<RowRecord>(
    tx.executor,
    schema,
    updateRow(schema, { rowId, expectedVersion, values, schemaVersion: schema.schemaVersion, event }),
  );
  if (!record) return explainMissedRow(tx.executor, schema, rowId, body.expectedVersion);
  const row = toRowShape(schema.fields, record);
  checkRowSize(new Map(Object.entries(row.values)), context.config.ROW_SIZE_LIMIT_BYTES);
  return { row, mutationId: event.mutationId };
}

async function removeRow(
  context: Context,
  tx: IdempotentTransaction,
  schema: TableSchema,
  rowId: string,
  body: DeleteRowBody,
): Promise<RowDeletionShape> {
  checkSchemaVersion(schema, body.expectedSchemaVersion);
  const expectedVersion = storedVersion(body.expectedVersion);
  if (expectedVersion === null) return explainMissedRow(tx.executor, schema, rowId, body.expectedVersion);
  const event = rowEvent(context, schema, 'Deleted 1 row');
  const [removed] = await run<{ id: string; version: string }>(
    tx.executor,
    schema,
    deleteRow(schema, { rowId, expectedVersion, schemaVersion: schema.schemaVersion, event }),
  );
  if (!removed) return explainMissedRow(tx.executor, schema, rowId, body.expectedVersion);
  tx.guardCommit({ sql: releaseRowCapacity(schema.tableId), explain: async () => null });
  return { id: removed.id, deleted: true, version: removed.version, mutationId: event.mutationId };
}

export async function readRow(context: Context, address: TableAddress, rowId: string): Promise<RowShape> {
  const schema = await currentSchema(context, address);
  const [record] = await run<RowRecord>(dataPlane(context), schema, selectRow(schema, rowId));
  if (!record) throw notFound('row');
  return rowFromTable(schema, toRowShape(schema.fields, record));
}

builder.queryFields((t) => ({
  row: t.field({
    type: Row,
    args: { ...tableAddressArgs, rowId: t.arg.id({ required: true, validate: Id }) },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    resolve: (_root, args, context) => readRow(context, addressOf(args), String(args.rowId)),
  }),
}));

builder.mutationFields((t) => ({
  createRow: t.field({
    type: RowMutation,
    description:
      'Creates a row (spec 4.8): validation, unique rules, foreign keys, row and size limits, initial cell history, ' +
      'a `records.changed` event and the idempotency record commit together.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      input: t.arg({ type: CreateRowInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'write' }, oauth: 'rows:write' }),
    resolve: async (_root, { input: body, ...args }, context) => {
      const address = addressOf(args);
      const schema = await schemaExpecting(context, address, body.expectedSchemaVersion);
      return idempotentSql(
        context,
        { operation: 'createRow', key: args.idempotencyKey, input: { ...address, ...body } },
        (tx) => createRow(context, tx, schema, body),
        (once) => createRowAtOnce(context, once, schema, body),
      );
    },
  }),
  updateRow: t.field({
    type: RowMutation,
    description: 'Changes the named cells of a row still at `expectedVersion` (else 409 ROW_VERSION_CONFLICT).',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      rowId: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: UpdateRowInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'write' }, oauth: 'rows:write' }),
    resolve: async (_root, { input: body, ...args }, context) => {
      const address = addressOf(args);
      const rowId = String(args.rowId);
      const schema = await currentSchema(context, address);
      return idempotentSql(
        context,
        { operation: 'updateRow', key: args.idempotencyKey, input: { ...address, rowId, ...body } },
        (tx) => changeRow(context, tx, schema, rowId, body),
      );
    },
  }),
  deleteRow: t.field({
    type: RowDeletion,
    description: 'Deletes a row still at `expectedVersion`; its cell history stays readable.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      rowId: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: DeleteRowInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'write' }, oauth: 'rows:write' }),
    resolve: async (_root, { input: body, ...args }, context) => {
      const address = addressOf(args);
      const rowId = String(args.rowId);
      const schema = await currentSchema(context, address);
      return idempotentSql(
        context,
        { operation: 'deleteRow', key: args.idempotencyKey, input: { ...address, rowId, ...body } },
        (tx) => removeRow(context, tx, schema, rowId, body),
      );
    },
  }),
}));
