// `npm run build` (and the last step of `npm install` / `npm ci`): the server, the worker and the CLI bundled once
// into dist/ with esbuild, so that `npm start`, `npm run worker` and `npm run cli` run plain JavaScript on node
// instead of compiling TypeScript through tsx at every start. Dependencies stay in node_modules (not bundled).
//
// dist/<name>.js is a two-line launcher: it defaults NODE_ENV to production before anything is loaded (graphql-js,
// for one, reads it at import time and checks every instanceof twice otherwise), then imports dist/bin/<name>.js.
// The bundles sit two directories deep, as the sources do, so that `new URL('../../prisma/migrations/',
// import.meta.url)` in src/db/migrate.ts names the same folder from the bundle as from the source.
import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { build } from 'esbuild';

const ENTRIES = { main: 'src/bin/main.ts', worker: 'src/bin/worker.ts', cli: 'src/bin/cli.ts' };

// Built beside dist/ and swapped in, so that a process starting from dist/ meanwhile never sees half a build.
const next = `dist.${process.pid}`;
rmSync(next, { recursive: true, force: true });
await build({
  entryPoints: ENTRIES,
  outdir: `${next}/bin`,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20.19',
  packages: 'external',
  sourcemap: true,
  logLevel: 'warning',
});
for (const name of Object.keys(ENTRIES)) {
  const launcher = [
    "process.env.NODE_ENV ??= 'production';",
    'process.setSourceMapsEnabled(true);',
    `await import('./bin/${name}.js');`,
  ];
  writeFileSync(`${next}/${name}.js`, `${launcher.join('\n')}\n`);
}
const previous = `dist.${process.pid}.old`;
try {
  renameSync('dist', previous);
} catch (error) {
  if (error.code !== 'ENOENT') throw error;
}
renameSync(next, 'dist');
rmSync(previous, { recursive: true, force: true });
