import type { CellValue } from '../../data/field-types.ts';
import { isStaleDefinition } from '../../data/failures.ts';
import { lookupRows } from '../../data/lookup.ts';
import type { KeyRule } from '../../data/row-batch.ts';
import { rowRead, type PageGuard, type RowJsonRecord, type RowRead } from '../../data/rows.ts';
import { DomainError, validationFailed, type FieldProblem } from '../../kernel/errors.ts';
import type { TableSchema, UniqueRuleDefinition } from '../../catalog/table-schema.ts';
import { LookupRowsBody } from '../../contracts/rows-lookup.ts';
import { builder } from '../server/builder.ts';
import { heavyRead } from '../server/query-limits.ts';
import { dataPlane, type Context } from '../server/context.ts';
import { addressOf, tableAddressArgs } from '../tables/address.ts';
import { rowFromTable } from './row-origin.ts';
import { Row } from './rows.ts';
import { cachedTable } from './row-pages.ts';
import { currentSchema } from '../tables/schema-endpoint.ts';

/**
 * Rows by business key (issue 28): POST …/rows/lookup and `lookupRows`. A key names at most one row only under an
 * unconditional unique rule, so only such a rule is accepted; each key is checked as its fields' cells are, and
 * answered in request order (null where no row holds it: a key with an empty value never does).
 */
export function keyRuleOf(schema: TableSchema, rule: UniqueRuleDefinition): KeyRule {
  return {
    ruleId: rule.id,
    fields: rule.fieldIds.map((id) => schema.fieldsById.get(id)!),
    enforcement: rule.enforcement,
  };
}

/** The unconditional unique rule `ruleId` names, or the problem at `path`. */
export function unconditionalRule(
  schema: TableSchema,
  ruleId: string,
  path: (string | number)[],
): UniqueRuleDefinition | FieldProblem {
  const rule = schema.uniqueRules.find((candidate) => candidate.id === ruleId);
  if (!rule) return { path, message: 'is not a unique rule of this table' };
  if (rule.where !== null && rule.where !== undefined)
    return { path, message: 'is a conditional rule; a key names at most one row only under an unconditional one' };
  return rule;
}

/** A key's values checked against the rule's fields (null allowed: it matches nothing), or problems under `path`. */
export function checkedKey(
  schema: TableSchema,
  rule: UniqueRuleDefinition,
  key: readonly unknown[],
  path: (string | number)[],
  problems: FieldProblem[],
): CellValue[] {
  if (key.length !== rule.fieldIds.length) {
    problems.push({
      path,
      message: `must have ${rule.fieldIds.length} value(s), one per field of the rule, in its order`,
    });
    return [];
  }
  return rule.fieldIds.map((fieldId, index) => {
    const value = key[index];
    if (value === null) return null;
    const parsed = schema.validators.get(fieldId)!.safeParse(value);
    if (parsed.success) return parsed.data;
    problems.push({ path: [...path, index], message: parsed.error.issues[0]?.message ?? 'is not valid', fieldId });
    return null;
  });
}

/** The rows of `keys`; null when a guarded statement found none (the cached definition it trusted may be stale). */
export async function lookupInTable(
  context: Context,
  schema: TableSchema,
  body: LookupRowsBody,
  guard: PageGuard | null = null,
): Promise<{ data: (RowRead | null)[] } | null> {
  const rule = unconditionalRule(schema, body.ruleId, ['ruleId']);
  if ('path' in rule) throw validationFailed([rule]);
  const problems: FieldProblem[] = [];
  const keys = body.keys.map((key, index) => checkedKey(schema, rule, key, ['keys', index], problems));
  if (problems.length > 0) throw validationFailed(problems, 'The keys do not fit the rule’s fields.');
  const statement = lookupRows(schema, keyRuleOf(schema, rule), keys, schema.fields, guard);
  const records = await dataPlane(context).query<RowJsonRecord & { k: number }>(statement.sql, statement.params);
  if (guard && records.length === 0) return null;
  const found = new Map(records.map((record) => [record.k, record]));
  return {
    data: keys.map((_key, index) => {
      const record = found.get(index);
      return record === undefined ? null : rowFromTable(schema, rowRead(record));
    }),
  };
}

const RowLookup = builder.objectRef<{ data: (RowRead | null)[] }>('RowLookup').implement({
  description: 'One entry per key, in key order: the row holding it, or null.',
  fields: (t) => ({
    data: t.field({ type: [Row], nullable: { list: false, items: true }, resolve: (result) => result.data }),
  }),
});

const LookupRowsInput = builder
  .inputType('LookupRowsInput', {
    fields: (t) => ({
      ruleId: t.id({ required: true }),
      keys: t.field({
        type: ['JSON'],
        required: true,
        description: '1..1000 keys, each an array of the rule’s field values in its order',
      }),
    }),
  })
  .validate(LookupRowsBody);

builder.queryFields((t) => ({
  lookupRows: t.field({
    type: RowLookup,
    description: 'Rows by the values of an unconditional unique rule, in key order (null for a key no row holds).',
    args: { ...tableAddressArgs, input: t.arg({ type: LookupRowsInput, required: true }) },
    extensions: heavyRead(),
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    resolve: async (_root, { input: body, ...args }, context) => {
      const address = addressOf(args);
      // As row pages do: the table head's round trip rides in the lookup's statement as its guard. A guarded lookup
      // that finds nothing, or that the cached definition refused, is read again the long way (404, 422 or rows).
      const cached = cachedTable(context, address);
      const fast = cached
        ? await lookupInTable(context, cached.schema, body, cached.guard).catch((error: unknown) => {
            if (error instanceof DomainError || isStaleDefinition(error)) return null;
            throw error;
          })
        : null;
      return fast ?? (await lookupInTable(context, await currentSchema(context, address), body))!;
    },
  }),
}));
