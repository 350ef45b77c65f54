import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumAvailable, CHROMIUM, launchChromium } from './helpers/browser.ts';
import { useServerWithOrg } from './helpers/suite.ts';

/** The API reference at GET /docs, rendered from /v1/openapi.json in headless Chromium, offline and under its CSP. */
if (!chromiumAvailable)
  console.warn(`test/docs-browser.test.ts skipped: ${CHROMIUM} is missing (apt-get install -y chromium)`);

const suite = useServerWithOrg({ RUN_WORKER: 'false' });
let browser: Browser;

beforeAll(async () => {
  if (chromiumAvailable) browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

describe('GET /docs', () => {
  it('is an HTML page with a CSP that allows only this service', async () => {
    const answer = await fetch(`${suite.server.url}/docs`);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = answer.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).not.toMatch(/https?:/);
    expect(await answer.text()).toContain('/docs/assets/scalar.js');
  });

  it.skipIf(!chromiumAvailable)(
    'renders the operations’ titles from the OpenAPI document, with no request leaving the service',
    async () => {
      const page = await browser.newPage();
      const foreign: string[] = [];
      const violations: string[] = [];
      page.on('request', (request) => {
        const url = new URL(request.url());
        if (!['data:', 'blob:'].includes(url.protocol) && url.origin !== suite.server.url) foreign.push(request.url());
      });
      page.on('console', (message) => {
        if (message.text().includes('Content Security Policy')) violations.push(message.text());
      });
      try {
        const response = await page.goto(`${suite.server.url}/docs`);
        expect(response?.status()).toBe(200);
        // The first tag opens by itself; the titles come from the served document, not from the page.
        const document = await (await fetch(`${suite.server.url}/v1/openapi.json`)).json();
        const titles = [
          document.info.title,
          document.paths['/v1/auth/login'].post.summary,
          document.paths['/v1/auth/step-up'].post.summary,
        ];
        for (const title of titles) await page.getByText(title).first().waitFor({ timeout: 20_000 });
        expect(foreign).toEqual([]);
        expect(violations).toEqual([]);
      } finally {
        await page.close();
      }
    },
    60_000,
  );
});
