import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { columnOf, rowsTableOf } from '../src/data/identifiers.ts';
import { createPrisma } from '../src/db/prisma.ts';
import { bootstrapOrg } from '../src/identity/provision.ts';
import { api, percentile, startBeforeServer, startServers } from './harness.ts';

/**
 * Issue 48: one org sends GraphQL documents of aliased heavy aggregates (a search and a distinct count over
 * BENCH_HEAVY_ROWS rows, 200,000 by default) from FLOOD_LOOPS loops — its credential's in-flight limit — while another
 * org reads a 20-row page of a small table from two sequential clients. Prints that org's p50 and p95 idle, during
 * floods of 15-alias documents and of 4-alias documents (the most a document may now hold), and how the flood's
 * documents were answered. The service runs with its default limits (pool 10: 4 in flight per credential, 6 per org)
 * but no rate limit.
 *
 * BENCH_BEFORE=<checkout> (a built older tree, bench/harness.ts) runs that checkout's server beside this one on the
 * same database; the sides alternate for BENCH_ROUNDS rounds (default 2) of BENCH_SECONDS (default 5) per phase. A
 * flooding loop whose document is refused waits 50 ms before the next, as a client backing off an error would, so a
 * refusal does not become a busy loop.
 */
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROWS = Number(process.env.BENCH_HEAVY_ROWS ?? 200_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const FLOOD_LOOPS = 4;
const REFUSED_PAUSE_MS = 50;

process.env.BENCH_KEEP_LIMITS = '1';
// The in-flight limits are part of what is measured; the rate limit would only turn either org's load into 429s.
process.env.RATE_LIMIT_RPS = '0';

const servers = await startServers();
const before = await startBeforeServer(servers);
try {
  const database = await api(servers, 'POST', `/v1/orgs/${servers.orgId}/databases`, { name: 'Heavy' });
  const table = await api(servers, 'POST', `/v1/orgs/${servers.orgId}/databases/${database.id}/tables`, {
    name: 'Customers',
    fields: [{ name: 'Name', type: 'text' }],
  });
  const seed = new pg.Client({ connectionString: servers.databaseUrl });
  await seed.connect();
  const seeded = performance.now();
  await seed.query(
    `INSERT INTO ${rowsTableOf(database.id, table.id)} (id, version, created_at, updated_at, ${columnOf(table.fields[0].id)})
    SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), md5(g::text) || ' customer ' || g FROM generate_series(1, $1::int) AS g`,
    [ROWS],
  );
  await seed.query(`ANALYZE ${rowsTableOf(database.id, table.id)}`);
  await seed.end();
  process.stdout.write(`seeded ${ROWS} rows in ${((performance.now() - seeded) / 1000).toFixed(1)} s\n`);

  const prisma = createPrisma(servers.databaseUrl, 1);
  const other = await bootstrapOrg(prisma, {
    orgName: 'Other',
    email: `other-${Date.now()}@example.com`,
    name: 'Other',
  });
  await prisma.$disconnect();
  const asOther = { ...servers, orgId: other.orgId, apiKey: other.apiKey };
  const otherDatabase = await api(asOther, 'POST', `/v1/orgs/${other.orgId}/databases`, { name: 'Small' });
  const otherTable = await api(asOther, 'POST', `/v1/orgs/${other.orgId}/databases/${otherDatabase.id}/tables`, {
    name: 'Notes',
    fields: [{ name: 'Title', type: 'text' }],
  });
  const otherPath = `/v1/orgs/${other.orgId}/databases/${otherDatabase.id}/tables/${otherTable.id}`;
  for (let index = 0; index < 50; index += 1)
    await api(asOther, 'POST', `${otherPath}/rows`, {
      expectedSchemaVersion: otherTable.schemaVersion,
      values: { [otherTable.fields[0].id]: `note ${index}` },
    });

  const heavy = `aggregateRows(orgId: $orgId, databaseId: $databaseId, tableId: $tableId, input: {search: "customer 1", aggregates: [{fn: "count", as: "n"}, {fn: "countDistinct", fieldId: "Name", as: "d"}]}) { data { values } }`;
  const documentOf = (aliases: number) =>
    `query($orgId: ID!, $databaseId: ID!, $tableId: ID!) { ${Array.from({ length: aliases }, (_item, index) => `a${index}: ${heavy}`).join(' ')} }`;
  const variables = { orgId: servers.orgId, databaseId: database.id, tableId: table.id };

  /** The other org's page latencies (ms) from two sequential clients until `done()`. */
  async function otherLatencies(port: number, done: () => boolean): Promise<number[]> {
    const latencies: number[] = [];
    await Promise.all(
      Array.from({ length: 2 }, async () => {
        while (!done()) {
          const started = performance.now();
          const response = await fetch(`http://127.0.0.1:${port}${otherPath}/rows?limit=20`, {
            headers: { authorization: `Bearer ${other.apiKey}` },
          });
          await response.arrayBuffer();
          if (response.status !== 200) throw new Error(`other org's page: ${response.status}`);
          latencies.push(performance.now() - started);
        }
      }),
    );
    return latencies.sort((a, b) => a - b);
  }

  /** The other org's p50/p95 over SECONDS, alone or while FLOOD_LOOPS loops send documents of `aliases` heavy reads. */
  async function phase(port: number, aliases: number | null): Promise<string> {
    const outcomes = new Map<number, number>();
    let flooding = aliases !== null;
    const flood = Array.from({ length: aliases === null ? 0 : FLOOD_LOOPS }, async () => {
      while (flooding) {
        const response = await fetch(`http://127.0.0.1:${port}/graphql`, {
          method: 'POST',
          headers: { authorization: `Bearer ${servers.apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ query: documentOf(aliases!), variables }),
        });
        await response.arrayBuffer();
        outcomes.set(response.status, (outcomes.get(response.status) ?? 0) + 1);
        if (response.status !== 200) await sleep(REFUSED_PAUSE_MS);
      }
    });
    const until = Date.now() + SECONDS * 1000;
    const latencies = await otherLatencies(port, () => Date.now() >= until);
    flooding = false;
    await Promise.all(flood);
    const flooded = [...outcomes].map(([status, count]) => `${count} × ${status}`).join(', ') || '-';
    const label = aliases === null ? 'idle' : `${aliases} aliases`;
    return `${label.padEnd(11)} other org p50 ${percentile(latencies, 0.5).toFixed(1).padStart(7)} ms  p95 ${percentile(latencies, 0.95).toFixed(1).padStart(7)} ms  (${latencies.length} pages)  flood documents: ${flooded}`;
  }

  const sides = [
    ...(before ? [{ name: 'before', port: before.port }] : []),
    { name: 'this checkout', port: servers.servicePort },
  ];
  for (const side of sides) {
    const warm = Date.now() + 2000;
    await otherLatencies(side.port, () => Date.now() >= warm);
  }
  for (let round = 1; round <= ROUNDS; round += 1) {
    for (const side of round % 2 === 1 ? sides : [...sides].reverse()) {
      for (const aliases of [null, 15, 4]) {
        process.stdout.write(`round ${round} | ${side.name.padEnd(13)} | ${await phase(side.port, aliases)}\n`);
      }
    }
  }
} finally {
  await before?.stop();
  await servers.stop();
}
