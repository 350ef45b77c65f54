import { Prisma } from '../generated/prisma/client.ts';
import type { Statement } from '../data/statement.ts';

/** The active database, locked for the rest of the transaction. */
export function lockActiveDatabase(orgId: string, databaseId: string): Prisma.Sql {
  return Prisma.sql`
    SELECT version, name FROM databases WHERE id = ${databaseId} AND org_id = ${orgId} AND state = 'active' FOR UPDATE`;
}

/** A database just moved to the trash: its version and when. */
export function selectTrashedDatabase(databaseId: string): Prisma.Sql {
  return Prisma.sql`SELECT version, deleted_at FROM databases WHERE id = ${databaseId}`;
}

/** The database, if it is active and in that org (a feed reader's check: on the data plane, no ORM round trip). */
export function selectActiveDatabase(orgId: string, databaseId: string): Statement {
  return {
    sql: `SELECT 1 AS found FROM databases WHERE id = $1::bpchar AND org_id = $2::bpchar AND state = 'active'`,
    params: [databaseId, orgId],
  };
}
