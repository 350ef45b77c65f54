import { z } from 'zod';
import type { TransactionClient } from '../../db/prisma.ts';
import { lockRowsAgainstWrites, selectDuplicates } from '../../data/constraints.ts';
import { createUniqueIndex, inlineLiterals, quoteLiterals } from '../../data/ddl.ts';
import { typeSpecOf, type FieldDefinition } from '../../data/field-types.ts';
import { checkFilter, compileFilter, FilterExpression, isIndexable, resolveField } from '../../data/filter.ts';
import type { Params, Statement } from '../../data/sql.ts';
import { DomainError, validationFailed, type FieldProblem } from '../../errors.ts';
import { newId } from '../../ids.ts';
import { recordActivity } from '../activity.ts';
import type { Caller } from '../auth/caller.ts';
import { requireCaller } from '../auth/guards.ts';
import { builder } from '../builder.ts';
import { SchemaVersion } from '../common.ts';
import { idempotent, type Json } from '../idempotency.ts';
import type { TableAddress, TableSchema } from './loader.ts';
import { addressOf, tableAddressArgs } from './address.ts';
import { bumpSchemaVersion, lockTableForSchemaChange, toUniqueRuleShape, UniqueRule, type UniqueRuleShape } from './schema.ts';

/**
 * Unique rules (DESIGN §2): a unique index over some fields, partial when the rule has a `where`. Created
 * synchronously here under a lock that holds row writes back; the jobs issue moves large tables onto the runner.
 */
export const MAX_UNIQUE_RULES_PER_TABLE = 50;
/** btree entries must fit a third of a page (2704 bytes); keep headroom for tuple headers. */
export const INDEX_BUDGET_BYTES = 2_600;
const REPORTED_CONFLICTS = 20;

export const FieldReferences = z.array(z.string().min(1).max(64)).min(1).max(8);

export const CreateUniqueRuleBody = z.strictObject({
  fieldIds: FieldReferences,
  where: FilterExpression.optional(),
  expectedSchemaVersion: SchemaVersion.optional(),
});
type CreateUniqueRuleBody = z.infer<typeof CreateUniqueRuleBody>;

const CreateUniqueRuleInput = builder.inputType('CreateUniqueRuleInput', {
  fields: (t) => ({
    fieldIds: t.stringList({ required: true, description: 'Field ids or exact field names, 1..8.' }),
    where: t.field({ type: 'JSON', description: 'Optional filter expression (spec 2.4): only matching rows must be unique.' }),
    expectedSchemaVersion: t.int(),
  }),
  validate: CreateUniqueRuleBody,
});

/** Resolves field references (ids or names), reporting each unknown or repeated one at its position. */
export function resolveKeyFields(schema: TableSchema, references: readonly string[], path: string, problems: FieldProblem[]): FieldDefinition[] {
  const fields: FieldDefinition[] = [];
  references.forEach((reference, index) => {
    const field = resolveField(schema.fields, reference);
    if (!field) problems.push({ path: [path, index], message: 'is not a field of this table' });
    else if (fields.some((seen) => seen.id === field.id)) problems.push({ path: [path, index], message: 'names a field twice', fieldId: field.id });
    else if (typeSpecOf(field.type).indexBytes(field.options) === null) {
      problems.push({ path: [path, index], message: `${field.type} fields cannot be part of a unique key`, fieldId: field.id });
    } else fields.push(field);
  });
  return fields;
}

export function checkRule(schema: TableSchema, body: CreateUniqueRuleBody): FieldDefinition[] {
  const problems: FieldProblem[] = [];
  const fields = resolveKeyFields(schema, body.fieldIds, 'fieldIds', problems);
  const bytes = fields.reduce((sum, field) => sum + typeSpecOf(field.type).indexBytes(field.options)!, 0);
  if (bytes > INDEX_BUDGET_BYTES) {
    problems.push({ path: ['fieldIds'], message: `these fields can hold ${bytes} bytes together; a unique key may hold at most ${INDEX_BUDGET_BYTES} (lower a text maxLength)` });
  }
  if (body.where) {
    const filterProblems = checkFilter(body.where, schema.fields).map((problem) => ({ ...problem, path: ['where', ...problem.path] }));
    problems.push(...filterProblems);
    if (filterProblems.length === 0 && !isIndexable(body.where, schema.fields)) {
      problems.push({ path: ['where'], message: 'uses an operator whose result depends on collation (string ranges, iContains); use eq, in, prefix, contains, isNull or numeric/date ranges' });
    }
  }
  const sameRule = schema.uniqueRules.find((rule) =>
    rule.fieldIds.join() === fields.map((field) => field.id).join() && JSON.stringify(rule.where ?? null) === JSON.stringify(body.where ?? null));
  if (sameRule && problems.length === 0) problems.push({ path: ['fieldIds'], message: `the same rule already exists (${sameRule.id})` });
  if (schema.uniqueRules.length >= MAX_UNIQUE_RULES_PER_TABLE) problems.push({ path: [], message: `a table may have at most ${MAX_UNIQUE_RULES_PER_TABLE} unique rules` });
  if (problems.length) throw validationFailed(problems, 'The unique rule does not fit the table.');
  return fields;
}

const exec = (tx: TransactionClient, statement: Statement) => tx.$queryRawUnsafe<Record<string, unknown>[]>(statement.sql, ...statement.params);

async function refuseDuplicates(tx: TransactionClient, schema: TableSchema, fields: FieldDefinition[], where: FilterExpression | undefined): Promise<void> {
  const filter = where ? (params: Params) => compileFilter(where, schema.fields, (value, cast) => params.add(value, cast), 'r') : null;
  const groups = await exec(tx, selectDuplicates(schema.databaseId, schema.tableId, fields, filter, REPORTED_CONFLICTS));
  if (groups.length === 0) return;
  const duplicates = groups.map((group) => ({
    rowIds: group.row_ids as string[],
    values: Object.fromEntries(fields.map((field, index) => {
      const text = group[`c${index}`] as string;
      return [field.id, typeSpecOf(field.type).fromText(text)];
    })),
  }));
  throw new DomainError('UNIQUE_CONFLICT', 'Existing rows already share values in these fields; resolve the duplicates first.', {
    details: { fieldIds: fields.map((field) => field.id), duplicates, truncated: groups.length === REPORTED_CONFLICTS },
  });
}

/** An index predicate cannot take parameters: PostgreSQL quotes each value, then it is inlined (src/data/ddl.ts). */
async function literalPredicate(tx: TransactionClient, schema: TableSchema, where: FilterExpression): Promise<string> {
  const values: (string | null)[] = [];
  const sql = compileFilter(where, schema.fields, (value, cast) => {
    values.push(value === null ? null : String(value));
    return `$${values.length}::${cast}`;
  });
  const [row] = await exec(tx, quoteLiterals(values));
  return inlineLiterals(sql, row!.literals as string[]);
}

async function createUniqueRule(tx: TransactionClient, caller: Caller, schema: TableSchema, address: TableAddress, body: CreateUniqueRuleBody): Promise<UniqueRuleShape> {
  const fields = checkRule(schema, body);
  await exec(tx, lockRowsAgainstWrites(schema.databaseId, [schema.tableId]));
  await refuseDuplicates(tx, schema, fields, body.where);
  const ruleId = newId();
  const fieldIds = fields.map((field) => field.id);
  const predicate = body.where ? await literalPredicate(tx, schema, body.where) : undefined;
  await exec(tx, createUniqueIndex(schema.databaseId, schema.tableId, ruleId, fieldIds, predicate));
  const rule = await tx.uniqueRule.create({ data: { id: ruleId, tableId: schema.tableId, fieldIds, where: (body.where ?? undefined) as object | undefined } });
  await bumpSchemaVersion(tx, schema.tableId);
  await recordActivity(tx, caller, {
    orgId: address.orgId, category: 'schema', event: 'rule.create', databaseId: address.databaseId, tableId: address.tableId,
    summary: `Created a unique rule on ${fields.map((field) => field.name).join(', ')}`,
  });
  return toUniqueRuleShape(schema.tableId, {
    id: rule.id, fieldIds, where: (body.where ?? null) as Json, state: rule.state, createdAt: rule.createdAt.toISOString(),
  });
}

builder.mutationFields((t) => ({
  createUniqueRule: t.field({
    type: UniqueRule,
    description: 'Adds a unique rule (event `rule.create`); existing duplicates → 409 UNIQUE_CONFLICT listing them. Bumps schemaVersion.',
    args: { idempotencyKey: t.arg.string({ required: true }), ...tableAddressArgs, input: t.arg({ type: CreateUniqueRuleInput, required: true }) },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'manage' }, oauth: 'schema:manage' }),
    resolve: (_root, args, context) => {
      const body = CreateUniqueRuleBody.parse(args.input);
      const address = addressOf(args);
      return idempotent(context, { operation: 'createUniqueRule', key: args.idempotencyKey, input: { ...address, ...body } }, async (tx) => {
        const schemaVersion = await lockTableForSchemaChange(tx, address, body.expectedSchemaVersion);
        const schema = await context.schemas.get(tx, { id: address.tableId, orgId: address.orgId, databaseId: address.databaseId, schemaVersion });
        return createUniqueRule(tx, requireCaller(context), schema, address, body);
      });
    },
  }),
}));
