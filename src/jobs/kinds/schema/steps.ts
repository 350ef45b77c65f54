import type { SqlExecutor } from '../../../db/sql.ts';
import type { Statement } from '../../../data/statement.ts';
import { DomainError } from '../../../kernel/errors.ts';
import { schemaVersionConflict } from '../../../catalog/table-schema.ts';
import * as ddl from './change-statements.ts';

/** Shared by every schema-change job: statements in order, the version lock and the version bump. */
export async function exec(sql: SqlExecutor, statements: readonly Statement[]): Promise<void> {
  for (const statement of statements) await sql.query(statement.sql, statement.params);
}

/** Holds the catalog row and proves no other change landed since the request (409 otherwise). */
export async function lockVersion(
  sql: SqlExecutor,
  target: { tableId: string; expectedSchemaVersion: number },
): Promise<void> {
  const statement = ddl.lockCatalogRow(target.tableId);
  const [row] = await sql.query<{ schema_version: number }>(statement.sql, statement.params);
  if (!row) throw new DomainError('RESOURCE_NOT_FOUND', 'The table no longer exists.');
  if (row.schema_version !== target.expectedSchemaVersion)
    throw schemaVersionConflict(target.expectedSchemaVersion, row.schema_version);
}

export async function bump(sql: SqlExecutor, tableId: string): Promise<number> {
  const statement = ddl.bumpSchemaVersion(tableId);
  const [row] = await sql.query<{ schema_version: number }>(statement.sql, statement.params);
  return row!.schema_version;
}
