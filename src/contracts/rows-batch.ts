import { z } from 'zod';
import { Id, SchemaVersion, VersionString } from '../kernel/formats.ts';
import { RowResponse, RowValues } from './rows.ts';

/**
 * POST …/rows/batch and `batchRows(input:)` (issue 13): up to 1,000 creates, updates, deletes and upserts in one
 * transaction, all or nothing. How each operation fits the table is the domain's check
 * (src/graph/rows/batch/plan.ts), not a shape. No side effects.
 */
export const MAX_BATCH_OPERATIONS = 1_000;

/**
 * An update or delete names its row by `rowId` (with `expectedVersion`), or by `matchOn` (an unconditional unique
 * rule) and `key` (its fields' values in its order), where `expectedVersion` is optional (issue 28).
 */
const RowTarget = {
  rowId: Id.optional(),
  matchOn: Id.optional().describe('an unconditional unique rule of the table, instead of rowId'),
  key: z.array(z.unknown()).min(1).max(16).optional().describe('with matchOn: the rule’s field values in its order'),
  expectedVersion: VersionString.optional().describe('required with rowId, optional with matchOn'),
};
function targetIssues(
  operation: {
    rowId?: string | undefined;
    matchOn?: string | undefined;
    key?: unknown[] | undefined;
    expectedVersion?: string | undefined;
  },
  context: z.core.$RefinementCtx,
): void {
  if (operation.rowId !== undefined) {
    if (operation.matchOn !== undefined || operation.key !== undefined)
      context.addIssue({ code: 'custom', path: ['matchOn'], message: 'must be absent with rowId' });
    if (operation.expectedVersion === undefined)
      context.addIssue({ code: 'custom', path: ['expectedVersion'], message: 'is required with rowId' });
  } else if (operation.matchOn === undefined) {
    context.addIssue({ code: 'custom', path: ['rowId'], message: 'is required (or matchOn and key)' });
  } else if (operation.key === undefined) {
    context.addIssue({ code: 'custom', path: ['key'], message: 'is required with matchOn' });
  }
}
export const BatchOperation = z.discriminatedUnion(
  'op',
  [
    z.strictObject({ op: z.literal('create'), values: RowValues }),
    z.strictObject({ op: z.literal('update'), ...RowTarget, values: RowValues }).superRefine(targetIssues),
    z.strictObject({ op: z.literal('delete'), ...RowTarget }).superRefine(targetIssues),
    z.strictObject({
      op: z.literal('upsert'),
      matchOn: Id.describe('an unconditional unique rule of the table'),
      values: RowValues,
    }),
  ],
  { error: 'op must be one of create, update, delete, upsert' },
);
export type BatchOperation = z.infer<typeof BatchOperation>;

export const BatchRowsBody = z.strictObject({
  expectedSchemaVersion: SchemaVersion,
  operations: z.array(BatchOperation).min(1).max(MAX_BATCH_OPERATIONS),
});
export type BatchRowsBody = z.infer<typeof BatchRowsBody>;

export const BATCH_OUTCOMES = ['created', 'updated', 'deleted', 'unchanged'] as const;
export type BatchOutcome = (typeof BATCH_OUTCOMES)[number];

/** One result per operation, in request order, and the mutation id of the batch's history and event. */
export const RowBatchResponse = z.strictObject({
  results: z.array(z.strictObject({ row: RowResponse, outcome: z.enum(BATCH_OUTCOMES) })),
  mutationId: Id,
});
