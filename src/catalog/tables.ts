import { Prisma } from '../generated/prisma/client.ts';
import type { Statement } from '../data/statement.ts';

/** Catalog statements on tables, run by the graph's table operations (`tx.$queryRaw(statement)`). */

export interface TableAddressIds {
  orgId: string;
  databaseId: string;
  tableId: string;
}

/** The active table, locked: row writes and schema changes wait. */
export function lockActiveTable(address: TableAddressIds): Prisma.Sql {
  return Prisma.sql`
    SELECT version, name FROM data_tables
     WHERE id = ${address.tableId} AND database_id = ${address.databaseId} AND org_id = ${address.orgId} AND state = 'active'
       FOR UPDATE`;
}

/** The active table's schema version, locked for a schema change (schema changes of one table take turns). */
export function lockTableSchemaVersion(address: TableAddressIds): Prisma.Sql {
  return Prisma.sql`
    SELECT schema_version FROM data_tables
     WHERE id = ${address.tableId} AND database_id = ${address.databaseId} AND org_id = ${address.orgId} AND state = 'active'
       FOR UPDATE`;
}

/** An unfinished job holding this serial key (a table's schema jobs share one). */
export function selectActiveJobBySerialKey(serialKey: string): Prisma.Sql {
  return Prisma.sql`
    SELECT id FROM jobs WHERE serial_key = ${serialKey} AND state IN ('queued', 'running')`;
}

export function incrementSchemaVersion(tableId: string): Prisma.Sql {
  return Prisma.sql`
    UPDATE data_tables SET schema_version = schema_version + 1, version = version + 1, updated_at = now()
     WHERE id = ${tableId} RETURNING schema_version`;
}

/** Foreign keys of other tables that reference this one, trashed tables' keys included. */
export function selectKeysReferencingTable(tableId: string): Prisma.Sql {
  return Prisma.sql`
    SELECT k.id, k.table_id AS "tableId", t.name AS "tableName", t.state AS "tableState"
      FROM foreign_keys k JOIN data_tables t ON t.id = k.table_id
     WHERE k.referenced_table_id = ${tableId} AND k.table_id <> ${tableId}
     ORDER BY k.id`;
}

/** A table just moved to the trash: its version, when, and its database's name. */
export function selectTrashedTable(tableId: string): Prisma.Sql {
  return Prisma.sql`
    SELECT t.version, t.deleted_at, d.name AS database_name FROM data_tables t JOIN databases d ON d.id = t.database_id WHERE t.id = ${tableId}`;
}

/** The versions of an active table of this database (a foreign key's referenced table). */
export function selectTableVersions(orgId: string, databaseId: string, tableId: string): Prisma.Sql {
  return Prisma.sql`
    SELECT schema_version AS "schemaVersion", index_version AS "indexVersion" FROM data_tables
     WHERE id = ${tableId} AND database_id = ${databaseId} AND org_id = ${orgId} AND state = 'active'`;
}

/** One database's next page of tables: its position and how many to fetch (the page size + 1). */
export interface TablePageKey {
  orgId: string;
  databaseId: string;
  afterId: string | null;
  take: number;
}

/** Every requested database's page of table ids in one statement, each page cut by its own LATERAL limit. */
export function selectTablePageIds(keys: readonly TablePageKey[]): Statement {
  return {
    sql: `
  SELECT k.i::int AS "index", t.id
    FROM unnest($1::text[], $2::text[], $3::text[], $4::int[]) WITH ORDINALITY AS k(org_id, database_id, after_id, take, i)
   CROSS JOIN LATERAL (
         SELECT id FROM data_tables
          WHERE org_id = k.org_id::bpchar AND database_id = k.database_id::bpchar AND state = 'active'
            AND (k.after_id IS NULL OR id > k.after_id::bpchar)
          ORDER BY id LIMIT k.take) t`,
    params: [
      keys.map((key) => key.orgId),
      keys.map((key) => key.databaseId),
      keys.map((key) => key.afterId),
      keys.map((key) => key.take),
    ],
  };
}
