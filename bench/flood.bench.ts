import autocannon from 'autocannon';
import pg from 'pg';
import { bootstrapOrg } from '../src/identity/provision.ts';
import { columnOf, rowsTableOf } from '../src/data/identifiers.ts';
import { createPrisma } from '../src/db/prisma.ts';
import { api, startServers, type Figures } from './harness.ts';

/**
 * Issue 18: one credential floods slow reads (FLOOD_CLIENTS loops, each a 25-condition text search scanning
 * BENCH_FLOOD_ROWS rows: within the cost budget, seconds of work) while another org's admin reads its database list.
 * Prints that org's p99 idle and during the flood, and their ratio. The service runs with its configured limits
 * (pool 10: 4 in flight per credential, 6 per org) but no rate limit. BENCH_SECONDS (default 5) is each measuring phase.
 */
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROWS = Number(process.env.BENCH_FLOOD_ROWS ?? 100_000);
const FLOOD_CLIENTS = 12;

process.env.BENCH_KEEP_LIMITS = '1';
// The in-flight limits are what is measured; the rate limit would only turn the other org's load into 429s.
process.env.RATE_LIMIT_RPS = '0';
const servers = await startServers();
try {
  const database = await api(servers, 'POST', `/v1/orgs/${servers.orgId}/databases`, { name: 'Flood' });
  const table = await api(servers, 'POST', `/v1/orgs/${servers.orgId}/databases/${database.id}/tables`, {
    name: 'Big',
    fields: [{ name: 'Name', type: 'text' }],
  });
  const nameColumn = columnOf(table.fields[0].id);
  const seed = new pg.Client({ connectionString: servers.databaseUrl });
  await seed.connect();
  await seed.query(
    `INSERT INTO ${rowsTableOf(database.id, table.id)} (id, version, created_at, updated_at, ${nameColumn})
    SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), md5(g::text) || ' customer ' || g FROM generate_series(1, $1::int) AS g`,
    [ROWS],
  );
  await seed.query(`ANALYZE ${rowsTableOf(database.id, table.id)}`);
  await seed.end();

  const prisma = createPrisma(servers.databaseUrl, 1);
  const other = await bootstrapOrg(prisma, {
    orgName: 'Other',
    email: `other-${Date.now()}@example.com`,
    name: 'Other',
  });
  await prisma.$disconnect();

  const base = `http://127.0.0.1:${servers.servicePort}`;
  const where = {
    or: Array.from({ length: 25 }, (_item, index) => ({ field: 'Name', op: 'iContains', value: `zqNx${index}` })),
  };
  const slowUrl = `${base}/v1/orgs/${servers.orgId}/databases/${database.id}/tables/${table.id}/rows?limit=1&where=${encodeURIComponent(JSON.stringify(where))}`;

  async function measureOther(name: string): Promise<Figures> {
    const result = await autocannon({
      url: `${base}/v1/orgs/${other.orgId}/databases`,
      headers: { authorization: `Bearer ${other.apiKey}` },
      connections: 2,
      duration: SECONDS,
    });
    return {
      name,
      requests: result.requests.total,
      rps: result.requests.average,
      p50: result.latency.p50,
      p99: result.latency.p99,
      errors: result.errors + result.non2xx,
    };
  }

  const idle = await measureOther('other org, idle');
  const outcomes = new Map<number, number>();
  let flooding = true;
  const flood = Array.from({ length: FLOOD_CLIENTS }, async () => {
    while (flooding) {
      const response = await fetch(slowUrl, { headers: { authorization: `Bearer ${servers.apiKey}` } });
      await response.arrayBuffer();
      outcomes.set(response.status, (outcomes.get(response.status) ?? 0) + 1);
    }
  });
  const loaded = await measureOther('other org, during flood');
  flooding = false;
  await Promise.all(flood);

  for (const f of [idle, loaded]) {
    process.stdout.write(
      `${f.name.padEnd(26)} ${f.rps.toFixed(0).padStart(6)} req/s   p50 ${f.p50} ms   p99 ${f.p99} ms   errors ${f.errors}\n`,
    );
  }
  process.stdout.write(
    `flood (${FLOOD_CLIENTS} loops, ${ROWS} rows): ${[...outcomes].map(([status, count]) => `${count} × ${status}`).join(', ')}\n`,
  );
  process.stdout.write(`p99 during flood / idle : ${(loaded.p99 / Math.max(idle.p99, 1)).toFixed(2)}\n`);
  // autocannon's percentiles cover completed requests only: a stalled org shows as lost throughput, not as p99.
  process.stdout.write(`req/s during flood / idle: ${(loaded.rps / Math.max(idle.rps, 1)).toFixed(2)}\n`);
} finally {
  await servers.stop();
}
