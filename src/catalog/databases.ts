import { Prisma } from '../generated/prisma/client.ts';

/** The active database, locked for the rest of the transaction. */
export function lockActiveDatabase(orgId: string, databaseId: string): Prisma.Sql {
  return Prisma.sql`
    SELECT version, name FROM databases WHERE id = ${databaseId} AND org_id = ${orgId} AND state = 'active' FOR UPDATE`;
}

/** A database just moved to the trash: its version and when. */
export function selectTrashedDatabase(databaseId: string): Prisma.Sql {
  return Prisma.sql`SELECT version, deleted_at FROM databases WHERE id = ${databaseId}`;
}
