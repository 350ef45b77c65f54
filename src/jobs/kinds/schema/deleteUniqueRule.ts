import type pg from 'pg';
import { z } from 'zod';
import { pgExecutor } from '../../../db/sql.ts';
import {
  deleteUniqueRule as deleteRuleRow,
  selectKeysReferencingRule,
  selectRuleEnforcement,
  type RuleReference,
} from '../../../catalog/unique-rule-deletion.ts';
import { dropHashedKey } from '../../../data/unique-keys.ts';
import { DomainError } from '../../../kernel/errors.ts';
import type { JobHandler } from '../../engine/handler.ts';
import { bumpSchemaVersion, dropUniqueIndex, lockCatalogRow } from './change-statements.ts';
import { Id } from '../../../kernel/formats.ts';
import { DeleteUniqueRuleResult } from './results.ts';

/**
 * Removes a unique rule online (issue 13): DROP INDEX CONCURRENTLY (row writes go on; a hashed rule's constraint
 * is dropped in a moment under the table lock), then one short step deletes
 * the catalog row and bumps schemaVersion (`rule.delete`). Dropping first means the rule stops being enforced a
 * moment before it leaves the schema, never the other way round (a write refused by a rule the schema no longer
 * shows). A resumed job repeats the drop harmlessly (IF EXISTS). The job holds the table's schema-change key, so
 * no new foreign key can be built on the rule meanwhile; one found anyway fails the job with FOREIGN_KEY_CONFLICT.
 */
const Payload = z.object({ orgId: Id, databaseId: Id, tableId: Id, ruleId: Id, summary: z.string() });
type Payload = z.infer<typeof Payload>;
type Journal = { phase: 'cutover' | 'done'; schemaVersion?: number };

export function referencedRuleConflict(keys: readonly RuleReference[]): DomainError {
  return new DomainError('FOREIGN_KEY_CONFLICT', 'Foreign keys reference this unique rule; delete those keys first.', {
    details: { foreignKeys: keys.map((key) => ({ id: key.id, tableId: key.tableId, tableName: key.tableName })) },
  });
}

/** CONCURRENTLY refuses a transaction block: its own connection, outside the step transactions. */
async function dropIndex(pool: pg.Pool, payload: Payload): Promise<void> {
  const client = await pool.connect();
  try {
    const sql = pgExecutor(client);
    const check = selectKeysReferencingRule(payload.ruleId);
    const keys = await sql.run<RuleReference>(check);
    if (keys.length > 0) throw referencedRuleConflict(keys);
    const [rule] = await sql.query<{ enforcement: string }>(selectRuleEnforcement(payload.ruleId).sql, [
      payload.ruleId,
    ]);
    // A hashed rule is a constraint with its key type and lock; PostgreSQL drops a constraint only under the
    // table's ACCESS EXCLUSIVE lock, held for the moment the drop takes (no index build or scan).
    const drops =
      rule?.enforcement === 'hash'
        ? dropHashedKey(payload.databaseId, payload.tableId, payload.ruleId)
        : [dropUniqueIndex(payload.databaseId, payload.ruleId, true)];
    for (const drop of drops) await sql.run(drop);
  } finally {
    client.release();
  }
}

export const deleteUniqueRule: JobHandler<Payload, Journal, DeleteUniqueRuleResult> = {
  kind: 'deleteUniqueRule',
  payload: Payload,
  result: DeleteUniqueRuleResult,
  // Spec §6 gives deleteUniqueRule no `succeeded` suffix: `rule.delete` marks it done.
  successEvent: () => 'rule.delete',
  describe: (payload) => payload.summary,
  async run(run) {
    if (!run.journal.phase) {
      await dropIndex(run.pool, run.payload);
      await run.step(async () => ({ journal: { phase: 'cutover' }, progress: { done: 1, total: 2 } }));
    }
    if (run.journal.phase === 'cutover') {
      await run.step(async (sql) => {
        const lock = lockCatalogRow(run.payload.tableId);
        await sql.run(lock);
        const remove = deleteRuleRow(run.payload.ruleId);
        await sql.run(remove);
        const bump = bumpSchemaVersion(run.payload.tableId);
        const [row] = await sql.run<{ schema_version: number }>(bump);
        return { journal: { phase: 'done', schemaVersion: row!.schema_version }, progress: { done: 2, total: 2 } };
      });
    }
    const { ruleId } = run.payload;
    return {
      state: 'succeeded',
      result: { ruleId, deleted: true, schemaVersion: run.journal.schemaVersion! },
      summary: run.payload.summary,
    };
  },
};
