import { execFileSync } from 'node:child_process';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { ensureDatabase } from '../src/db/database.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded.ts';
import { migrate } from '../src/db/migrate.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A server URL (any database) on which test files may create their own databases. */
    serverUrl: string;
    /** A migrated database that each test file clones with CREATE DATABASE … TEMPLATE. */
    templateDatabase: string;
  }
}

let embedded: EmbeddedPostgres | null = null;
let serverUrl = '';
const templateDatabase = `wds_template_${process.pid}`;

async function dropDatabase(url: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

/** TEST_DATABASE_URL or DATABASE_URL when set (CI uses the machine's PostgreSQL), else the embedded server. */
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
  await dropDatabase(serverUrl, templateDatabase);
  await migrate(await ensureDatabase(serverUrl, templateDatabase));
  project.provide('serverUrl', serverUrl);
  project.provide('templateDatabase', templateDatabase);
}

export async function teardown(): Promise<void> {
  await dropDatabase(serverUrl, templateDatabase);
  await embedded?.stop();
}
