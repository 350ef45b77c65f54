import { pageById } from '../server/paged.ts';
import { selectTableVersions } from '../../catalog/tables.ts';
import { prismaExecutor } from '../../db/sql.ts';
import type { TransactionClient } from '../../db/prisma.ts';
import { dropForeignKey } from '../../data/ddl.ts';
import { typeSpecOf, type FieldDefinition } from '../../data/field-types.ts';
import { notFound, validationFailed, type FieldProblem } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { recordActivity } from '../../catalog/activity.ts';
import type { Caller } from '../../kernel/caller.ts';
import { requireCaller } from '../server/guards.ts';
import { builder } from '../server/builder.ts';
import { Id } from '../../kernel/formats.ts';
import { CreateForeignKeyBody } from '../../contracts/tables.ts';
import type { Context } from '../server/context.ts';
import { Cursor, PageLimit } from '../../catalog/cursor.ts';
import { idempotent } from '../../idempotency/run.ts';
import { pageRef } from '../shared/pages.ts';
import type { TableAddress, TableSchema } from '../../catalog/table-schema.ts';
import { addressOf, tableAddressArgs } from './address.ts';
import {
  bumpSchemaVersion,
  currentSchema,
  ForeignKey,
  lockTableForSchemaChange,
  toForeignKeyShape,
} from './schema-endpoint.ts';
import { INDEX_BUDGET_BYTES, keyBytes } from '../../data/unique-keys.ts';
import { resolveKeyFields } from './unique-rules.ts';

/**
 * Foreign keys (spec 2.13): real PostgreSQL foreign keys from some fields to an unconditional unique rule of a
 * table in the same database. Deleting or changing a referenced row that is still referenced is refused.
 */
export const MAX_FOREIGN_KEYS_PER_TABLE = 50;

export type ForeignKeyDeletionShape = { id: string; deleted: boolean; mutationId: string };

export const CreateForeignKeyInput = builder
  .inputType('CreateForeignKeyInput', {
    fields: (t) => ({
      fieldIds: t.stringList({
        required: true,
        description: 'Field ids or exact field names of this table, in the order of the rule’s fields.',
      }),
      referencedTableId: t.id({ required: true }),
      referencedRuleId: t.id({ required: true }),
      expectedSchemaVersion: t.int(),
    }),
  })
  .validate(CreateForeignKeyBody);

const ForeignKeyPage = pageRef('ForeignKeyPage', ForeignKey, 'A page of a table’s foreign keys, oldest first.');

const ForeignKeyDeletion = builder.objectRef<ForeignKeyDeletionShape>('ForeignKeyDeletion').implement({
  fields: (t) => ({ id: t.exposeID('id'), deleted: t.exposeBoolean('deleted'), mutationId: t.exposeID('mutationId') }),
});

/** Both ends must store values the same way, or PostgreSQL could not compare them with one equality. */
const storage = (field: FieldDefinition) => typeSpecOf(field.type).column(field.options);

interface Endpoints {
  fields: FieldDefinition[];
  referenced: TableSchema;
  referencedFields: FieldDefinition[];
}

export async function resolveEndpoints(
  context: Context,
  tx: TransactionClient,
  schema: TableSchema,
  body: CreateForeignKeyBody,
): Promise<Endpoints> {
  const problems: FieldProblem[] = [];
  const fields = resolveKeyFields(schema, body.fieldIds, 'fieldIds', problems);
  const [head] = await tx.$queryRaw<{ schemaVersion: number; indexVersion: number }[]>(
    selectTableVersions(schema.orgId, schema.databaseId, body.referencedTableId),
  );
  if (!head)
    throw validationFailed(
      [{ path: ['referencedTableId'], message: 'is not a table of this database' }],
      'The foreign key does not fit.',
    );
  const referenced =
    body.referencedTableId === schema.tableId
      ? schema
      : await context.schemas.get(tx, {
          id: body.referencedTableId,
          orgId: schema.orgId,
          databaseId: schema.databaseId,
          schemaVersion: head.schemaVersion,
          indexVersion: head.indexVersion,
        });
  const rule = referenced.uniqueRules.find((candidate) => candidate.id === body.referencedRuleId);
  if (!rule) problems.push({ path: ['referencedRuleId'], message: 'is not a unique rule of the referenced table' });
  else if (rule.where !== null && rule.where !== undefined)
    problems.push({
      path: ['referencedRuleId'],
      message: 'is a conditional rule; a foreign key needs an unconditional one',
    });
  else if (rule.enforcement === 'hash') {
    problems.push({
      path: ['referencedRuleId'],
      message:
        `its fields can hold ${keyBytes(rule.fieldIds.map((id) => referenced.fieldsById.get(id)!))} bytes, more than a btree index entry takes (${INDEX_BUDGET_BYTES}), ` +
        'so the rule is enforced through a hash, and PostgreSQL foreign keys can only reference a btree unique index; ' +
        'reference a rule whose text fields have a maxLength that fits',
    });
  }
  const referencedFields = (rule?.fieldIds ?? []).map((id) => referenced.fieldsById.get(id)!);
  if (rule && problems.length === 0) {
    if (fields.length !== referencedFields.length) {
      problems.push({
        path: ['fieldIds'],
        message: `must name ${referencedFields.length} field(s), one per field of the referenced rule`,
      });
    } else {
      fields.forEach((field, index) => {
        const target = referencedFields[index]!;
        if (storage(field) !== storage(target)) {
          problems.push({
            path: ['fieldIds', index],
            message: `${field.name} (${field.type}) cannot reference ${target.name} (${target.type}): the types must match`,
            fieldId: field.id,
          });
        }
      });
    }
  }
  if (schema.foreignKeys.length >= MAX_FOREIGN_KEYS_PER_TABLE)
    problems.push({ path: [], message: `a table may have at most ${MAX_FOREIGN_KEYS_PER_TABLE} foreign keys` });
  if (problems.length) throw validationFailed(problems, 'The foreign key does not fit.');
  return { fields, referenced, referencedFields };
}

async function deleteForeignKey(
  tx: TransactionClient,
  caller: Caller,
  address: TableAddress,
  foreignKeyId: string,
): Promise<ForeignKeyDeletionShape> {
  await lockTableForSchemaChange(tx, address);
  const key = await tx.foreignKey.findFirst({ where: { id: foreignKeyId, tableId: address.tableId } });
  if (!key) throw notFound('foreign key');
  await prismaExecutor(tx).run(dropForeignKey(address.databaseId, address.tableId, foreignKeyId));
  await tx.foreignKey.delete({ where: { id: foreignKeyId } });
  await bumpSchemaVersion(tx, address.tableId);
  const mutationId = newId();
  await recordActivity(tx, caller, {
    orgId: address.orgId,
    category: 'schema',
    event: 'foreign-key.delete',
    databaseId: address.databaseId,
    tableId: address.tableId,
    summary: 'Removed a foreign key',
    mutationId,
  });
  return { id: foreignKeyId, deleted: true, mutationId };
}

builder.queryFields((t) => ({
  foreignKeys: t.field({
    type: ForeignKeyPage,
    description: 'The foreign keys of a table (endpoint 14), oldest first.',
    args: {
      ...tableAddressArgs,
      limit: t.arg.int({ validate: PageLimit.optional() }),
      cursor: t.arg.string({ validate: Cursor.optional() }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'schema:read' }),
    resolve: async (_root, args, context) => {
      const schema = await currentSchema(context, addressOf(args));
      return pageById(context, args, {
        scope: `foreign-keys:${schema.tableId}`,
        fetch: async ({ after = '', limit }) =>
          schema.foreignKeys.filter((candidate) => candidate.id > after).slice(0, limit + 1),
        toItem: toForeignKeyShape,
      });
    },
  }),
}));

builder.mutationFields((t) => ({
  deleteForeignKey: t.field({
    type: ForeignKeyDeletion,
    description: 'Removes a foreign key (event `foreign-key.delete`). Bumps schemaVersion.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      foreignKeyId: t.arg.id({ required: true, validate: Id }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'manage' }, oauth: 'schema:manage' }),
    resolve: (_root, args, context) => {
      const address = addressOf(args);
      const foreignKeyId = String(args.foreignKeyId);
      return idempotent(
        context,
        { operation: 'deleteForeignKey', key: args.idempotencyKey, input: { ...address, foreignKeyId } },
        (tx) => deleteForeignKey(tx, requireCaller(context), address, foreignKeyId),
      );
    },
  }),
}));
