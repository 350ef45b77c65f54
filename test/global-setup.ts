import { execFileSync } from 'node:child_process';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { ensureDatabase } from '../src/db/database.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded.ts';
import { migrate } from '../src/db/migrate.ts';
import { citusWorkers, createCitusDatabase, dropOnNodes, freezeTemplate, workerServerUrls } from './helpers/citus.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A server URL (any database) on which test files may create their own databases. */
    serverUrl: string;
    /** A migrated database that each test file clones with CREATE DATABASE … TEMPLATE. */
    templateDatabase: string;
    /**
     * Every server a test database lives on: the one server, or a Citus coordinator followed by its workers
     * (TEST_CITUS_WORKERS, test/helpers/citus.ts).
     */
    databaseNodes: string[];
  }
}

let embedded: EmbeddedPostgres | null = null;
let serverUrl = '';
let nodes: string[] = [];
const templateDatabase = `wds_template_${process.pid}`;

/**
 * TEST_DATABASE_URL or DATABASE_URL when set (CI uses the machine's PostgreSQL), else the embedded server. With
 * TEST_CITUS_WORKERS, that URL is a Citus coordinator and the template exists on every node.
 */
export async function setup(project: TestProject): Promise<void> {
  // Tests that spawn `npm start`, `npm run worker` or the CLI run dist/: build it from the sources under test.
  execFileSync(process.execPath, ['scripts/build.mjs'], { stdio: 'inherit' });
  const configured = process.env.TEST_DATABASE_URL || process.env.DATABASE_URL;
  if (configured) {
    serverUrl = configured;
  } else {
    embedded = await startEmbeddedPostgres({ dataDir: path.resolve('.data/test-postgres') });
    serverUrl = embedded.url;
  }
  const workers = citusWorkers();
  if (workers.length > 0) {
    nodes = [serverUrl, ...workerServerUrls(serverUrl, workers)];
    await dropOnNodes(nodes, templateDatabase);
    await migrate(await createCitusDatabase(serverUrl, workers, templateDatabase));
    await freezeTemplate(nodes, templateDatabase);
  } else {
    nodes = [serverUrl];
    await dropOnNodes(nodes, templateDatabase);
    await migrate(await ensureDatabase(serverUrl, templateDatabase));
  }
  project.provide('serverUrl', serverUrl);
  project.provide('templateDatabase', templateDatabase);
  project.provide('databaseNodes', nodes);
}

export async function teardown(): Promise<void> {
  await dropOnNodes(nodes, templateDatabase);
  await embedded?.stop();
}
