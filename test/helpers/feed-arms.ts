import type pg from 'pg';
import { schemaOf } from '../../src/data/identifiers.ts';

/**
 * Counts the arms of a database's change feed from now on (each reader's `UPDATE … SET armed = true` that arms it):
 * a trigger on `change_arm` records them in a table of the test's own. Returns the count so far.
 */
export async function countFeedArms(
  sql: Pick<pg.Pool | pg.Client, 'query'>,
  databaseId: string,
): Promise<() => Promise<number>> {
  const schema = schemaOf(databaseId);
  await sql.query(`CREATE TABLE ${schema}.test_arms (at timestamptz NOT NULL DEFAULT clock_timestamp())`);
  await sql.query(`CREATE FUNCTION ${schema}.test_count_arm() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO ${schema}.test_arms DEFAULT VALUES; RETURN NULL; END $$`);
  await sql.query(`CREATE TRIGGER test_count_arm AFTER UPDATE ON ${schema}.change_arm
    FOR EACH ROW WHEN (NEW.armed AND NOT OLD.armed) EXECUTE FUNCTION ${schema}.test_count_arm()`);
  return async () => (await sql.query(`SELECT count(*)::int AS n FROM ${schema}.test_arms`)).rows[0].n as number;
}
