import path from 'node:path';
import pg from 'pg';
import type { Config } from '../kernel/config.ts';
import type { Logger } from '../kernel/log.ts';
import { startEmbeddedPostgres } from './embedded.ts';

export interface Database {
  url: string;
  /** Stops the embedded server, if this process started one. */
  close(): Promise<void>;
}

const EMBEDDED_DATABASE = 'workspace';

/** Creates `name` on the server behind `url` unless it exists; returns the URL of that database. */
export async function ensureDatabase(url: string, name: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
  const target = new URL(url);
  target.pathname = `/${name}`;
  return target.toString();
}

/**
 * DATABASE_URL when set; otherwise an embedded PostgreSQL whose cluster lives under DATA_DIR (./.data), so that
 * `npm start` works on a machine with nothing installed.
 */
export async function openDatabase(config: Config, log: Logger): Promise<Database> {
  if (config.DATABASE_URL) return { url: config.DATABASE_URL, close: async () => undefined };
  const dataDir = path.resolve(config.DATA_DIR, 'postgres');
  log.info({ dataDir }, 'DATABASE_URL is unset: starting the embedded PostgreSQL');
  const embedded = await startEmbeddedPostgres({ dataDir, log: (line) => log.debug({ postgres: line }) });
  const url = await ensureDatabase(embedded.url, EMBEDDED_DATABASE);
  return { url, close: () => embedded.stop() };
}
