import { cpSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { ensureDatabase } from '../src/db/database.ts';
import { migrate, MIGRATIONS_DIR } from '../src/db/migrate.ts';
import { newId } from '../src/kernel/ids.ts';

/**
 * The migration that moved each database's change feed into its own schema (issue 27/29): a database that had a
 * feed in the shared tables keeps every retained change with its position and sequence number (so cursors and
 * webhook positions handed out before stay valid), its retention watermark, and a head that follows them.
 */
const BEFORE = '20261125230000_webhooks';
const name = `wds_test_${newId().toLowerCase()}`;
let url: string;
let client: pg.Client;
const databaseId = newId();
const schema = `d_${databaseId.toLowerCase()}`;

beforeAll(async () => {
  url = await ensureDatabase(inject('serverUrl'), name);
  const earlier = mkdtempSync(path.join(tmpdir(), 'wds-migrations-'));
  for (const entry of readdirSync(MIGRATIONS_DIR).filter((entry) => entry <= BEFORE || entry.endsWith('.toml')))
    cpSync(path.join(MIGRATIONS_DIR, entry), path.join(earlier, entry), { recursive: true });
  await migrate(url, earlier);
  client = new pg.Client({ connectionString: url });
  await client.connect();
  const orgId = newId();
  await client.query(`INSERT INTO orgs (id, name) VALUES ($1, 'Org')`, [orgId]);
  await client.query(`INSERT INTO databases (id, org_id, name, updated_at) VALUES ($1, $2, 'Db', now())`, [
    databaseId,
    orgId,
  ]);
  await client.query(`CREATE SCHEMA ${schema}`);
  // Two committed transactions of the shared feed (its COMMIT trigger numbers them 1 and 2), three changes.
  for (const [txid, seqs] of [
    ['100', [41, 42]],
    ['200', [57]],
  ] as const) {
    await client.query('BEGIN');
    await client.query(`INSERT INTO change_commits (database_id, txid) VALUES ($1, $2)`, [databaseId, txid]);
    for (const seq of seqs)
      await client.query(
        `INSERT INTO changes (database_id, txid, seq, kind, table_id, mutation_id, actor_id, actor_kind)
         VALUES ($1, $2, $3, 'table.created', $1, $1, $1, 'user')`,
        [databaseId, txid, seq],
      );
    await client.query('COMMIT');
  }
  await client.query(`INSERT INTO change_feeds (database_id, pruned_position, pruned_seq) VALUES ($1, 0, 5)`, [
    databaseId,
  ]);
  await migrate(url);
});

afterAll(async () => {
  await client.end();
  const admin = new pg.Client({ connectionString: inject('serverUrl') });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
  await admin.end();
});

describe('moving the shared change feed into each database’s schema', () => {
  it('keeps every change with its position and sequence number', async () => {
    const { rows } = await client.query(
      `SELECT cc.position::int AS position, c.seq::int AS seq FROM ${schema}.change_commits cc
         JOIN ${schema}.changes c USING (txid) ORDER BY 1, 2`,
    );
    expect(rows).toEqual([
      { position: 1, seq: 41 },
      { position: 1, seq: 42 },
      { position: 2, seq: 57 },
    ]);
  });

  it('keeps the retention watermark, sets the head to the last change and starts armed', async () => {
    const { rows } = await client.query(
      `SELECT head_position::int AS "headPosition", head_seq::int AS "headSeq", pruned_position::int AS "prunedPosition",
              pruned_seq::int AS "prunedSeq", a.armed FROM ${schema}.change_feed, ${schema}.change_arm a`,
    );
    expect(rows).toEqual([{ headPosition: 2, headSeq: 57, prunedPosition: 0, prunedSeq: 5, armed: true }]);
  });

  it('numbers new changes after the moved ones and drops the shared tables', async () => {
    const { rows } = await client.query(
      `SELECT nextval('${schema}.change_seq')::int AS next, to_regclass('public.changes') AS shared`,
    );
    expect(rows).toEqual([{ next: 58, shared: null }]);
  });

  it('keeps the recording functions out of JIT (compiling the row trigger’s statement cost seconds per batch)', async () => {
    const { rows } = await client.query(
      `SELECT proname AS name, proconfig AS config FROM pg_proc
        WHERE proname IN ('wds_record_row_changes', 'wds_record_table_changes', 'wds_changes_committed') ORDER BY 1`,
    );
    expect(rows).toEqual([
      { name: 'wds_changes_committed', config: ['jit=off'] },
      { name: 'wds_record_row_changes', config: ['jit=off'] },
      { name: 'wds_record_table_changes', config: ['jit=off'] },
    ]);
  });
});
