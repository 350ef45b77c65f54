import { z } from 'zod';
import type { TransactionClient } from '../db/prisma.ts';
import { DomainError, validationFailed, type FieldProblem } from '../errors.ts';
import { newId } from '../ids.ts';
import { CHANGE_JOBS, planChange, SchemaChange, type PlannedChange } from '../jobs/schema/change.ts';
import type { TableSchema } from './tables/loader.ts';
import { resolveEndpoints } from './tables/foreign-keys.ts';
import { checkRule } from './tables/unique-rules.ts';
import { requireCaller } from './auth/guards.ts';
import { builder } from './builder.ts';
import { SchemaVersion } from './common.ts';
import type { Context } from './context.ts';
import { idempotent } from './idempotency.ts';
import { enqueueJob, JobHandle, type JobHandleShape } from './jobs/enqueue.ts';
import { addressOf, tableAddressArgs } from './tables/address.ts';
import type { TableAddress } from './tables/loader.ts';
import { currentSchema, schemaVersionConflict } from './tables/schema.ts';

/** Endpoint 5: a journalled, resumable schema change with verified cutover, run as a durable job. */
export const ApplySchemaChangeBody = z.strictObject({
  expectedSchemaVersion: SchemaVersion,
  change: SchemaChange,
});
type ApplySchemaChangeBody = z.infer<typeof ApplySchemaChangeBody>;

const ApplySchemaChangeInput = builder.inputType('ApplySchemaChangeInput', {
  fields: (t) => ({
    expectedSchemaVersion: t.int({ required: true }),
    change: t.field({
      type: 'JSON',
      required: true,
      description: '`{kind, …}`: add_field {field}, rename_field {fieldId, name}, update_field {fieldId, required?, options?}, '
        + 'convert_field {fieldId, type, options?, onUnconvertible?}, delete_field {fieldId}, reorder_fields {fieldIds}.',
    }),
  }),
  validate: ApplySchemaChangeBody,
});

function describe(schema: TableSchema, change: PlannedChange): string {
  const name = (fieldId: string) => schema.fieldsById.get(fieldId)?.name ?? fieldId;
  switch (change.kind) {
    case 'add_field': return `Add field ${change.field.name} (${change.field.type})`;
    case 'rename_field': return `Rename field ${name(change.fieldId)} to ${change.name}`;
    case 'update_field': return `Update field ${name(change.fieldId)}`;
    case 'convert_field': return `Convert field ${name(change.fieldId)} to ${change.type}`;
    case 'delete_field': return `Delete field ${name(change.fieldId)}`;
    case 'reorder_fields': return 'Reorder fields';
    case 'add_unique_rule': return `Create a unique rule on ${change.fieldIds.map(name).join(', ')}`;
    case 'add_foreign_key': return `Link ${change.fieldIds.map(name).join(', ')} to another table`;
  }
}

/** Rules and keys are checked by the same code as their synchronous endpoints (422 / 409 before any job). */
async function planConstraint(tx: TransactionClient, context: Context, schema: TableSchema, change: Extract<SchemaChange, { kind: 'add_unique_rule' | 'add_foreign_key' }>): Promise<PlannedChange> {
  const inChange = <T>(work: () => T): T => {
    try {
      return work();
    } catch (error) {
      throw underChange(error);
    }
  };
  if (change.kind === 'add_unique_rule') {
    const fields = inChange(() => checkRule(schema, { fieldIds: change.fieldIds, where: change.where }));
    return { kind: 'add_unique_rule', ruleId: newId(), fieldIds: fields.map((field) => field.id), where: change.where ?? null };
  }
  const body = { fieldIds: change.fieldIds, referencedTableId: change.referencedTableId, referencedRuleId: change.referencedRuleId };
  const ends = await resolveEndpoints(context, tx, schema, body).catch((error: unknown) => { throw underChange(error); });
  return {
    kind: 'add_foreign_key', foreignKeyId: newId(), fieldIds: ends.fields.map((field) => field.id), referencedTableId: ends.referenced.tableId,
    referencedRuleId: change.referencedRuleId, referencedFieldIds: ends.referencedFields.map((field) => field.id),
  };
}

/** The rules' own problems name body paths; under endpoint 5 they sit inside `change`. */
function underChange(error: unknown): unknown {
  if (!(error instanceof DomainError) || error.code !== 'VALIDATION_FAILED') return error;
  const details = error.details as { problems?: FieldProblem[] } | undefined;
  return validationFailed((details?.problems ?? []).map((problem) => ({ ...problem, path: ['change', ...problem.path] })), error.message);
}

async function applySchemaChange(tx: TransactionClient, context: Context, address: TableAddress, body: ApplySchemaChangeBody): Promise<JobHandleShape> {
  const schema = await currentSchema(context, address);
  if (schema.schemaVersion !== body.expectedSchemaVersion) throw schemaVersionConflict(body.expectedSchemaVersion, schema.schemaVersion);
  let change: PlannedChange;
  if (body.change.kind === 'add_unique_rule' || body.change.kind === 'add_foreign_key') {
    change = await planConstraint(tx, context, schema, body.change);
  } else {
    const planned = planChange(schema, body.change, newId());
    if (planned.problems.length > 0) throw validationFailed(planned.problems, 'The schema change does not fit the table.');
    change = planned.change;
  }
  const summary = describe(schema, change);
  return enqueueJob(tx, requireCaller(context), {
    kind: CHANGE_JOBS[change.kind].kind, category: 'schema', ...address, serialKey: `schema:${address.tableId}`, summary: `Queued: ${summary}`,
    payload: { ...address, expectedSchemaVersion: body.expectedSchemaVersion, change, summary },
  });
}

builder.mutationFields((t) => ({
  applySchemaChange: t.field({
    type: JobHandle,
    description: 'Starts a journalled, resumable schema change with verified cutover (endpoint 5). One change per table at a time (409 SCHEMA_MAINTENANCE).',
    args: { idempotencyKey: t.arg.string({ required: true }), ...tableAddressArgs, input: t.arg({ type: ApplySchemaChangeInput, required: true }) },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'manage' }, oauth: 'schema:manage' }),
    resolve: (_root, args, context) => {
      const body = ApplySchemaChangeBody.parse(args.input);
      const address = addressOf(args);
      return idempotent(context, { operation: 'applySchemaChange', key: args.idempotencyKey, input: { ...address, ...body } }, (tx) =>
        applySchemaChange(tx, context, address, body));
    },
  }),
}));
