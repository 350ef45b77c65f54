import { builder } from '../server/builder.ts';
import { idempotent } from '../../idempotency/run.ts';
import { JobHandle } from '../jobs/enqueue.ts';
import { startScopes } from '../jobs/start-authority.ts';
import { enqueueSchemaChange } from '../jobs/schema-changes.ts';
import { addressOf, tableAddressArgs } from './address.ts';
import { CreateForeignKeyInput } from './foreign-keys.ts';
import { CreateUniqueRuleInput } from './unique-rules.ts';

/**
 * Creating a unique rule or a foreign key is a schema-change job (issue 5): the request is checked against the
 * table at once (422, 409), then the index or constraint is built online, without holding row writes back, and
 * the rule or key appears in the schema at the job's cutover (`rule.create`, `foreign-key.create`). The same jobs
 * serve endpoint 5's `add_unique_rule` and `add_foreign_key`.
 */
builder.mutationFields((t) => ({
  createUniqueRule: t.field({
    type: JobHandle,
    description:
      'Adds a unique rule as a job (202): existing duplicates fail the job with UNIQUE_CONFLICT listing them. Bumps schemaVersion at its cutover.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      input: t.arg({ type: CreateUniqueRuleInput, required: true }),
    },
    authScopes: (_root, { orgId }) => startScopes('createUniqueRule', orgId),
    resolve: (_root, { input, ...args }, context) => {
      const { expectedSchemaVersion, fieldIds, where } = input;
      const address = addressOf(args);
      return idempotent(
        context,
        {
          operation: 'createUniqueRule',
          key: args.idempotencyKey,
          input: { ...address, expectedSchemaVersion, fieldIds, where },
        },
        (tx) =>
          enqueueSchemaChange(tx, context, address, {
            expectedSchemaVersion,
            problemsUnder: null,
            change: { kind: 'add_unique_rule', fieldIds, ...(where === undefined ? {} : { where }) },
          }),
      );
    },
  }),
  createForeignKey: t.field({
    type: JobHandle,
    description:
      'Links fields to an unconditional unique rule of a table in the same database, as a job (202): existing orphans fail ' +
      'the job with FOREIGN_KEY_CONFLICT listing them. Bumps schemaVersion at its cutover.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      input: t.arg({ type: CreateForeignKeyInput, required: true }),
    },
    authScopes: (_root, { orgId }) => startScopes('createForeignKey', orgId),
    resolve: (_root, { input, ...args }, context) => {
      const { expectedSchemaVersion, ...key } = input;
      const address = addressOf(args);
      return idempotent(
        context,
        {
          operation: 'createForeignKey',
          key: args.idempotencyKey,
          input: { ...address, expectedSchemaVersion, ...key },
        },
        (tx) =>
          enqueueSchemaChange(tx, context, address, {
            expectedSchemaVersion,
            problemsUnder: null,
            change: { kind: 'add_foreign_key', ...key },
          }),
      );
    },
  }),
}));
