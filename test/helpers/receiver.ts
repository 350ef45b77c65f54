import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One request a webhook receiver got. */
export interface Received {
  id: string;
  timestamp: string;
  signature: string;
  headers: IncomingMessage['headers'];
  body: string;
  json: any;
  at: number;
}

/**
 * What the receiver does with the next request: answer a status (default 204), or hold it `holdMs` before answering
 * (to time the sender out, or to let a test kill the worker while a message is in flight), or until `until` settles
 * (a receiver that hangs for as long as the test wants).
 */
export interface Reply {
  status?: number;
  holdMs?: number;
  until?: Promise<unknown>;
  body?: string;
}

/** A real webhook endpoint on loopback: records every request and answers from a script of replies. */
export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** Replies for the next requests, in order; afterwards 204. */
  script(...replies: Reply[]): void;
  /** Received messages (deduplicated by webhook-id, first arrival kept) whose body `type` is not `webhook.test`. */
  messages(): Received[];
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  const replies: Reply[] = [];
  const held = new Set<ServerResponse>();
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: unknown = null;
      try {
        json = JSON.parse(body);
      } catch {
        json = null;
      }
      received.push({
        id: String(request.headers['webhook-id']),
        timestamp: String(request.headers['webhook-timestamp']),
        signature: String(request.headers['webhook-signature']),
        headers: request.headers,
        body,
        json,
        at: Date.now(),
      });
      const reply = replies.shift() ?? {};
      const answer = () => {
        held.delete(response);
        if (response.destroyed) return;
        response.writeHead(reply.status ?? 204);
        response.end(reply.body);
      };
      if (reply.holdMs) {
        held.add(response);
        setTimeout(answer, reply.holdMs);
      } else if (reply.until) {
        held.add(response);
        void reply.until.finally(answer);
      } else {
        answer();
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    script: (...next) => replies.push(...next),
    messages: () => {
      const seen = new Set<string>();
      return received.filter(
        (entry) => entry.json?.type !== 'webhook.test' && !seen.has(entry.id) && seen.add(entry.id),
      );
    },
    close: async () => {
      for (const response of held) response.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Verifies a received request as a receiver would, with the `standardwebhooks` library; returns the parsed body. */
export function verify(secret: string, entry: Received): any {
  return new Webhook(secret).verify(entry.body, {
    'webhook-id': entry.id,
    'webhook-timestamp': entry.timestamp,
    'webhook-signature': entry.signature,
  });
}
