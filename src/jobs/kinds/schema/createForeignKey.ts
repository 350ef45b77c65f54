import { pgExecutor } from '../../../db/sql.ts';
import { abandonConstraint, buildConstraint, type ConstraintJournal } from './constraints.ts';
import { CreateForeignKeyResult } from './results.ts';
import { changeOf, schemaChangeHandler } from './schema-change.ts';

/** add_foreign_key (`foreign-key.create`): the key added NOT VALID and validated online, then its catalog row. */
export const createForeignKey = schemaChangeHandler<ConstraintJournal, CreateForeignKeyResult>({
  kind: 'createForeignKey',
  result: CreateForeignKeyResult,
  async change(run, schema) {
    changeOf(run.payload, 'add_foreign_key');
    await buildConstraint(run as never, schema);
  },
  async discard(run) {
    await pgExecutor(run.pool).runEach(abandonConstraint(run.payload, run.payload.change));
  },
});
