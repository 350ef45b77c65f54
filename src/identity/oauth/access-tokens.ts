import { sqlPoolOf, type PrismaClient } from '../../db/prisma.ts';
import { pgExecutor } from '../../db/sql.ts';
import type { OAuthScope } from '../../kernel/authority.ts';
import type { Caller } from '../../kernel/caller.ts';
import { authorityByOrg, MEMBERSHIPS_COLUMN, type Membership } from '../memberships.ts';
import { sha256Hex } from '../secrets.ts';
import type { CredentialProblem } from '../credentials.ts';

interface AccessTokenRow {
  id: string;
  client_id: string;
  user_id: string;
  user_name: string;
  scopes: string[];
  audience: string;
  expired: boolean;
  revoked: boolean;
  memberships: Membership[];
}

// One round trip: the token, its user, whether its client is still registered, and every current role.
async function findAccessToken(prisma: PrismaClient, hash: string): Promise<AccessTokenRow | undefined> {
  const rows = await pgExecutor(sqlPoolOf(prisma)).query<AccessTokenRow>(
    `
    SELECT t.id, t.client_id, t.user_id, u.name AS user_name, t.scopes, t.audience,
           (t.expires_at <= now()) AS expired, (t.revoked_at IS NOT NULL OR c.revoked_at IS NOT NULL) AS revoked,
           ${MEMBERSHIPS_COLUMN}
      FROM oauth_tokens t
      JOIN users u ON u.id = t.user_id
      JOIN oauth_clients c ON c.id = t.client_id
      LEFT JOIN members m ON m.user_id = t.user_id
     WHERE t.token_hash = $1::bpchar AND t.kind = 'access'
     GROUP BY t.id, u.id, c.id`,
    [hash],
  );
  return rows[0];
}

/**
 * An OAuth access token acts as its user with the scopes the user consented to. Each scope is capped by the
 * user's live role in the org concerned: the org authority below is the role's, read on every request.
 */
export async function resolveAccessToken(
  prisma: PrismaClient,
  token: string,
  audience: string,
): Promise<Caller | CredentialProblem> {
  const row = await findAccessToken(prisma, sha256Hex(token));
  if (!row) return 'unknown';
  if (row.revoked) return 'revoked';
  if (row.expired) return 'expired';
  if (row.audience !== audience) return 'wrong-audience';
  const orgs = authorityByOrg(row.memberships);
  return {
    kind: 'user',
    actorId: row.user_id,
    actorKey: `user:${row.user_id}`,
    userId: row.user_id,
    name: row.user_name,
    // The audit feed names the application that acted (`oauth:<client id>`, 32 characters).
    credential: { type: 'oauth', id: row.id, prefix: `oauth:${row.client_id}` },
    scopes: new Set(row.scopes as OAuthScope[]),
    orgs,
  };
}
