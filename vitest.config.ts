import { availableParallelism } from 'node:os';
import { relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The files that spend longest waiting on processes they spawn, on PostgreSQL restarts or on a browser (measured
 * in docs/decisions/testing.md), longest first. They start before the rest, so that the short files fill the other
 * worker meanwhile instead of one of these running alone at the end. Vitest's own order (longest first by the
 * previous run's durations) needs a cache that a fresh CI clone does not have; there it would go by file size.
 */
const SLOW_FIRST = [
  'test/fuzz.test.ts',
  'test/several-processes.test.ts',
  'test/db-restart.test.ts',
  'test/production-start.test.ts',
  'test/cli.test.ts',
  'test/embedded.test.ts',
  'test/connection-limits.test.ts',
  'test/webhook-recovery.test.ts',
];

class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (spec: TestSpecification) => {
      const at = SLOW_FIRST.indexOf(relative(spec.project.config.root, spec.moduleId));
      return at === -1 ? SLOW_FIRST.length : at;
    };
    return sorted
      .map((spec, index) => ({ spec, index }))
      .sort((a, b) => rank(a.spec) - rank(b.spec) || a.index - b.index)
      .map(({ spec }) => spec);
  }
}

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
    // Vitest's default is one worker fewer than the cores: on a 2-core CI machine that is one, and the whole suite
    // ran file after file, mostly waiting on spawned processes and PostgreSQL. One worker per core overlaps those
    // waits (docs/decisions/testing.md has the figures).
    maxWorkers: Math.max(2, availableParallelism()),
    // A worker keeps the modules it loaded from one file to the next, instead of importing the service's ~2,000
    // modules (Pothos schema, Prisma, graphql-js) again for every file: six small files took 74 s of CPU isolated
    // and 37 s not. Files share nothing else: each has its own database, servers and ports, and no file mocks a
    // module or changes a global that another reads.
    isolate: false,
    sequence: { sequencer: SlowFirstSequencer },
    testTimeout: 30_000,
    hookTimeout: 120_000,
    env: { NODE_ENV: 'test' },
  },
});
