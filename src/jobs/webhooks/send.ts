import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import {
  literalAddress,
  portOf,
  refusedAddress,
  refusedPort,
  type DestinationRules,
} from '../../catalog/webhook-destinations.ts';

/**
 * One HTTP POST of one webhook message (issue 27). The destination rule is applied to the address the socket
 * connects to: a custom `lookup` resolves the name, refuses it when any answer is not allowed, and hands the checked
 * address to the socket, so DNS cannot answer one address to a check and another to the connection (rebinding).
 * No redirect is followed (a 3xx is a failed attempt), and at most 4 KiB of the answer is read.
 */
export const MAX_KEPT_BODY_BYTES = 4_096;

/**
 * Connections are kept alive between messages to the same host and port: a socket in the pool was connected to an
 * address the lookup below checked, and a new TCP (and TLS) handshake per message would cost the worker and the
 * receiver more than the message itself. A socket whose answer was over 4 KiB is closed instead of drained.
 */
const agents = { 'http:': new http.Agent({ keepAlive: true }), 'https:': new https.Agent({ keepAlive: true }) };

export interface SendResult {
  statusCode: number | null;
  /** Null when the answer was 2xx. */
  error: string | null;
  responseBody: string | null;
  durationMs: number;
}

export interface SendOptions {
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  destinations: DestinationRules;
  /** Tests: resolve names differently (a name that resolves to 127.0.0.1). */
  resolve?: typeof dnsLookup;
}

class RefusedDestination extends Error {
  readonly code = 'EWEBHOOKREFUSED';
}

function guardedLookup(rules: DestinationRules, port: number, resolve: typeof dnsLookup): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const answers = addresses as unknown as LookupAddress[];
      const refused = answers
        .map((answer) => ({ answer, why: refusedAddress(answer.address, rules.allowedNetworks) }))
        .find((entry) => entry.why);
      if (refused) {
        const why = `${hostname} resolves to ${refused.answer.address}, a ${refused.why} address webhooks may not reach`;
        return callback(new RefusedDestination(why), '', 0);
      }
      if (answers.length === 0) return callback(new Error(`${hostname} has no address`), '', 0);
      const portRefusal = refusedPort(
        port,
        answers.map((answer) => answer.address),
        rules,
      );
      if (portRefusal !== null) return callback(new RefusedDestination(`${hostname}: ${portRefusal}`), '', 0);
      // `all` is what Node's happy-eyeballs connect asks for; a plain connect wants one address.
      if ((options as { all?: boolean }).all)
        return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, answers);
      return callback(null, answers[0]!.address, answers[0]!.family);
    });
  };
}

/** Why a URL naming an address may not be reached, or null. */
function literalRefusal(literal: string, port: number, rules: DestinationRules): string | null {
  const why = refusedAddress(literal, rules.allowedNetworks);
  if (why !== null) return `${literal} is a ${why} address webhooks may not reach`;
  const portRefusal = refusedPort(port, [literal], rules);
  return portRefusal === null ? null : `${literal}: ${portRefusal}`;
}

function describe(error: unknown): string {
  if (error instanceof RefusedDestination) return error.message;
  const { code, message } = error as { code?: string; message?: string };
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ENOTFOUND') return 'the host name does not resolve';
  return `${code ? `${code}: ` : ''}${message ?? String(error)}`.slice(0, 300);
}

export function sendMessage(options: SendOptions): Promise<SendResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  return new Promise((resolve) => {
    let settled = false;
    const finish = (result: Omit<SendResult, 'durationMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...result, durationMs: elapsed() });
    };
    const url = new URL(options.url);
    const literal = literalAddress(url);
    const refusal = literal === null ? null : literalRefusal(literal, portOf(url), options.destinations);
    const timer = setTimeout(() => {
      request?.destroy(new Error('timeout'));
      finish({ statusCode: null, error: `no complete answer within ${options.timeoutMs} ms`, responseBody: null });
    }, options.timeoutMs);
    if (refusal !== null) {
      finish({
        statusCode: null,
        error: refusal,
        responseBody: null,
      });
      return;
    }
    const client = url.protocol === 'https:' ? https : http;
    const request: http.ClientRequest | undefined = client.request(
      url,
      {
        method: 'POST',
        headers: { ...options.headers, 'content-length': String(Buffer.byteLength(options.body)) },
        agent: agents[url.protocol as 'http:' | 'https:'],
        lookup: guardedLookup(options.destinations, portOf(url), options.resolve ?? dnsLookup),
      },
      (response) => {
        const chunks: Buffer[] = [];
        let kept = 0;
        const done = () => {
          const statusCode = response.statusCode ?? null;
          const ok = statusCode !== null && statusCode >= 200 && statusCode < 300;
          const text = Buffer.concat(chunks).subarray(0, MAX_KEPT_BODY_BYTES).toString('utf8');
          finish({
            statusCode,
            error: ok ? null : `the endpoint answered ${statusCode}`,
            responseBody: text === '' ? null : text,
          });
        };
        response.on('data', (chunk: Buffer) => {
          if (kept < MAX_KEPT_BODY_BYTES) chunks.push(chunk);
          kept += chunk.length;
          if (kept >= MAX_KEPT_BODY_BYTES) {
            done();
            response.destroy();
          }
        });
        response.on('end', done);
        response.on('error', (error) =>
          finish({ statusCode: response.statusCode ?? null, error: describe(error), responseBody: null }),
        );
      },
    );
    request.on('error', (error) => finish({ statusCode: null, error: describe(error), responseBody: null }));
    request.end(options.body);
  });
}
