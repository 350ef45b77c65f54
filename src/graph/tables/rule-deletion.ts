import type { TransactionClient } from '../../db/prisma.ts';
import { prismaExecutor } from '../../db/sql.ts';
import { selectKeysReferencingRule, type RuleReference } from '../../catalog/unique-rule-deletion.ts';
import { notFound } from '../../kernel/errors.ts';
import { referencedRuleConflict } from '../../jobs/kinds/schema/deleteUniqueRule.ts';
import { requireCaller } from '../server/guards.ts';
import { builder } from '../server/builder.ts';
import { Id } from '../../kernel/formats.ts';
import type { Context } from '../server/context.ts';
import { idempotent } from '../../idempotency/run.ts';
import { enqueueJob, JobHandle, type JobHandleShape } from '../jobs/enqueue.ts';
import { startScopes } from '../jobs/start-authority.ts';
import { addressOf, tableAddressArgs } from './address.ts';
import type { TableAddress } from '../../catalog/table-schema.ts';
import { lockTableForSchemaChange } from './schema-endpoint.ts';
import { schemaSerialKey } from '../../jobs/engine/kinds.ts';

/**
 * DELETE …/unique-rules/{ruleId} (issue 13): checked at once (404, 409 while a foreign key uses the rule, 409
 * SCHEMA_MAINTENANCE while another schema change runs), then the `deleteUniqueRule` job drops the index online.
 */
async function requestRuleDeletion(
  tx: TransactionClient,
  context: Context,
  address: TableAddress,
  ruleId: string,
): Promise<JobHandleShape> {
  await lockTableForSchemaChange(tx, address);
  const rule = await tx.uniqueRule.findFirst({
    where: { id: ruleId, tableId: address.tableId },
    select: { fieldIds: true },
  });
  if (!rule) throw notFound('unique rule');
  const check = selectKeysReferencingRule(ruleId);
  const keys = await prismaExecutor(tx).run<RuleReference>(check);
  if (keys.length > 0) throw referencedRuleConflict(keys);
  const names = await tx.field.findMany({ where: { id: { in: rule.fieldIds } }, select: { name: true } });
  const summary = `Remove the unique rule on ${names.map((field) => field.name).join(', ')}`;
  return enqueueJob(tx, requireCaller(context), {
    kind: 'deleteUniqueRule',
    category: 'schema',
    ...address,
    serialKey: schemaSerialKey(address.tableId),
    payload: { ...address, ruleId, summary },
    summary,
    queueLimit: context.config.JOB_QUEUE_LIMIT_PER_ORG,
  });
}

builder.mutationFields((t) => ({
  deleteUniqueRule: t.field({
    type: JobHandle,
    description:
      'Removes a unique rule as a job (202) that drops its index online; `rule.delete` and a schemaVersion bump at its end. ' +
      'Refused (409 FOREIGN_KEY_CONFLICT) while a foreign key references the rule.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      ruleId: t.arg.id({ required: true, validate: Id }),
    },
    authScopes: (_root, { orgId }) => startScopes('deleteUniqueRule', orgId),
    resolve: (_root, args, context) => {
      const address = addressOf(args);
      const ruleId = String(args.ruleId);
      return idempotent(
        context,
        { operation: 'deleteUniqueRule', key: args.idempotencyKey, input: { ...address, ruleId } },
        (tx) => requestRuleDeletion(tx, context, address, ruleId),
      );
    },
  }),
}));
