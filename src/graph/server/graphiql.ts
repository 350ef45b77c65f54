import type { GraphiQLOptions } from 'graphql-yoga';

/**
 * GraphiQL for browsers at GET /graphql, working offline. Yoga's built-in page loads its script, styles and Monaco
 * workers from unpkg; the service may run where there is no internet, so the same bundle
 * (@graphql-yoga/render-graphiql, pinned with graphql-yoga) is served from /graphql/assets instead
 * (src/http/graphiql-assets.ts).
 */
export const GRAPHIQL_ASSET_PATH = '/graphql/assets';

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
