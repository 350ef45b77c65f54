import type { GraphiQLOptions } from 'graphql-yoga';
import type { RequestHandler } from 'express';
import { sendError } from '../../http/error-response.ts';

/**
 * GraphiQL for browsers at GET /graphql, working offline. Yoga's built-in page loads its script, styles and Monaco
 * workers from unpkg; the service may run where there is no internet, so the same bundle
 * (@graphql-yoga/render-graphiql, pinned with graphql-yoga) is served from /graphql/assets instead.
 */
export const GRAPHIQL_ASSET_PATH = '/graphql/assets';

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

/** What GraphiQL opens with: how to send a key, since the page itself holds no credential. */
export const GRAPHIQL_OPTIONS: GraphiQLOptions = {
  title: 'Workspace Data Service — GraphiQL',
  // A key typed into the headers editor must not outlive the tab in localStorage.
  shouldPersistHeaders: false,
  defaultQuery: [
    '# Put your API key in the Headers tab below:',
    '#   { "Authorization": "Bearer wds_…" }',
    '# Introspection (the Docs pane) works without one.',
    '{',
    '  preferenceOptions { themes }',
    '}',
    '',
  ].join('\n'),
};

/** JSON inside a <script>: `<` escaped so that no value can close the element. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c');
}

export function renderGraphiQLPage(options: GraphiQLOptions): string {
  const asset = (name: string) => `${GRAPHIQL_ASSET_PATH}/${name}`;
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <title>${String(options.title ?? 'GraphiQL').replace(/[<&>"]/g, '')}</title>
    <link rel="icon" href="data:," />
    <link rel="stylesheet" href="${asset('graphiql.css')}" />
  </head>
  <body id="body" class="no-focus-outline">
    <noscript>You need to enable JavaScript to run GraphiQL.</noscript>
    <div id="root"></div>
    <script>
      const workers = ${scriptJson({ editorWorkerService: asset('editor.worker.js'), json: asset('json.worker.js'), graphql: asset('graphql.worker.js') })};
      self.MonacoEnvironment = { globalAPI: false, getWorkerUrl: (_moduleId, label) => workers[label] };
    </script>
    <script src="${asset('graphiql.js')}"></script>
    <script>
      YogaGraphiQL.renderYogaGraphiQL(document.querySelector('#root'), ${scriptJson(options)});
    </script>
  </body>
</html>`;
}

/** GET /graphql/assets/:name — the bundle's files, cacheable: they change only with the package version. */
export const graphiqlAssets: RequestHandler = async (req, res) => {
  const asset = Object.hasOwn(ASSETS, String(req.params.name)) ? ASSETS[String(req.params.name)] : undefined;
  if (!asset) return sendError(req, res, { code: 'RESOURCE_NOT_FOUND', message: 'No such GraphiQL asset.' });
  const content = asset.content(await loadBundle());
  res.set({ 'Content-Type': `${asset.type}; charset=utf-8`, 'Cache-Control': 'public, max-age=86400' });
  res.send(content);
};
