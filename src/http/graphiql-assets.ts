import type { RequestHandler } from 'express';
import { sendError } from './error-response.ts';

// The GraphiQL page's script, styles and Monaco workers, served locally (the page: src/graph/server/graphiql.ts).
type Bundle = typeof import('@graphql-yoga/render-graphiql/graphiql');

/** The files of the page, by the name they are served under. */
const ASSETS: Record<string, { type: string; content: (bundle: Bundle) => string }> = {
  'graphiql.js': { type: 'text/javascript', content: (bundle) => bundle.js },
  'graphiql.css': { type: 'text/css', content: (bundle) => bundle.css },
  'editor.worker.js': { type: 'text/javascript', content: (bundle) => bundle.editorWorkerService },
  'json.worker.js': { type: 'text/javascript', content: (bundle) => bundle.jsonWorker },
  'graphql.worker.js': { type: 'text/javascript', content: (bundle) => bundle.graphqlWorker },
};

// 9 MB of JavaScript: loaded on the first page view, not by every process (workers, the CLI, tests) at start-up.
let bundle: Promise<Bundle> | undefined;
const loadBundle = () => (bundle ??= import('@graphql-yoga/render-graphiql/graphiql'));

/** GET /graphql/assets/:name — the bundle's files, cacheable: they change only with the package version. */
export const graphiqlAssets: RequestHandler = async (req, res) => {
  const asset = Object.hasOwn(ASSETS, String(req.params.name)) ? ASSETS[String(req.params.name)] : undefined;
  if (!asset) return sendError(req, res, { code: 'RESOURCE_NOT_FOUND', message: 'No such GraphiQL asset.' });
  const content = asset.content(await loadBundle());
  res.set({ 'Content-Type': `${asset.type}; charset=utf-8`, 'Cache-Control': 'public, max-age=86400' });
  res.send(content);
};
