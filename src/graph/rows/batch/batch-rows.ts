import type { CellValue } from '../../../data/field-types.ts';
import { claimRowsCapacity } from '../../../data/row-batch.ts';
import type { RowEvent, RowShape } from '../../../data/rows.ts';
import { builder } from '../../server/builder.ts';
import type { Context } from '../../server/context.ts';
import { idempotentSql, type IdempotentTransaction } from '../../../idempotency/run.ts';
import { addressOf, tableAddressArgs } from '../../tables/address.ts';
import { schemaVersionConflict, type TableSchema } from '../../../catalog/table-schema.ts';
import { BATCH_OUTCOMES, BatchRowsBody, type BatchOutcome } from '../../../contracts/rows-batch.ts';
import { Row, rowEvent, rowLimitReached } from '../rows.ts';
import { schemaExpecting } from '../../tables/schema-endpoint.ts';
import { completeInserts, writeChecked } from './execute.ts';
import { BatchFailures } from './failures.ts';
import { planBatch } from './plan.ts';
import { checkAgainstTables } from './table-checks.ts';
import { lockTargets, lockUpsertKeys, matchUpserts, resolveKeyedTargets } from './targets.ts';
import { decideWrites, type Writes } from './writes.ts';

/**
 * Row batches (issue 13): up to 1,000 creates, updates, deletes and upserts in one transaction, all or nothing.
 * Checks run first, for every operation: in memory (./plan.ts), then a few set-wise reads under row and key locks
 * (./targets.ts, ./table-checks.ts); only a batch without failures writes (./execute.ts), with one statement per kind
 * of write (src/data/row-batch.ts) and one `records.changed` event. The failures of all operations come back in one
 * answer (./failures.ts).
 */
export type RowBatchShape = { results: { row: RowShape; outcome: BatchOutcome }[]; mutationId: string };

function resultsOf(schema: TableSchema, writes: Writes, event: RowEvent): RowBatchShape['results'] {
  const created = (id: string, values: ReadonlyMap<string, CellValue>): RowShape => ({
    id,
    version: '1',
    createdAt: event.at,
    updatedAt: event.at,
    values: Object.fromEntries(schema.fields.map((field) => [field.id, values.get(field.id) ?? null])),
  });
  const results: { index: number; row: RowShape; outcome: BatchOutcome }[] = [
    ...writes.inserts.map(({ index, id, values }) => ({
      index,
      row: created(id, values),
      outcome: 'created' as const,
    })),
    ...writes.changes.map(({ index, row, values }) => ({
      index,
      outcome: 'updated' as const,
      row: {
        ...row,
        version: String(BigInt(row.version) + 1n),
        updatedAt: event.at,
        values: Object.fromEntries(values),
      },
    })),
    ...writes.deletes.map(({ index, row }) => ({
      index,
      row: { ...row, version: String(BigInt(row.version) + 1n) },
      outcome: 'deleted' as const,
    })),
    ...writes.unchanged.map(({ index, row }) => ({ index, row, outcome: 'unchanged' as const })),
  ];
  return results.sort((a, b) => a.index - b.index).map(({ row, outcome }) => ({ row, outcome }));
}

function summaryOf(writes: Writes): string {
  return (
    `Changed ${writes.inserts.length + writes.changes.length + writes.deletes.length} rows in a batch ` +
    `(${writes.inserts.length} created, ${writes.changes.length} updated, ${writes.deletes.length} deleted)`
  );
}

async function runBatch(
  context: Context,
  tx: IdempotentTransaction,
  schema: TableSchema,
  body: BatchRowsBody,
): Promise<RowBatchShape> {
  if (body.expectedSchemaVersion !== schema.schemaVersion)
    throw schemaVersionConflict(body.expectedSchemaVersion, schema.schemaVersion);
  const failures = new BatchFailures();
  const rowSizeLimit = context.config.ROW_SIZE_LIMIT_BYTES;
  const planned = planBatch(schema, body, failures, rowSizeLimit);
  await lockUpsertKeys(tx.executor, schema, planned);
  await resolveKeyedTargets(tx.executor, schema, planned, failures);
  const targets = await lockTargets(tx.executor, schema, planned, failures);
  const matched = await matchUpserts(tx.executor, schema, planned);
  const writes = decideWrites(schema, planned, targets, matched, failures, rowSizeLimit);
  await checkAgainstTables(tx.executor, schema, writes, failures);
  failures.throwIfAny(body.operations.length);

  const event = rowEvent(context, schema, summaryOf(writes));
  await completeInserts(tx.executor, schema, writes);
  await writeChecked(tx.executor, schema, writes, event, body.operations.length);
  const delta = writes.inserts.length - writes.deletes.length;
  const rowLimit = context.config.TABLE_ROW_LIMIT;
  if (delta !== 0)
    tx.guardCommit({
      sql: claimRowsCapacity(schema.tableId, delta, rowLimit),
      explain: async (error) => rowLimitReached(error, rowLimit),
    });
  return { results: resultsOf(schema, writes, event), mutationId: event.mutationId };
}

const RowBatchOutcome = builder.enumType('RowBatchOutcome', { values: BATCH_OUTCOMES });

const RowBatchResult = builder.objectRef<RowBatchShape['results'][number]>('RowBatchResult').implement({
  description:
    'One operation’s row: as written, as it stood when deleted (version = the deletion’s), or as it is when unchanged.',
  fields: (t) => ({
    row: t.field({ type: Row, resolve: (result) => result.row }),
    outcome: t.field({ type: RowBatchOutcome, resolve: (result) => result.outcome }),
  }),
});

const RowBatch = builder.objectRef<RowBatchShape>('RowBatch').implement({
  description:
    'A committed batch: one result per operation, in request order, and the mutation id of its history and event.',
  fields: (t) => ({
    results: t.field({ type: [RowBatchResult], resolve: (batch) => batch.results }),
    mutationId: t.exposeID('mutationId'),
  }),
});

const BatchRowsInput = builder
  .inputType('BatchRowsInput', {
    fields: (t) => ({
      expectedSchemaVersion: t.int({ required: true }),
      operations: t.field({
        type: ['JSON'],
        required: true,
        description:
          '1..1000 of {op: "create", values}, {op: "update", rowId, expectedVersion, values}, {op: "delete", rowId, expectedVersion}, ' +
          '{op: "upsert", matchOn: <unconditional unique rule id>, values}; update and delete may name their row by ' +
          '{matchOn: <unconditional unique rule id>, key: [values in the rule’s order], expectedVersion?} instead of rowId.',
      }),
    }),
  })
  .validate(BatchRowsBody);

builder.mutationFields((t) => ({
  batchRows: t.field({
    type: RowBatch,
    description:
      'Applies up to 1,000 row operations in one transaction, all or nothing (issue 13): every failing operation is reported ' +
      'by index in one answer (422 before 413 before 409); one `records.changed` event with `affectedRows`.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      input: t.arg({ type: BatchRowsInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'write' }, oauth: 'rows:write' }),
    resolve: async (_root, { input: body, ...args }, context) => {
      const address = addressOf(args);
      const schema = await schemaExpecting(context, address, body.expectedSchemaVersion);
      return idempotentSql(
        context,
        { operation: 'batchRows', key: args.idempotencyKey, input: { ...address, ...body } },
        (tx) => runBatch(context, tx, schema, body),
      );
    },
  }),
}));
