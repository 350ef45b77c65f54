import type { TransactionClient } from '../../db/prisma.ts';
import { DomainError, validationFailed, type FieldProblem } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { MAX_INDEXES_PER_TABLE } from '../../data/sort-indexes.ts';
import { CHANGE_JOBS, planChange, type SchemaChange, type PlannedChange } from '../../jobs/kinds/schema/plan.ts';
import { schemaSerialKey } from '../../jobs/engine/kinds.ts';
import { schemaVersionConflict, type TableAddress, type TableSchema } from '../../catalog/table-schema.ts';
import { resolveEndpoints } from '../tables/foreign-keys.ts';
import { checkRule } from '../tables/unique-rules.ts';
import { requireCaller } from '../server/guards.ts';
import { builder } from '../server/builder.ts';
import type { Context } from '../server/context.ts';
import { idempotent } from '../../idempotency/run.ts';
import { enqueueJob, JobHandle, type JobHandleShape } from './enqueue.ts';
import { startScopes } from './start-authority.ts';
import { addressOf, tableAddressArgs } from '../tables/address.ts';
import { currentSchema } from '../tables/schema-endpoint.ts';
import { ApplySchemaChangeBody } from '../../contracts/jobs.ts';

const ApplySchemaChangeInput = builder
  .inputType('ApplySchemaChangeInput', {
    fields: (t) => ({
      expectedSchemaVersion: t.int({ required: true }),
      change: t.field({
        type: 'JSON',
        required: true,
        description:
          '`{kind, …}`: add_field {field}, rename_field {fieldId, name}, update_field {fieldId, required?, options?}, ' +
          'convert_field {fieldId, type, options?, onUnconvertible?}, delete_field {fieldId}, reorder_fields {fieldIds}, ' +
          'add_index {fields: [{field, direction}]}, drop_index {indexId}.',
      }),
    }),
  })
  .validate(ApplySchemaChangeBody);

function describe(schema: TableSchema, change: PlannedChange, referencedTableName?: string): string {
  const name = (fieldId: string) => schema.fieldsById.get(fieldId)?.name ?? fieldId;
  switch (change.kind) {
    case 'add_field':
      return `Add field ${change.field.name} (${change.field.type})`;
    case 'rename_field':
      return `Rename field ${name(change.fieldId)} to ${change.name}`;
    case 'update_field':
      return `Update field ${name(change.fieldId)}`;
    case 'convert_field':
      return `Convert field ${name(change.fieldId)} to ${change.type}`;
    case 'delete_field':
      return `Delete field ${name(change.fieldId)}`;
    case 'reorder_fields':
      return 'Reorder fields';
    case 'add_unique_rule':
      return `Create a unique rule on ${change.fieldIds.map(name).join(', ')}`;
    case 'add_foreign_key':
      return `Link ${change.fieldIds.map(name).join(', ')} to ${referencedTableName ?? 'another table'}`;
    case 'add_index':
      if (change.method === 'search')
        return `Search index over ${change.keys.map((key) => name(key.fieldId)).join(', ')}`;
      if (change.method === 'trigram')
        return `Trigram index on ${change.keys.map((key) => name(key.fieldId)).join(', ')}`;
      return `Index ${change.keys.map((key) => `${name(key.fieldId)} ${key.direction}`).join(', ')}`;
    case 'drop_index':
      return `Drop index ${change.indexId}`;
  }
}

type ConstraintChange = Extract<SchemaChange, { kind: 'add_unique_rule' | 'add_foreign_key' }>;

/**
 * Rules and keys are checked by the rules' own code (src/graph/tables): 422 before any job. `problemsUnder` moves
 * their problem paths under `change` for endpoint 5, whose body nests them there.
 */
async function planConstraint(
  tx: TransactionClient,
  context: Context,
  schema: TableSchema,
  change: ConstraintChange,
  problemsUnder: string | null,
): Promise<PlannedChange> {
  const relocate = (error: unknown) => (problemsUnder ? nestProblems(error, problemsUnder) : error);
  if (change.kind === 'add_unique_rule') {
    let checked;
    try {
      checked = checkRule(schema, { fieldIds: change.fieldIds, where: change.where });
    } catch (error) {
      throw relocate(error);
    }
    return {
      kind: 'add_unique_rule',
      ruleId: newId(),
      fieldIds: checked.fields.map((field) => field.id),
      where: change.where ?? null,
      enforcement: checked.enforcement,
    };
  }
  const body = {
    fieldIds: change.fieldIds,
    referencedTableId: change.referencedTableId,
    referencedRuleId: change.referencedRuleId,
  };
  const ends = await resolveEndpoints(context, tx, schema, body).catch((error: unknown) => {
    throw relocate(error);
  });
  return {
    kind: 'add_foreign_key',
    foreignKeyId: newId(),
    fieldIds: ends.fields.map((field) => field.id),
    referencedTableId: ends.referenced.tableId,
    referencedRuleId: change.referencedRuleId,
    referencedFieldIds: ends.referencedFields.map((field) => field.id),
  };
}

function nestProblems(error: unknown, under: string): unknown {
  if (!(error instanceof DomainError) || error.code !== 'VALIDATION_FAILED') return error;
  const details = error.details as { problems?: FieldProblem[] } | undefined;
  return validationFailed(
    (details?.problems ?? []).map((problem) => ({ ...problem, path: [under, ...problem.path] })),
    error.message,
  );
}

/** A new index beyond the cap is refused at once (409 CAPACITY_LIMIT); adopting an automatic one adds none. */
function checkIndexCapacity(schema: TableSchema, indexId: string): void {
  if (schema.indexes.some((index) => index.id === indexId) || schema.indexes.length < MAX_INDEXES_PER_TABLE) return;
  throw new DomainError(
    'CAPACITY_LIMIT',
    `A table may have at most ${MAX_INDEXES_PER_TABLE} indexes, automatic ones included; drop one first.`,
    {
      details: {
        limit: MAX_INDEXES_PER_TABLE,
        scope: 'table indexes',
        indexIds: schema.indexes.map((index) => index.id),
      },
    },
  );
}

export interface SchemaChangeRequest {
  /** The version the change was written against; absent, the table's current version (rule and key endpoints). */
  expectedSchemaVersion: number | undefined;
  change: SchemaChange;
  /** Where the change sits in the request body, for problem paths (`change` on endpoint 5; top level elsewhere). */
  problemsUnder: string | null;
}

/**
 * Checks a schema change against the table (409 for a stale version, 422 for a change that does not fit) and
 * enqueues its job in the request's transaction; one change per table at a time (409 SCHEMA_MAINTENANCE).
 */
export async function enqueueSchemaChange(
  tx: TransactionClient,
  context: Context,
  address: TableAddress,
  request: SchemaChangeRequest,
): Promise<JobHandleShape> {
  const schema = await currentSchema(context, address);
  const expectedSchemaVersion = request.expectedSchemaVersion ?? schema.schemaVersion;
  if (schema.schemaVersion !== expectedSchemaVersion)
    throw schemaVersionConflict(expectedSchemaVersion, schema.schemaVersion);
  let change: PlannedChange;
  if (request.change.kind === 'add_unique_rule' || request.change.kind === 'add_foreign_key') {
    change = await planConstraint(tx, context, schema, request.change, request.problemsUnder);
  } else {
    const planned = planChange(schema, request.change, newId());
    if (planned.problems.length > 0)
      throw validationFailed(planned.problems, 'The schema change does not fit the table.');
    change = planned.change;
    if (change.kind === 'add_index') checkIndexCapacity(schema, change.indexId);
  }
  const referenced =
    change.kind === 'add_foreign_key'
      ? await tx.dataTable.findUnique({ where: { id: change.referencedTableId }, select: { name: true } })
      : null;
  const summary = describe(schema, change, referenced?.name);
  return enqueueJob(tx, requireCaller(context), {
    kind: CHANGE_JOBS[change.kind].kind,
    category: 'schema',
    ...address,
    serialKey: schemaSerialKey(address.tableId),
    summary: `Queued: ${summary}`,
    payload: { ...address, expectedSchemaVersion, change, summary },
    queueLimit: context.config.JOB_QUEUE_LIMIT_PER_ORG,
  });
}

builder.mutationFields((t) => ({
  applySchemaChange: t.field({
    type: JobHandle,
    description:
      'Starts a journalled, resumable schema change with verified cutover (endpoint 5). One change per table at a time (409 SCHEMA_MAINTENANCE).',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      input: t.arg({ type: ApplySchemaChangeInput, required: true }),
    },
    authScopes: (_root, { orgId }) => startScopes('applySchemaChange', orgId),
    resolve: (_root, args, context) => {
      const body = args.input;
      const address = addressOf(args);
      return idempotent(
        context,
        { operation: 'applySchemaChange', key: args.idempotencyKey, input: { ...address, ...body } },
        (tx) =>
          enqueueSchemaChange(tx, context, address, {
            expectedSchemaVersion: body.expectedSchemaVersion,
            change: body.change,
            problemsUnder: 'change',
          }),
      );
    },
  }),
}));
