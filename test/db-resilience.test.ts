import pg from 'pg';
import { describe, expect, it, vi } from 'vitest';
import { sqlPoolOf } from '../src/db/prisma.ts';
import { startTestServer } from './helpers/server.ts';
import { useServerWithOrg } from './helpers/suite.ts';

/**
 * PostgreSQL ends idle connections on its own: a restart, a failover, `idle_session_timeout`, an operator's
 * `pg_terminate_backend`. The service must lose only those connections, never the process.
 */
const suite = useServerWithOrg();

async function terminateIdleConnections(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ terminated: number }>(`SELECT count(*)::int AS terminated FROM (
      SELECT pg_terminate_backend(pid) FROM pg_stat_activity
       WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle') ended`);
    return rows[0]!.terminated;
  } finally {
    await client.end();
  }
}

describe('connections PostgreSQL ends', () => {
  it('keeps answering after PostgreSQL terminates every idle connection of the service', async () => {
    const token = suite.org.adminKey;
    const read = () => suite.server.request('GET', '/v1/me/preferences', { token });
    // Parallel requests leave several idle connections in the request pool.
    expect((await Promise.all(Array.from({ length: 4 }, read))).map((response) => response.status)).toEqual([
      200, 200, 200, 200,
    ]);
    const pool = sqlPoolOf(suite.server.prisma);
    expect(pool.idleCount).toBeGreaterThan(0);
    expect(await terminateIdleConnections(suite.server.database.url)).toBeGreaterThan(0);
    // The pool drops each connection as its termination arrives; the process must still be here to serve.
    await vi.waitFor(() => expect(pool.idleCount).toBe(0), { timeout: 10_000, interval: 20 });
    expect((await Promise.all(Array.from({ length: 4 }, read))).map((response) => response.status)).toEqual([
      200, 200, 200, 200,
    ]);
  });

  it('survives it before the first Prisma query too, when only the hot paths have used the pool', async () => {
    // Prisma's adapter listens for pool errors only once it has connected; the credential and row paths use the
    // pool directly, so a process can hold idle connections before that.
    const fresh = await startTestServer({ RUN_WORKER: 'false' });
    try {
      const pool = sqlPoolOf(fresh.prisma);
      await Promise.all(Array.from({ length: 3 }, () => pool.query('SELECT pg_sleep(0.05)')));
      expect(pool.idleCount).toBeGreaterThan(0);
      expect(await terminateIdleConnections(fresh.database.url)).toBeGreaterThan(0);
      await vi.waitFor(() => expect(pool.idleCount).toBe(0), { timeout: 10_000, interval: 20 });
      expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await fresh.close();
    }
  });
});

/** Runs `sql` on the server's maintenance database (`postgres`), outside the database under test. */
async function onMaintenanceDatabase(url: string, sql: string): Promise<void> {
  const maintenance = new URL(url);
  maintenance.pathname = '/postgres';
  const client = new pg.Client({ connectionString: maintenance.toString() });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

describe('a database that refuses connections', () => {
  it('answers 503 DEPENDENCY_UNAVAILABLE with Retry-After on REST, /graphql and /readyz, then recovers', async () => {
    const { url, name } = suite.server.database;
    const token = suite.org.adminKey;
    // As during a restore or maintenance: new sessions get FATAL 55000 "not currently accepting connections".
    await onMaintenanceDatabase(url, `ALTER DATABASE "${name}" ALLOW_CONNECTIONS false`);
    try {
      await onMaintenanceDatabase(
        url,
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}' AND pid <> pg_backend_pid()`,
      );
      await vi.waitFor(() => expect(sqlPoolOf(suite.server.prisma).totalCount).toBe(0), { timeout: 10_000 });
      const rest = await suite.server.request('GET', '/v1/me/preferences', { token });
      expect(rest.status).toBe(503);
      expect(rest.headers.get('retry-after')).toBe('2');
      expect(rest.body).toEqual({
        error: {
          code: 'DEPENDENCY_UNAVAILABLE',
          message: 'The database is unavailable; retry shortly.',
          requestId: expect.any(String),
          details: { dependency: 'database' },
        },
      });
      // /graphql meets the outage while its credential is resolved, before the operation: the same envelope.
      const graph = await suite.server.graphql('{ me { id } }', {}, { token });
      expect([graph.status, graph.headers.get('retry-after'), graph.body.error.code]).toEqual([
        503,
        '2',
        'DEPENDENCY_UNAVAILABLE',
      ]);
      const ready = await suite.server.request('GET', '/readyz');
      expect(ready.status).toBe(503);
      expect(ready.headers.get('retry-after')).toBe('2');
      expect(ready.body).toEqual({ status: 'unavailable', checks: { database: 'unreachable' } });
    } finally {
      await onMaintenanceDatabase(url, `ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`);
    }
    expect((await suite.server.request('GET', '/v1/me/preferences', { token })).status).toBe(200);
    expect((await suite.server.request('GET', '/readyz')).status).toBe(200);
  });
});
