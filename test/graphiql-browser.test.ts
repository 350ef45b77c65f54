import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useServerWithOrg } from './helpers/suite.ts';

/**
 * GraphiQL at GET /graphql in a real browser (Debian's headless Chromium), offline: every request the page makes
 * must stay on the service. Skipped only where /usr/bin/chromium is missing (.ci/run installs it).
 */
const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
if (!available)
  console.warn(`test/graphiql-browser.test.ts skipped: ${CHROMIUM} is missing (apt-get install -y chromium)`);

const suite = useServerWithOrg({ RUN_WORKER: 'false' });
let browser: Browser;

beforeAll(async () => {
  if (!available) return;
  // Playwright gives the browser a fresh, temporary profile of its own.
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
});

afterAll(async () => {
  await browser?.close();
});

/** Replaces a Monaco editor's text: select all, then insert (typing would trigger Monaco's auto-closing brackets). */
async function replaceEditorText(page: Page, editor: string, text: string): Promise<void> {
  await page.locator(editor).click();
  await page.keyboard.press('ControlOrMeta+A');
  await page.keyboard.press('Delete');
  await page.keyboard.insertText(text);
}

describe.skipIf(!available)('GraphiQL in a browser', () => {
  it('loads from the service alone, sends the API key from the headers editor and shows the answer', async () => {
    const page = await browser.newPage();
    const foreign: string[] = [];
    page.on('request', (request) => {
      const url = new URL(request.url());
      if (!['data:', 'blob:'].includes(url.protocol) && url.origin !== suite.server.url) foreign.push(request.url());
    });
    try {
      const response = await page.goto(`${suite.server.url}/graphql`);
      expect(response?.status()).toBe(200);
      expect(response?.headers()['content-type']).toMatch(/^text\/html/);
      await page.locator('.graphiql-execute-button').waitFor();
      await page.getByRole('button', { name: 'Headers' }).click();
      await replaceEditorText(
        page,
        '.graphiql-editor-tool .graphiql-editor:not(.hidden)',
        JSON.stringify({ Authorization: `Bearer ${suite.org.adminKey}` }),
      );
      await replaceEditorText(
        page,
        '.graphiql-query-editor .graphiql-editor',
        `query { org(orgId: "${suite.org.orgId}") { id name } }`,
      );
      await page.locator('.graphiql-execute-button').click();
      const result = page.locator('.graphiql-response');
      await expect.poll(async () => (await result.textContent()) ?? '', { timeout: 15_000 }).toContain(suite.org.orgId);
      // Monaco renders spaces as no-break spaces.
      const shown = JSON.parse(((await result.textContent()) ?? '').replace(/\u00a0/g, ' '));
      const { name } = await suite.server.prisma.org.findUniqueOrThrow({ where: { id: suite.org.orgId } });
      expect(shown).toEqual({ data: { org: { id: suite.org.orgId, name } } });
      expect(foreign).toEqual([]);
    } finally {
      await page.close();
    }
  }, 60_000);
});
