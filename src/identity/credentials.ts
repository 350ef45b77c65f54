import { sqlPoolOf, type PrismaClient } from '../db/prisma.ts';
import { pgExecutor } from '../db/sql.ts';
import { DomainError } from '../kernel/errors.ts';
import { capabilitiesOfKey, intersect, type Role } from '../kernel/authority.ts';
import type { Caller, OrgAuthority } from '../kernel/caller.ts';
import { resolveAccessToken } from './oauth/access-tokens.ts';
import { looksLike } from './oauth/protocol.ts';
import { looksLikeApiKey, sha256Hex } from './secrets.ts';
import { resolveSession } from './session-credentials.ts';
import { cookieValue, CSRF_HEADER, SESSION_COOKIE } from './session-tokens.ts';

/** Why a presented credential was refused; the reason goes to logs, never to the client. */
export type CredentialProblem = 'malformed' | 'unknown' | 'expired' | 'revoked' | 'wrong-audience';

export class CredentialRejected extends DomainError {
  constructor(readonly reason: CredentialProblem) {
    super('UNAUTHENTICATED', 'The access token is invalid, expired or revoked.', { tokenPresented: true });
  }
}

interface KeyRow {
  id: string;
  prefix: string;
  scope: 'personal' | 'team';
  org_id: string;
  user_id: string | null;
  key_name: string;
  user_name: string | null;
  access: 'read' | 'write';
  include_admin: boolean;
  expired: boolean;
  revoked: boolean;
  stale_last_used: boolean;
  member_id: string | null;
  role: Role | null;
}

// One round trip: the key, its owner and the owner's *current* role in the key's org.
// A team key's authority is its own ceiling under the `admin` role of the org it belongs to.
async function findKey(prisma: PrismaClient, hash: string): Promise<KeyRow | undefined> {
  // Plain `pg` on Prisma's pool: this runs on every request, and Prisma's per-query cost showed in profiles.
  const rows = await pgExecutor(sqlPoolOf(prisma)).query<KeyRow>(
    `
    SELECT k.id, k.prefix, k.scope::text AS scope, k.org_id, k.user_id, k.name AS key_name, u.name AS user_name,
           k.access::text AS access, k.include_admin,
           (k.expires_at IS NOT NULL AND k.expires_at <= now()) AS expired,
           (k.revoked_at IS NOT NULL) AS revoked,
           (k.last_used_at IS NULL OR k.last_used_at < now() - interval '60 seconds') AS stale_last_used,
           m.id AS member_id, m.role::text AS role
      FROM api_keys k
      LEFT JOIN users u ON u.id = k.user_id
      LEFT JOIN members m ON m.org_id = k.org_id AND m.user_id = k.user_id
     WHERE k.secret_hash = $1::bpchar`,
    [hash],
  );
  return rows[0];
}

function orgAuthorityOf(row: KeyRow): Map<string, OrgAuthority> {
  const role: Role | null = row.scope === 'team' ? 'admin' : row.role;
  if (role === null) return new Map(); // the owner left the org: the key reaches nothing there
  const capabilities = intersect(role, capabilitiesOfKey({ access: row.access, includeAdmin: row.include_admin }));
  return new Map([[row.org_id, { orgId: row.org_id, role, memberId: row.member_id ?? row.id, capabilities }]]);
}

function callerOf(row: KeyRow): Caller {
  const personal = row.scope === 'personal' && row.user_id !== null;
  return {
    kind: personal ? 'user' : 'team-key',
    actorId: personal ? row.user_id! : row.id,
    actorKey: personal ? `user:${row.user_id}` : `key:${row.id}`,
    userId: personal ? row.user_id : null,
    name: personal ? (row.user_name ?? row.key_name) : row.key_name,
    credential: { type: 'api-key', id: row.id, prefix: row.prefix },
    scopes: 'all',
    orgs: orgAuthorityOf(row),
  };
}

/**
 * The caller of a request: the bearer credential when there is one, else the browser session cookie.
 * Returns null when neither was presented.
 */
export async function resolveCredential(
  prisma: PrismaClient,
  headers: Headers,
  audience: string,
): Promise<Caller | null> {
  const authorization = headers.get('authorization');
  if (authorization) return resolveBearer(prisma, authorization, audience);
  const session = cookieValue(headers.get('cookie'), SESSION_COOKIE);
  if (!session) return null;
  const resolved = await resolveSession(prisma, session, headers.get(CSRF_HEADER));
  if (typeof resolved === 'string') throw new CredentialRejected(resolved);
  return resolved;
}

/**
 * Resolves `Authorization: Bearer <token>` (an API key, or an OAuth access token for `audience`) into a Caller.
 * Returns null when no credential was presented; throws CredentialRejected for a malformed, unknown, expired,
 * revoked or wrong-audience one.
 */
export async function resolveBearer(
  prisma: PrismaClient,
  authorization: string | null,
  audience: string,
): Promise<Caller | null> {
  if (authorization === null || authorization === '') return null;
  const match = /^Bearer ([^\s]+)$/i.exec(authorization);
  if (match && looksLike('access', match[1]!)) {
    const resolved = await resolveAccessToken(prisma, match[1]!, audience);
    if (typeof resolved === 'string') throw new CredentialRejected(resolved);
    return resolved;
  }
  if (!match || !looksLikeApiKey(match[1]!)) throw new CredentialRejected('malformed');
  const row = await findKey(prisma, sha256Hex(match[1]!));
  if (!row) throw new CredentialRejected('unknown');
  if (row.revoked) throw new CredentialRejected('revoked');
  if (row.expired) throw new CredentialRejected('expired');
  if (row.stale_last_used) {
    // Written at most once a minute per key so that reads do not turn into writes on every request.
    await prisma.$executeRaw`UPDATE api_keys SET last_used_at = now() WHERE id = ${row.id}`;
  }
  return callerOf(row);
}
