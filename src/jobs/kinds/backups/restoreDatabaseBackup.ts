import { z } from 'zod';
import {
  CATALOG_PARTS,
  deleteCatalogParts,
  dropSchemaIfExists,
  insertCatalogPart,
  lockTables,
  moveChangeFeed,
  renameSchema,
} from '../../../data/backup.ts';
import { rowsTableOf } from '../../../data/identifiers.ts';
import { pgExecutor, type SqlExecutor } from '../../../db/sql.ts';
import { DomainError } from '../../../kernel/errors.ts';
import { newId } from '../../../kernel/ids.ts';
import { RestoreDatabaseBackupResult } from './results.ts';
import type { JobHandler, JobOutcome, JobRun } from '../../engine/handler.ts';
import { destinationOf } from './destination.ts';
import { freshIds, identityMap, mapped, remapJson, type IdMap } from './remap.ts';
import { buildStaging } from './restore-build.ts';
import { verifyBackup, type VerifiedBackup } from './verify.ts';

/**
 * restoreDatabaseBackup (event `database.restore`): verify every checksum, build the content in a staging schema,
 * then one transaction — the step that also records the checkpoint — swaps it in:
 * - `replace`: locks the database's tables (statements in flight finish first, new ones wait), renames the live
 *   schema away and the staging schema into its place, and rewrites the database's catalog rows. Readers see the
 *   old content or the new, never a mix; the old schema is dropped after the commit.
 * - `new-database`: a new database beside the original, with new ids for everything the catalog names.
 * A worker killed before the swap leaves a staging schema no catalog row points at; the rerun drops and rebuilds it.
 */
export const RestorePayload = z.strictObject({
  backupId: z.string(),
  target: z.enum(['new-database', 'replace']),
  expectedVersion: z.string().nullable().optional(),
  name: z.string().nullable().optional(),
});
type RestorePayload = z.infer<typeof RestorePayload>;

type Journal =
  | { phase: 'started'; stagingId: string; retiredId: string; newDatabaseId: string | null }
  | {
      phase: 'swapped';
      stagingId: string;
      retiredId: string;
      newDatabaseId: string | null;
      outcome: JobOutcome<RestoreDatabaseBackupResult>;
    };

function restoreName(verified: VerifiedBackup, payload: RestorePayload): string {
  if (payload.name) return payload.name;
  const stamp = verified.manifest.snapshotAt.slice(0, 16).replace('T', ' ');
  return `${verified.catalog.database.name.slice(0, 90)} (restored ${stamp})`;
}

async function insertCatalog(sql: SqlExecutor, verified: VerifiedBackup, ids: IdMap): Promise<void> {
  for (const part of CATALOG_PARTS) {
    const statement = insertCatalogPart(part, remapJson(JSON.stringify(verified.catalog.parts[part] ?? []), ids));
    await sql.run(statement);
  }
}

async function swapReplace(
  sql: SqlExecutor,
  run: JobRun<RestorePayload, Journal>,
  verified: VerifiedBackup,
  journal: Journal,
): Promise<string> {
  const databaseId = run.job.databaseId!;
  const [database] = await sql.query<{ version: string }>(
    'SELECT version::text AS version FROM public.databases WHERE id = $1::bpchar AND org_id = $2::bpchar FOR UPDATE',
    [databaseId, run.job.orgId],
  );
  if (!database) throw new DomainError('RESOURCE_NOT_FOUND', 'The database no longer exists.');
  if (run.payload.expectedVersion !== database.version) {
    throw new DomainError(
      'ROW_VERSION_CONFLICT',
      `The database is at version ${database.version}, not ${run.payload.expectedVersion}; nothing was restored.`,
      {
        details: { currentVersion: database.version },
      },
    );
  }
  const current = await sql.query<{ id: string }>('SELECT id FROM public.data_tables WHERE database_id = $1::bpchar', [
    databaseId,
  ]);
  // A table whose physical table is gone (purged from the trash) has nothing to lock.
  const present = await sql.query<{ id: string }>(
    'SELECT u.id FROM unnest($1::text[], $2::text[]) AS u(id, name) WHERE to_regclass(u.name) IS NOT NULL',
    [current.map((row) => row.id.trim()), current.map((row) => rowsTableOf(databaseId, row.id.trim()))],
  );
  const lock = lockTables(
    databaseId,
    present.map((row) => row.id),
  );
  if (lock) await sql.query(lock.sql);
  // The feed moves before the renames: on Citus a schema renamed earlier in the transaction is not yet known by that
  // name on every worker that the move's DDL reaches ("schema … does not exist"), docs/decisions/citus.md.
  for (const statement of moveChangeFeed(databaseId, journal.stagingId)) await sql.run(statement);
  await sql.query(renameSchema(databaseId, journal.retiredId).sql);
  await sql.query(renameSchema(journal.stagingId, databaseId).sql);
  const live = await sql.query<{ versions: string }>(
    `SELECT coalesce(jsonb_object_agg(id, jsonb_build_array(schema_version, index_version)), '{}')::text AS versions
       FROM public.data_tables WHERE database_id = $1::bpchar`,
    [databaseId],
  );
  for (const statement of deleteCatalogParts(databaseId)) await sql.run(statement);
  await insertCatalog(sql, verified, identityMap());
  // A restored table's schema (and index) version moves past both the snapshot's and the live one. Reissuing a
  // number the table already had would let a client's expectedSchemaVersion, or a process's cached definition,
  // from after the backup match a different schema once the table changes again.
  // Views checked against the snapshot's version are just as valid at the new one.
  await sql.query(
    `WITH bumped AS (
       UPDATE public.data_tables d
          SET schema_version = greatest(d.schema_version, coalesce((l.versions -> d.id::text ->> 0)::int, 0)) + 1,
              index_version = greatest(d.index_version, coalesce((l.versions -> d.id::text ->> 1)::int, 0)) + 1
         FROM (SELECT $2::jsonb AS versions) l, public.data_tables snapshot
        WHERE d.database_id = $1::bpchar AND snapshot.id = d.id
        RETURNING d.id, d.schema_version, snapshot.schema_version AS snapshot_version)
     UPDATE public.saved_views v SET schema_version = b.schema_version
       FROM bumped b WHERE v.table_id = b.id AND v.schema_version = b.snapshot_version`,
    [databaseId, live[0]!.versions],
  );
  await sql.query('UPDATE public.databases SET version = version + 1, updated_at = now() WHERE id = $1::bpchar', [
    databaseId,
  ]);
  return databaseId;
}

async function swapNewDatabase(
  sql: SqlExecutor,
  run: JobRun<RestorePayload, Journal>,
  verified: VerifiedBackup,
  journal: Journal,
  ids: IdMap,
): Promise<string> {
  const newDatabaseId = journal.newDatabaseId!;
  const name = restoreName(verified, run.payload);
  const inserted = await sql.query<{ id: string }>(
    `INSERT INTO public.databases (id, org_id, name, updated_at) VALUES ($1::bpchar, $2::bpchar, $3, now()) ON CONFLICT DO NOTHING RETURNING id`,
    [newDatabaseId, run.job.orgId, name],
  );
  if (inserted.length === 0) {
    throw new DomainError('UNIQUE_CONFLICT', `A database named "${name}" already exists; restore with another name.`, {
      details: { resource: 'database', fields: ['name'], name },
    });
  }
  await sql.query(renameSchema(journal.stagingId, newDatabaseId).sql);
  await insertCatalog(sql, verified, ids);
  return newDatabaseId;
}

export const restoreDatabaseBackup: JobHandler<RestorePayload, Journal, RestoreDatabaseBackupResult> = {
  kind: 'restoreDatabaseBackup',
  payload: RestorePayload,
  result: RestoreDatabaseBackupResult,
  successEvent: () => 'database.restore',
  describe: (payload) => `Restore of backup ${payload.backupId} (${payload.target})`,
  async run(run) {
    const destination = destinationOf(run.config, run.signal);
    if (run.journal.phase === undefined) {
      await run.step(async () => ({
        journal: {
          phase: 'started',
          stagingId: newId(),
          retiredId: newId(),
          newDatabaseId: run.payload.target === 'new-database' ? newId() : null,
        },
        progress: { done: 0, total: null },
      }));
    }
    if (run.journal.phase === 'started') {
      const journal = run.journal as Journal;
      const verified = await verifyBackup(pgExecutor(run.pool), destination, run.payload.backupId);
      const ids = journal.newDatabaseId ? freshIds(verified.catalog, journal.newDatabaseId) : identityMap();
      await buildStaging(run.pool, destination, verified, journal.stagingId, ids, () => run.throwIfCancelled());
      const rows = verified.manifest.tables.reduce((sum, table) => sum + table.rows, 0);
      await run.step(async (sql) => {
        const databaseId =
          run.payload.target === 'replace'
            ? await swapReplace(sql, run, verified, journal)
            : await swapNewDatabase(sql, run, verified, journal, ids);
        const result: RestoreDatabaseBackupResult = {
          backupId: run.payload.backupId,
          target: run.payload.target,
          databaseId,
          tables: verified.manifest.tables.length,
          rows,
          tableIds: verified.manifest.tables.map((table) => ({ from: table.id, to: mapped(ids, table.id) })),
        };
        const outcome: JobOutcome<RestoreDatabaseBackupResult> = {
          state: 'succeeded',
          result,
          summary: `Restore of ${verified.catalog.database.name}`,
          affectedRows: rows,
        };
        return { journal: { ...journal, phase: 'swapped', outcome }, progress: { done: rows, total: rows } };
      });
    }
    const journal = run.journal as Extract<Journal, { phase: 'swapped' }>;
    await pgExecutor(run.pool).query(dropSchemaIfExists(journal.retiredId).sql);
    return journal.outcome;
  },
  async discard(run) {
    const journal = run.journal as Partial<Journal>;
    if (journal.phase === 'started' && journal.stagingId)
      await pgExecutor(run.pool).query(dropSchemaIfExists(journal.stagingId).sql);
  },
};
