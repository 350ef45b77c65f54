import { defineConfig } from 'vitest/config';

export default defineConfig({
  // graphql 16 ships CJS (`main`) and ESM (`module`) builds. Node loads the CJS one for Yoga and Pothos, while
  // Vite would give our sources the ESM one: two copies of graphql-js break `instanceof` checks. Use Node's.
  resolve: { alias: [{ find: /^graphql$/, replacement: 'graphql/index.js' }] },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Each file gets its own database cloned from a migrated template, so files run in parallel safely.
    pool: 'forks',
    fileParallelism: true,
    testTimeout: 30_000,
    hookTimeout: 120_000,
    env: { NODE_ENV: 'test' },
  },
});
