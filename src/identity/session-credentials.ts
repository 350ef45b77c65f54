import { sqlPoolOf, type PrismaClient } from '../db/prisma.ts';
import { pgExecutor } from '../db/sql.ts';
import type { Caller } from '../kernel/caller.ts';
import { authorityByOrg, MEMBERSHIPS_COLUMN, type Membership } from './memberships.ts';
import type { CredentialProblem } from './credentials.ts';
import { sha256Hex } from './secrets.ts';
import { csrfMatches, looksLikeSessionToken } from './session-tokens.ts';

interface SessionRow {
  id: string;
  user_id: string;
  user_name: string;
  csrf_token_hash: string;
  strong_auth_at: Date;
  expired: boolean;
  revoked: boolean;
  stale_last_seen: boolean;
  memberships: Membership[];
}

// One round trip: the session, its user and every membership with its *current* role.
async function findSession(prisma: PrismaClient, hash: string): Promise<SessionRow | undefined> {
  const rows = await pgExecutor(sqlPoolOf(prisma)).query<SessionRow>(
    `
    SELECT s.id, s.user_id, u.name AS user_name, s.csrf_token_hash, s.strong_auth_at,
           (s.expires_at <= now()) AS expired, (s.revoked_at IS NOT NULL) AS revoked,
           (s.last_seen_at < now() - interval '60 seconds') AS stale_last_seen,
           ${MEMBERSHIPS_COLUMN}
      FROM sessions s
      JOIN users u ON u.id = s.user_id
      LEFT JOIN members m ON m.user_id = s.user_id
     WHERE s.token_hash = $1::bpchar
     GROUP BY s.id, u.id`,
    [hash],
  );
  return rows[0];
}

/** A browser session acts as its user with the full authority of each current role (no key ceiling). */
function sessionCaller(row: SessionRow, csrfHeader: string | null): Caller {
  const orgs = authorityByOrg(row.memberships);
  return {
    kind: 'user',
    actorId: row.user_id,
    actorKey: `user:${row.user_id}`,
    userId: row.user_id,
    name: row.user_name,
    credential: {
      type: 'session',
      id: row.id,
      prefix: 'session',
      session: {
        strongAuthAt: new Date(row.strong_auth_at),
        csrfVerified: csrfMatches(csrfHeader, row.csrf_token_hash),
      },
    },
    scopes: 'all',
    orgs,
  };
}

/** The caller of a session cookie, or why it was refused. */
export async function resolveSession(
  prisma: PrismaClient,
  token: string,
  csrfHeader: string | null,
): Promise<Caller | CredentialProblem> {
  if (!looksLikeSessionToken(token)) return 'malformed';
  const row = await findSession(prisma, sha256Hex(token));
  if (!row) return 'unknown';
  if (row.revoked) return 'revoked';
  if (row.expired) return 'expired';
  if (row.stale_last_seen)
    await prisma.$executeRaw`UPDATE sessions SET last_seen_at = now() WHERE id = ${row.id}::bpchar`;
  return sessionCaller(row, csrfHeader);
}
