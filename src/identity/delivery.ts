import type { Config } from '../kernel/config.ts';
import { DomainError } from '../kernel/errors.ts';

/** What the delivery hook receives: one message per token, for the deployment's mailer to send (issue 19). */
export type DeliveryMessage =
  | {
      kind: 'invitation';
      email: string;
      token: string;
      expiresAt: string;
      invitationId: string;
      orgId: string;
      orgName: string;
      role: string;
      invitedByUserId: string;
    }
  | { kind: 'email-verification'; email: string; token: string; expiresAt: string; userId: string };

export function deliveryConfigured(config: Config): boolean {
  return config.DELIVERY_WEBHOOK_URL !== undefined;
}

/**
 * POSTs one message to DELIVERY_WEBHOOK_URL and waits for a 2xx, at most DELIVERY_TIMEOUT_MS. Callers run it
 * inside the transaction that stores the token's hash, so a failed delivery (502) leaves nothing behind: the
 * token exists nowhere but in this request, and a durable retry would have to store it in clear.
 */
export async function deliver(config: Config, message: DeliveryMessage): Promise<void> {
  const url = config.DELIVERY_WEBHOOK_URL;
  if (!url) throw new DomainError('CONFIGURATION_INVALID', 'No delivery hook is configured (DELIVERY_WEBHOOK_URL).');
  let status: number;
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(message),
      // A redirect could carry the token somewhere the operator did not configure.
      redirect: 'manual',
      signal: AbortSignal.timeout(config.DELIVERY_TIMEOUT_MS),
    });
    status = response.status;
    await response.body?.cancel();
  } catch {
    throw new DomainError('DEPENDENCY_UNAVAILABLE', 'The delivery hook did not answer in time; nothing was created.', {
      details: { dependency: 'delivery-hook' },
    });
  }
  if (status < 200 || status > 299) {
    throw new DomainError('DEPENDENCY_UNAVAILABLE', 'The delivery hook refused the message; nothing was created.', {
      details: { dependency: 'delivery-hook', status },
    });
  }
}
