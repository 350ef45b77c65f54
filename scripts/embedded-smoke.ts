/** Smoke test for the embedded PostgreSQL: tsx scripts/embedded-smoke.ts <dataDir>. Prints one line of JSON. PG_LOG=1 shows server output on stderr. */
import pg from 'pg';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';

const dataDir = process.argv[2];
if (!dataDir) {
  console.error('usage: tsx scripts/embedded-smoke.ts <dataDir>');
  process.exit(2);
}
const server = await startEmbeddedPostgres({
  dataDir,
  log: process.env.PG_LOG ? (line) => console.error(line) : undefined,
});
try {
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  try {
    const { rows } = await client.query<{ version: string }>('select version()');
    console.log(JSON.stringify({ ok: true, version: rows[0]?.version, url: server.url }));
  } finally {
    await client.end();
  }
} finally {
  await server.stop();
}
