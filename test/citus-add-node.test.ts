import { execFileSync } from 'node:child_process';
import { appendFileSync, chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/**
 * README "Scaling out", adding a node: a worker added to a running cluster gets databases that already exist when
 * the cluster is rebalanced (`citus_rebalance_start`), while clients write; nothing acknowledged is lost and the
 * moved databases answer from their new node. Runs only on a cluster (`npm run test:citus`); the test starts the
 * third worker itself, as `../shared/citus/cluster.sh` starts the others, and stops it afterwards.
 */
const onCitus = inject('databaseNodes').length > 1;
const PG_BIN = '/usr/lib/postgresql/15/bin';

/** Runs a PostgreSQL binary as the postgres user (PostgreSQL refuses root), as cluster.sh does. */
function asPostgres(command: string, args: string[]): void {
  const quoted = [join(PG_BIN, command), ...args].map((part) => `'${part.replaceAll("'", "'\\''")}'`).join(' ');
  if (process.getuid?.() === 0) execFileSync('su', ['postgres', '-s', '/bin/bash', '-c', quoted], { stdio: 'ignore' });
  else execFileSync('bash', ['-c', quoted], { stdio: 'ignore' });
}

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function on<T>(url: string, run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

/**
 * Starts attempts a spare node makes, each on another free port: a port found free can be taken before the server
 * binds it (initdb runs in between, and the ports the kernel gives outgoing connections come from the same range).
 */
const START_ATTEMPTS = 5;

/** A fourth PostgreSQL server with Citus: a worker not yet in the cluster. */
class SpareNode {
  private constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  static async start(): Promise<SpareNode> {
    const dir = mkdtempSync(join(tmpdir(), 'wds-citus-spare-'));
    chmodSync(dir, 0o777);
    const data = join(dir, 'data');
    asPostgres('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres']);
    appendFileSync(
      join(data, 'postgresql.conf'),
      [
        "shared_preload_libraries = 'citus'",
        "listen_addresses = '127.0.0.1'",
        `unix_socket_directories = '${dir}'`,
        'max_connections = 200',
        'wal_level = logical',
        'citus.enable_schema_based_sharding = on',
        'fsync = off',
        '',
      ].join('\n'),
    );
    for (let attempt = 1; ; attempt += 1) {
      const port = await freePort();
      const log = join(dir, `log.${attempt}`);
      // The last `port` line of postgresql.conf is the one that counts.
      appendFileSync(join(data, 'postgresql.conf'), `port = ${port}\n`);
      try {
        asPostgres('pg_ctl', ['-D', data, '-l', log, '-w', 'start']);
        return new SpareNode(dir, port);
      } catch (error) {
        const taken = readFileSync(log, 'utf8').includes('Address already in use');
        if (taken && attempt < START_ATTEMPTS) continue;
        rmSync(dir, { recursive: true, force: true });
        throw error;
      }
    }
  }

  url(database: string): string {
    return `postgresql://postgres@127.0.0.1:${this.port}/${database}`;
  }

  stop(): void {
    try {
      asPostgres('pg_ctl', ['-D', join(this.dir, 'data'), '-m', 'immediate', '-w', 'stop']);
    } finally {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}

interface Placement {
  schema: string;
  nodeport: number;
}

/** Where each workspace database's schema lives: one node per schema. */
async function placements(url: string): Promise<Map<string, number>> {
  const rows = await on(url, async (client) => {
    const result = await client.query<Placement>(
      `SELECT DISTINCT split_part(table_name::text, '.', 1) AS schema, nodeport
         FROM citus_shards WHERE table_name::text LIKE 'd\\_%'`,
    );
    return result.rows;
  });
  return new Map(rows.map((row) => [row.schema, row.nodeport]));
}

describe.skipIf(!onCitus)('a worker added to a running cluster (needs Citus: npm run test:citus)', () => {
  const suite = useServerWithOrg({ QUERY_TIMEOUT_MS: '10000' });
  let spare: SpareNode | undefined;
  const tables: TestTable[] = [];

  beforeAll(async () => {
    for (const name of ['North', 'South', 'East', 'West']) {
      tables.push(await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }], { name }));
    }
    spare = await SpareNode.start();
  }, 120_000);
  afterAll(() => spare?.stop());

  it('takes existing databases when the cluster is rebalanced, losing no write made meanwhile', async () => {
    const coordinator = suite.server.database.url;
    const database = new URL(coordinator).pathname.slice(1);
    // The suite's databases are clones of its template, which Citus records as a distributed object, so a joining
    // node must have that database too (a cluster made without a template needs only its own database there).
    for (const name of [inject('templateDatabase'), database]) {
      await on(spare!.url('postgres'), (client) => client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`));
      await on(spare!.url(name), (client) => client.query('CREATE EXTENSION citus'));
    }
    await on(coordinator, (client) => client.query('SELECT citus_add_node($1, $2)', ['127.0.0.1', spare!.port]));

    const acknowledged = new Map<TestTable, string[]>(tables.map((table) => [table, []]));
    let rebalanced = false;
    const failures: string[] = [];
    const writer = async (table: TestTable) => {
      for (let i = 0; !rebalanced || i < 10; i += 1) {
        const response = await createRow(suite.server, suite.org.adminKey, table, { Name: `row ${i}` });
        if (response.status === 201) acknowledged.get(table)!.push(response.body.row.id);
        else if (response.status !== 503) failures.push(`${response.status} ${response.text}`);
      }
    };
    const writers = tables.map(writer);
    try {
      await on(coordinator, async (client) => {
        await client.query(`SELECT citus_rebalance_start(shard_transfer_mode => 'force_logical')`);
        await client.query('SELECT citus_rebalance_wait()');
      });
    } finally {
      rebalanced = true;
    }
    await Promise.all(writers);
    expect(failures).toEqual([]);

    const placed = await placements(coordinator);
    const moved = tables.filter((table) => placed.get(`d_${table.databaseId.toLowerCase()}`) === spare!.port);
    expect(moved.length).toBeGreaterThan(0);
    for (const table of tables) {
      const stored = await on(coordinator, async (client) => {
        const { rows } = await client.query<{ id: string }>(
          `SELECT id FROM d_${table.databaseId.toLowerCase()}.t_${table.tableId.toLowerCase()}`,
        );
        return new Set(rows.map((row) => row.id));
      });
      expect(acknowledged.get(table)!.filter((id) => !stored.has(id))).toEqual([]);
      const listed = await suite.server.request('GET', `${table.path}/rows?limit=1`, { token: suite.org.adminKey });
      expect(listed.status, listed.text).toBe(200);
      expect((await createRow(suite.server, suite.org.adminKey, table, { Name: 'after' })).status).toBe(201);
    }
  }, 180_000);
});
