import { timingSafeEqual } from 'node:crypto';
import type { PrismaClient } from '../../db/prisma.ts';
import { isId, newId } from '../../kernel/ids.ts';
import { sha256Hex } from '../secrets.ts';
import { acceptableRedirectUri, issueOpaque, OAuthError } from './protocol.ts';

export interface OAuthClientRecord {
  id: string;
  name: string;
  redirectUris: string[];
  secretHash: string | null;
}

export class ClientRegistrationError extends Error {}

/** Registers a client (`cli register-oauth-client`). A confidential client gets a secret, shown once. */
export async function registerClient(
  prisma: PrismaClient,
  input: { name: string; redirectUris: string[]; confidential: boolean },
) {
  const bad = input.redirectUris.filter((uri) => !acceptableRedirectUri(uri));
  if (input.redirectUris.length === 0 || bad.length > 0) {
    throw new ClientRegistrationError(
      `Redirect URIs must be absolute https (or http on 127.0.0.1, [::1], localhost) without a fragment: ${bad.join(', ') || 'none given'}.`,
    );
  }
  const secret = input.confidential ? issueOpaque('clientSecret') : null;
  const client = await prisma.oAuthClient.create({
    data: { id: newId(), name: input.name, redirectUris: input.redirectUris, secretHash: secret?.hash ?? null },
    select: { id: true },
  });
  return { clientId: client.id, ...(secret ? { clientSecret: secret.token } : {}) };
}

export async function findClient(
  prisma: PrismaClient,
  clientId: string | undefined,
): Promise<OAuthClientRecord | null> {
  if (!clientId || !isId(clientId)) return null;
  return prisma.oAuthClient.findFirst({
    where: { id: clientId, revokedAt: null },
    select: { id: true, name: true, redirectUris: true, secretHash: true },
  });
}

/**
 * RFC 6749 §2.3: confidential clients prove their secret (HTTP Basic or `client_secret` in the body); public
 * clients only name themselves and rely on PKCE. Anything wrong is `invalid_client` (401).
 */
export async function authenticateClient(
  prisma: PrismaClient,
  credentials: { clientId?: string | undefined; clientSecret?: string | undefined },
): Promise<OAuthClientRecord> {
  const client = await findClient(prisma, credentials.clientId);
  if (!client) throw new OAuthError('invalid_client', 'Unknown client.');
  if (client.secretHash === null) return client;
  const presented = Buffer.from(sha256Hex(credentials.clientSecret ?? ''), 'hex');
  if (!credentials.clientSecret || !timingSafeEqual(presented, Buffer.from(client.secretHash, 'hex'))) {
    throw new OAuthError('invalid_client', 'Client authentication failed.');
  }
  return client;
}
