import { pgExecutor } from '../../../db/sql.ts';
import { abandonConstraint, buildConstraint, type ConstraintJournal } from './constraints.ts';
import { CreateUniqueRuleResult } from './results.ts';
import { changeOf, schemaChangeHandler } from './schema-change.ts';

/** add_unique_rule (`rule.create`): the unique index built online, then the rule's catalog row at cutover. */
export const createUniqueRule = schemaChangeHandler<ConstraintJournal, CreateUniqueRuleResult>({
  kind: 'createUniqueRule',
  result: CreateUniqueRuleResult,
  async change(run, schema) {
    changeOf(run.payload, 'add_unique_rule');
    await buildConstraint(run as never, schema);
  },
  async discard(run) {
    await pgExecutor(run.pool).runEach(abandonConstraint(run.payload, run.payload.change));
  },
});
