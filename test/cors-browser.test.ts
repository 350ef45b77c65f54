import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumAvailable, CHROMIUM, launchChromium } from './helpers/browser.ts';
import { exported } from './helpers/exports.ts';
import { createOrg, type TestOrg } from './helpers/factories.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { createTable } from './helpers/workspace.ts';

/**
 * What a frontend on another origin sees: a page served from one origin calls the API on another with `fetch`, in
 * headless Chromium, and reads the response headers it needs. A header missing from Access-Control-Expose-Headers
 * on the actual answer (not only the preflight) reads as null there, whatever the server sent.
 */
if (!chromiumAvailable)
  console.warn(`test/cors-browser.test.ts skipped: ${CHROMIUM} is missing (apt-get install -y chromium)`);

let frontend: Server;
let frontendOrigin: string;
let api: TestServer;
let org: TestOrg;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  frontend = createServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>app</title>'),
  );
  frontend.listen(0, '127.0.0.1');
  await once(frontend, 'listening');
  frontendOrigin = `http://127.0.0.1:${(frontend.address() as AddressInfo).port}`;
  api = await startTestServer({ CORS_ORIGINS: frontendOrigin });
  org = await createOrg(api.prisma);
  if (!chromiumAvailable) return;
  browser = await launchChromium();
  page = await browser.newPage();
  await page.goto(frontendOrigin);
});

afterAll(async () => {
  await browser?.close();
  await api?.close();
  frontend?.close();
});

interface Seen {
  status: number;
  headers: Record<string, string | null>;
}

/** `fetch` from the frontend's page; the named response headers as the page's script reads them. */
function browserFetch(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string },
  names: string[],
): Promise<Seen> {
  return page.evaluate(
    async ({ url, init, names }) => {
      const response = await fetch(url, { ...init, credentials: 'include' });
      await response.arrayBuffer();
      return {
        status: response.status,
        headers: Object.fromEntries(names.map((name) => [name, response.headers.get(name)])),
      };
    },
    { url, init, names },
  );
}

describe.skipIf(!chromiumAvailable)('CORS in a browser: the headers a script on an allowed origin can read', () => {
  it('reads X-Request-Id on a successful answer to a preflighted request', async () => {
    const seen = await browserFetch(
      `${api.url}/v1/orgs/${org.orgId}`,
      { headers: { authorization: `Bearer ${org.adminKey}` } },
      ['x-request-id'],
    );
    expect(seen.status).toBe(200);
    expect(seen.headers['x-request-id']).toMatch(/^[0-9A-Z]{26}$/);
  });

  it('reads WWW-Authenticate on a 401', async () => {
    const seen = await browserFetch(
      `${api.url}/v1/orgs/${org.orgId}`,
      { headers: { authorization: 'Bearer wds_not_a_key' } },
      ['www-authenticate', 'x-request-id'],
    );
    expect(seen.status).toBe(401);
    expect(seen.headers['www-authenticate']).toMatch(/^Bearer /);
    expect(seen.headers['x-request-id']).not.toBeNull();
  });

  it('reads Retry-After on a 429', async () => {
    // A small allowance, so that a credential reaches 429 within a few requests.
    const throttled = await startTestServer({
      CORS_ORIGINS: frontendOrigin,
      RATE_LIMIT_RPS: '2',
      RATE_LIMIT_BURST: '0',
    });
    try {
      const other = await createOrg(throttled.prisma);
      const url = `${throttled.url}/v1/orgs/${other.orgId}`;
      let seen: Seen | undefined;
      for (let attempt = 0; attempt < 20 && seen?.status !== 429; attempt += 1) {
        seen = await browserFetch(url, { headers: { authorization: `Bearer ${other.adminKey}` } }, ['retry-after']);
      }
      expect(seen?.status).toBe(429);
      expect(Number(seen?.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    } finally {
      await throttled.close();
    }
  });

  it('reads Content-Disposition and Content-Digest on a download, and Location on a 202', async () => {
    const owner = await createOrg(api.prisma);
    const table = await createTable(api, owner, [{ name: 'Name', type: 'text' }]);
    const accepted = await browserFetch(
      `${api.url}${table.path}/exports`,
      {
        method: 'POST',
        headers: {
          authorization: `Bearer ${owner.adminKey}`,
          'content-type': 'application/json',
          'idempotency-key': `cors-${Date.now()}`,
        },
        body: JSON.stringify({ format: 'csv' }),
      },
      ['location'],
    );
    expect(accepted.status).toBe(202);
    expect(accepted.headers.location).toMatch(new RegExp(`^/v1/orgs/${owner.orgId}/jobs/[0-9A-Z]{26}$`));
    const job = await exported(api, owner.adminKey, table, { format: 'csv' });
    const seen = await browserFetch(
      `${api.url}${job.artifacts[0].url}`,
      { headers: { authorization: `Bearer ${owner.adminKey}` } },
      ['content-disposition', 'content-digest'],
    );
    expect(seen.status).toBe(200);
    expect(seen.headers['content-disposition']).toMatch(/^attachment; filename=/);
    expect(seen.headers['content-digest']).toMatch(/^sha-256=:[A-Za-z0-9+/=]+:$/);
  });
});
