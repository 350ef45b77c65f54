import { typeSpecOf, type FieldDefinition } from '../../data/field-types.ts';
import { INDEX_BUDGET_BYTES, keyBytes, type KeyEnforcement } from '../../data/unique-keys.ts';
import { resolveField } from '../../data/filter.ts';
import { checkFilter } from '../../data/filter-check.ts';
import { isIndexable } from '../../data/filter-sql.ts';
import { validationFailed, type FieldProblem } from '../../kernel/errors.ts';
import { builder } from '../server/builder.ts';
import { CreateUniqueRuleBody } from '../../contracts/tables.ts';
import type { TableSchema } from '../../catalog/table-schema.ts';

/**
 * Unique rules (DESIGN §2): a unique index over some fields, partial when the rule has a `where`. This file checks a
 * rule against the table; the index is built online by a schema-change job (src/jobs/kinds/schema/constraints.ts,
 * enqueued by src/graph/tables/constraint-jobs.ts and endpoint 5).
 */
export const MAX_UNIQUE_RULES_PER_TABLE = 50;

export const CreateUniqueRuleInput = builder
  .inputType('CreateUniqueRuleInput', {
    fields: (t) => ({
      fieldIds: t.stringList({ required: true, description: 'Field ids or exact field names, 1..8.' }),
      where: t.field({
        type: 'JSON',
        description: 'Optional filter expression (spec 2.4): only matching rows must be unique.',
      }),
      expectedSchemaVersion: t.int(),
    }),
  })
  .validate(CreateUniqueRuleBody);

/** Resolves field references (ids or names), reporting each unknown or repeated one at its position. */
export function resolveKeyFields(
  schema: TableSchema,
  references: readonly string[],
  path: string,
  problems: FieldProblem[],
): FieldDefinition[] {
  const fields: FieldDefinition[] = [];
  references.forEach((reference, index) => {
    const field = resolveField(schema.fields, reference);
    if (!field) problems.push({ path: [path, index], message: 'is not a field of this table' });
    else if (fields.some((seen) => seen.id === field.id))
      problems.push({ path: [path, index], message: 'names a field twice', fieldId: field.id });
    else if (typeSpecOf(field.type).indexBytes(field.options) === null) {
      problems.push({
        path: [path, index],
        message: `${field.type} fields cannot be part of a unique key`,
        fieldId: field.id,
      });
    } else fields.push(field);
  });
  return fields;
}

export function checkRule(
  schema: TableSchema,
  body: CreateUniqueRuleBody,
): { fields: FieldDefinition[]; enforcement: KeyEnforcement } {
  const problems: FieldProblem[] = [];
  const fields = resolveKeyFields(schema, body.fieldIds, 'fieldIds', problems);
  const enforcement: KeyEnforcement = keyBytes(fields) > INDEX_BUDGET_BYTES ? 'hash' : 'btree';
  if (body.where) {
    const filterProblems = checkFilter(body.where, schema.fields).map((problem) => ({
      ...problem,
      path: ['where', ...problem.path],
    }));
    problems.push(...filterProblems);
    if (filterProblems.length === 0 && !isIndexable(body.where, schema.fields)) {
      problems.push({
        path: ['where'],
        message:
          'uses an operator whose result depends on collation (string ranges, iContains); use eq, in, prefix, contains, isNull or numeric/date ranges',
      });
    }
  }
  const sameRule = schema.uniqueRules.find(
    (rule) =>
      rule.fieldIds.join() === fields.map((field) => field.id).join() &&
      JSON.stringify(rule.where ?? null) === JSON.stringify(body.where ?? null),
  );
  if (sameRule && problems.length === 0)
    problems.push({ path: ['fieldIds'], message: `the same rule already exists (${sameRule.id})` });
  if (schema.uniqueRules.length >= MAX_UNIQUE_RULES_PER_TABLE)
    problems.push({ path: [], message: `a table may have at most ${MAX_UNIQUE_RULES_PER_TABLE} unique rules` });
  if (problems.length) throw validationFailed(problems, 'The unique rule does not fit the table.');
  return { fields, enforcement };
}
