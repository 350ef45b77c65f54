import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Router, type Response } from 'express';

/**
 * The API reference at GET /docs: Scalar's standalone bundle (@scalar/api-reference, pinned) rendering
 * /v1/openapi.json, served from this service so that it works offline, like GraphiQL. The page's script is a file,
 * not inline, so the Content-Security-Policy can keep `script-src 'self'`; the bundle injects its own styles.
 */
const BUNDLE = join(
  dirname(createRequire(import.meta.url).resolve('@scalar/api-reference')),
  'browser',
  'standalone.js',
);
export const DOCS_ASSET_PATH = '/docs/assets';

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>Workspace Data Service — API reference</title>
    <link rel="icon" href="data:," />
  </head>
  <body>
    <div id="app"></div>
    <script src="${DOCS_ASSET_PATH}/scalar.js"></script>
    <script src="${DOCS_ASSET_PATH}/init.js"></script>
  </body>
</html>
`;

// Nothing leaves the page: no web fonts, no Scalar proxy or telemetry; "try it" calls this service directly.
const INIT = `Scalar.createApiReference('#app', ${JSON.stringify({
  url: '/v1/openapi.json',
  withDefaultFonts: false,
  telemetry: false,
  hideClientButton: true,
  showDeveloperTools: 'never',
  agent: { disabled: true },
  metaData: { title: 'Workspace Data Service — API reference' },
})});
`;

// 4.3 MB: read on the first page view, not by every process at start-up.
let bundle: Promise<Buffer> | undefined;

function sendScript(res: Response, content: string | Buffer): void {
  res.set({ 'Content-Type': 'text/javascript; charset=utf-8', 'Cache-Control': 'public, max-age=86400' }).send(content);
}

export function docsRoutes(): Router {
  const router = Router({ strict: true });
  router.get('/docs', (_req, res) => {
    res
      .set({ 'Content-Type': 'text/html; charset=utf-8', 'Content-Security-Policy': CSP, 'Cache-Control': 'no-cache' })
      .send(PAGE);
  });
  router.get(`${DOCS_ASSET_PATH}/scalar.js`, async (_req, res) => {
    bundle ??= readFile(BUNDLE);
    bundle.catch(() => (bundle = undefined));
    sendScript(res, await bundle);
  });
  router.get(`${DOCS_ASSET_PATH}/init.js`, (_req, res) => sendScript(res, INIT));
  return router;
}
