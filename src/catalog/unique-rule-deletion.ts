import type { Statement } from '../data/statement.ts';

/** Catalog statements for removing a unique rule (issue 13); the index itself is dropped by src/jobs/kinds/schema/change-statements.ts
 * (a btree rule) or src/data/unique-keys.ts (a hashed rule). */

export interface RuleReference {
  id: string;
  tableId: string;
  tableName: string;
}

/** Foreign keys (of any table, trashed ones included: their constraints still need the index) that use the rule. */
export function selectKeysReferencingRule(ruleId: string): Statement {
  return {
    sql: `SELECT k.id, k.table_id AS "tableId", t.name AS "tableName"
            FROM public.foreign_keys k JOIN public.data_tables t ON t.id = k.table_id
           WHERE k.referenced_rule_id = $1::bpchar ORDER BY k.id`,
    params: [ruleId],
  };
}

/** How the rule is enforced ('btree' | 'hash'); no row once the rule's catalog row is gone. */
export function selectRuleEnforcement(ruleId: string): Statement {
  return { sql: 'SELECT enforcement FROM public.unique_rules WHERE id = $1::bpchar', params: [ruleId] };
}

export function deleteUniqueRule(ruleId: string): Statement {
  return { sql: `DELETE FROM public.unique_rules WHERE id = $1::bpchar RETURNING id`, params: [ruleId] };
}
