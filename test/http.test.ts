import { connect } from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import { expectError } from './helpers/expectations.ts';
import { createOrg, idempotencyKey } from './helpers/factories.ts';
import { startTestServer } from './helpers/server.ts';
import { useServerWithOrg } from './helpers/suite.ts';

const suite = useServerWithOrg({ BODY_LIMIT_BYTES: '2048', BODY_READ_TIMEOUT_MS: '300' });

/** Sends raw bytes and returns what the server answered before closing (for a body that never finishes). */
function rawExchange(port: number, payload: string, waitMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(payload));
    let received = '';
    socket.on('data', (chunk) => (received += chunk.toString()));
    socket.on('close', () => resolve(received));
    socket.on('error', reject);
    setTimeout(() => socket.destroy(), waitMs).unref();
  });
}

describe('the HTTP envelope', () => {
  it('answers an unknown route with 404 and the envelope', async () => {
    expectError(
      await suite.server.request('GET', '/v1/nothing-here', { token: suite.org.adminKey, outsideContract: true }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(await suite.server.request('GET', '/nowhere'), 404, 'RESOURCE_NOT_FOUND');
  });

  it('answers a known path with the wrong method with 405 and Allow', async () => {
    const response = await suite.server.request('DELETE', '/v1/me/preferences', {
      token: suite.org.adminKey,
      outsideContract: true,
    });
    expectError(response, 405, 'METHOD_NOT_ALLOWED');
    expect(response.headers.get('allow')).toBe('GET, PATCH');
  });

  it('puts X-Request-Id on every response and echoes a well-formed client id', async () => {
    const ok = await suite.server.request('GET', '/healthz');
    expect(ok.headers.get('x-request-id')).toMatch(/^[0-7][0-9A-HJKMNP-TV-Z]{25}$/);
    const traced = await suite.server.request('GET', '/v1/me/preferences', {
      token: suite.org.adminKey,
      headers: { 'x-request-id': 'trace-1234.abc' },
    });
    expect(traced.headers.get('x-request-id')).toBe('trace-1234.abc');
    const bogus = await suite.server.request('GET', '/v1/nope', {
      headers: { 'x-request-id': 'bad id with spaces' },
      outsideContract: true,
    });
    expect(bogus.headers.get('x-request-id')).toMatch(/^[0-7][0-9A-HJKMNP-TV-Z]{25}$/);
    expect(bogus.body.error.requestId).toBe(bogus.headers.get('x-request-id'));
  });

  it('answers malformed JSON with 400 BAD_REQUEST', async () => {
    const response = await suite.server.request('PATCH', '/v1/me/preferences', {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      rawBody: '{"theme": ',
    });
    expectError(response, 400, 'BAD_REQUEST');
  });

  it('answers a non-JSON content type with 415', async () => {
    const response = await suite.server.request('PATCH', '/v1/me/preferences', {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      rawBody: 'theme=dark',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expectError(response, 415, 'UNSUPPORTED_MEDIA_TYPE');
  });

  it('answers a missing body with 422', async () => {
    const response = await suite.server.request('PATCH', '/v1/me/preferences', {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
    });
    expectError(response, 422, 'VALIDATION_FAILED');
  });

  it('answers a body over the limit with 413 PAYLOAD_TOO_LARGE, before authenticating it', async () => {
    const response = await suite.server.request('PATCH', '/v1/me/preferences', {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { theme: 'x'.repeat(4096) },
    });
    expectError(response, 413, 'PAYLOAD_TOO_LARGE');
  });

  it('answers a malformed path ID with 400 naming the parameter', async () => {
    const response = await suite.server.request('GET', '/v1/orgs/not-an-id', { token: suite.org.adminKey });
    expectError(response, 400, 'BAD_REQUEST');
    expect(response.body.error.details.problems[0].path).toEqual(['path', 'orgId']);
  });

  it('answers a path parameter that is not valid percent-encoding with 400, not 500', async () => {
    const response = await suite.server.request(
      'GET',
      `/v1/orgs/${suite.org.orgId}/jobs/01J00000000000000000000000/artifacts/%E0%A4%A`,
      {
        token: suite.org.adminKey,
      },
    );
    expectError(response, 400, 'BAD_REQUEST');
  });

  it('answers a body that stalls past the read deadline with 408 REQUEST_TIMEOUT', async () => {
    const port = Number(new URL(suite.server.url).port);
    const head = [
      'PATCH /v1/me/preferences HTTP/1.1',
      'Host: localhost',
      `Authorization: Bearer ${suite.org.adminKey}`,
      `Idempotency-Key: ${idempotencyKey()}`,
      'Content-Type: application/json',
      'Content-Length: 100',
      '',
      '{"theme":',
    ].join('\r\n');
    const answer = await rawExchange(port, head, 5_000);
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
    expect(body.error.code).toBe('REQUEST_TIMEOUT');
    expect(body.error.requestId).toMatch(/^[0-7][0-9A-HJKMNP-TV-Z]{25}$/);
  });

  it('redacts unexpected failures to a 500 INTERNAL_ERROR without internals', async () => {
    const broken = await startTestServer();
    try {
      const brokenOrg = await createOrg(broken.prisma);
      await broken.prisma.$executeRawUnsafe('ALTER TABLE preferences RENAME TO preferences_gone');
      const response = await broken.request('GET', '/v1/me/preferences', { token: brokenOrg.adminKey });
      expectError(response, 500, 'INTERNAL_ERROR');
      expect(response.body.error.message).toBe('Internal error.');
      expect(response.text).not.toMatch(/preferences|SELECT|prisma|stack/i);
      expect(response.body.error.details).toBeUndefined();
    } finally {
      await broken.close();
    }
  });
});

describe('health', () => {
  it('reports liveness and database readiness', async () => {
    expect((await suite.server.request('GET', '/healthz')).body).toEqual({ status: 'ok' });
    expect((await suite.server.request('GET', '/readyz')).body).toEqual({
      status: 'ready',
      checks: { database: 'ok' },
    });
  });
});

describe('per-credential limits', () => {
  it('answers 429 RATE_LIMITED with Retry-After in whole seconds past the rate', async () => {
    const limited = await startTestServer({ RATE_LIMIT_RPS: '2', RATE_LIMIT_BURST: '0' });
    try {
      const token = (await createOrg(limited.prisma)).adminKey;
      const responses = await Promise.all(
        Array.from({ length: 4 }, () => limited.request('GET', '/v1/preferences/options', { token })),
      );
      const refused = responses.filter((response) => response.status === 429);
      expect(refused.length).toBeGreaterThanOrEqual(2);
      expectError(refused[0]!, 429, 'RATE_LIMITED');
      expect(refused[0]!.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
      // Another credential has its own budget.
      const other = (await createOrg(limited.prisma)).adminKey;
      expect((await limited.request('GET', '/v1/preferences/options', { token: other })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  it('answers 429 when one credential has too many requests in flight', async () => {
    const limited = await startTestServer({
      CONCURRENCY_LIMIT: '1',
      CONCURRENCY_QUEUE: '0',
      BODY_READ_TIMEOUT_MS: '2000',
    });
    try {
      const token = (await createOrg(limited.prisma)).adminKey;
      const port = Number(new URL(limited.url).port);
      // Holds the only slot: headers sent (a valid key among them, or the 400 for it comes before the body is
      // read), body never finished. Polls wait on the slot being held, not on a delay. A poll may hold the slot
      // when the stalled request arrives; that request is then the one refused (the queue is 0), so it answers
      // at once and is sent again.
      let stalled: Promise<string> | undefined;
      let refused: Awaited<ReturnType<typeof limited.request>> | undefined;
      for (let attempt = 1; !refused; attempt += 1) {
        let answered = false;
        stalled = rawExchange(
          port,
          [
            'PATCH /v1/me/preferences HTTP/1.1',
            'Host: localhost',
            `Authorization: Bearer ${token}`,
            `Idempotency-Key: stalled-${attempt}-0001`,
            'Content-Type: application/json',
            'Content-Length: 50',
            '',
            '{',
          ].join('\r\n'),
          3_000,
        ).finally(() => (answered = true));
        // Until the stalled request is answered (its 3 s exchange) or a poll is refused because it holds the slot.
        await vi.waitFor(
          async () => {
            if (answered) return;
            const poll = await limited.request('GET', '/v1/me/preferences', { token });
            if (poll.status !== 200) refused = poll;
            else throw new Error('the stalled request does not hold the slot yet');
          },
          { timeout: 10_000, interval: 1 },
        );
        if (!refused) expect(await stalled, 'the stalled request lost the slot to a poll').toMatch(/^HTTP\/1\.1 429/);
      }
      expectError(refused, 429, 'RATE_LIMITED');
      expect(refused.headers.get('retry-after')).toBe('1');
      await stalled;
      expect((await limited.request('GET', '/v1/me/preferences', { token })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});
