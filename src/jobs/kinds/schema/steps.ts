import type { SqlExecutor } from '../../../db/sql.ts';
import { DomainError } from '../../../kernel/errors.ts';
import { schemaVersionConflict } from '../../../catalog/table-schema.ts';
import * as ddl from './change-statements.ts';

/** Holds the catalog row and proves no other change landed since the request (409 otherwise). */
export async function lockVersion(
  sql: SqlExecutor,
  target: { tableId: string; expectedSchemaVersion: number },
): Promise<void> {
  const statement = ddl.lockCatalogRow(target.tableId);
  const [row] = await sql.run<{ schema_version: number }>(statement);
  if (!row) throw new DomainError('RESOURCE_NOT_FOUND', 'The table no longer exists.');
  if (row.schema_version !== target.expectedSchemaVersion)
    throw schemaVersionConflict(target.expectedSchemaVersion, row.schema_version);
}

export async function bump(sql: SqlExecutor, tableId: string): Promise<number> {
  const statement = ddl.bumpSchemaVersion(tableId);
  const [row] = await sql.run<{ schema_version: number }>(statement);
  return row!.schema_version;
}
