import pg from 'pg';

/**
 * The suite on a Citus cluster (`npm run test:citus`, docs/decisions/citus.md). TEST_DATABASE_URL names the
 * coordinator and TEST_CITUS_WORKERS its workers (`host:port,host:port`). Citus does not propagate CREATE DATABASE,
 * so every database the suite makes (the template and each file's clone) is made on every node under the same
 * name, and the coordinator's copy registers the workers.
 */
export function citusWorkers(): string[] {
  const list = process.env.TEST_CITUS_WORKERS ?? '';
  return list
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
}

/** The server URL of each worker, on the coordinator's user and maintenance database. */
export function workerServerUrls(coordinatorUrl: string, workers: readonly string[]): string[] {
  return workers.map((worker) => {
    const url = new URL(coordinatorUrl);
    const [host, port] = worker.split(':');
    url.hostname = host ?? '127.0.0.1';
    url.port = port ?? '5432';
    return url.toString();
  });
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

function databaseUrl(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * A database with the citus extension on every node, the workers registered on the coordinator's copy. Returns
 * the coordinator's URL of it.
 */
export async function createCitusDatabase(coordinatorUrl: string, workers: readonly string[], name: string) {
  const nodes = [coordinatorUrl, ...workerServerUrls(coordinatorUrl, workers)];
  for (const node of nodes) {
    await on(node, (client) => client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`));
    await on(databaseUrl(node, name), (client) => client.query('CREATE EXTENSION IF NOT EXISTS citus'));
  }
  const coordinator = new URL(coordinatorUrl);
  const url = databaseUrl(coordinatorUrl, name);
  await on(url, async (client) => {
    await client.query('SELECT citus_set_coordinator_host($1, $2)', [coordinator.hostname, Number(coordinator.port)]);
    for (const worker of workers) {
      const [host, port] = worker.split(':');
      await client.query('SELECT citus_add_node($1, $2)', [host, Number(port)]);
    }
  });
  return url;
}

/**
 * Makes `name` a template on every node: Citus' maintenance daemon keeps a session open in each database with the
 * extension, and CREATE DATABASE … TEMPLATE refuses a source with sessions, so connections are turned off first.
 */
export async function freezeTemplate(nodes: readonly string[], name: string): Promise<void> {
  for (const node of nodes) {
    await on(node, async (client) => {
      await client.query(`ALTER DATABASE ${pg.escapeIdentifier(name)} ALLOW_CONNECTIONS false`);
      await client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
    });
  }
}

export async function dropOnNodes(nodes: readonly string[], name: string): Promise<void> {
  for (const node of nodes) {
    await on(node, (client) => client.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`));
  }
}

export async function cloneOnNodes(nodes: readonly string[], template: string, name: string): Promise<void> {
  for (const node of nodes) {
    await on(node, (client) =>
      client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)} TEMPLATE ${pg.escapeIdentifier(template)}`),
    );
  }
}
