import { createHash } from 'node:crypto';
import { PassThrough, Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import type pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import {
  CATALOG_PARTS,
  copyHistoryOut,
  copyRowsOut,
  EXACT_TEXT_SETTINGS,
  selectCatalogPart,
  selectConstraintDefinitions,
  selectSequenceState,
} from '../../../data/backup.ts';
import { pgExecutor, type SqlExecutor } from '../../../db/sql.ts';
import type { BackupDestination } from './destination.ts';
import {
  CATALOG_FILE,
  FORMAT,
  FORMAT_VERSION,
  historyFileOf,
  MANIFEST,
  rowsFileOf,
  type CatalogSnapshot,
  type ConstraintDefinition,
  type Manifest,
} from './archive-format.ts';

/**
 * Writes one backup: every object read in ONE repeatable-read transaction, so the catalog and every table are
 * the same instant, however long the copy takes and whatever writers do meanwhile. Each object streams
 * COPY → gzip → sha256 → destination, so memory does not grow with the database.
 */

/** gzip level 1: a backup is bound by the CPU of compression, and the lowest level keeps it ahead of pg_dump -Fc (bench/backups.bench.ts). */
const GZIP_LEVEL = 1;

interface Written {
  path: string;
  bytes: number;
  sha256: string;
  lines: number;
}

/** Counts bytes, newlines (COPY text: one row per line) and the sha256 of what passes through. */
function measure(): { stream: Transform; result: () => { bytes: number; sha256: string } } {
  const hash = createHash('sha256');
  let bytes = 0;
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      bytes += chunk.length;
      done(null, chunk);
    },
  });
  return { stream, result: () => ({ bytes, sha256: hash.digest('hex') }) };
}

function countLines(): { stream: Transform; lines: () => number } {
  let lines = 0;
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      for (let index = chunk.indexOf(10); index !== -1; index = chunk.indexOf(10, index + 1)) lines += 1;
      done(null, chunk);
    },
  });
  return { stream, lines: () => lines };
}

async function writeObject(
  destination: BackupDestination,
  prefix: string,
  path: string,
  source: Readable,
): Promise<Written> {
  const lines = countLines();
  const measured = measure();
  const out = new PassThrough();
  await Promise.all([
    pipeline(source, lines.stream, createGzip({ level: GZIP_LEVEL }), measured.stream, out),
    destination.write(`${prefix}/${path}`, out),
  ]);
  return { path, lines: lines.lines(), ...measured.result() };
}

async function readCatalog(sql: SqlExecutor, databaseId: string): Promise<CatalogSnapshot> {
  const [database] = await sql.query<{ id: string; name: string; version: string }>(
    'SELECT id, name, version::text AS version FROM public.databases WHERE id = $1::bpchar',
    [databaseId],
  );
  if (!database) throw new Error(`The database ${databaseId} does not exist`);
  const parts: CatalogSnapshot['parts'] = {};
  for (const part of CATALOG_PARTS) {
    const statement = selectCatalogPart(part, databaseId);
    const [row] = await sql.query<{ rows: Record<string, unknown>[] }>(statement.sql, statement.params);
    parts[part] = row!.rows;
  }
  const definitions = selectConstraintDefinitions(databaseId);
  const constraints = (
    await sql.query<{ kind: ConstraintDefinition['kind']; table_name: string; name: string; definition: string }>(
      definitions.sql,
      definitions.params,
    )
  ).map((row) => ({ kind: row.kind, tableName: row.table_name, name: row.name, definition: row.definition }));
  const sequences: CatalogSnapshot['sequences'] = [];
  for (const field of parts.fields!.filter((entry) => entry.type === 'autoNumber')) {
    const [state] = await sql.query<{ last_value: string; is_called: boolean }>(
      selectSequenceState(databaseId, String(field.id)).sql,
    );
    sequences.push({
      tableId: String(field.table_id),
      fieldId: String(field.id),
      lastValue: state!.last_value,
      isCalled: state!.is_called,
    });
  }
  return {
    database: { id: database.id.trim(), name: database.name, version: database.version },
    parts,
    constraints,
    sequences,
  };
}

export function fieldIdsOf(snapshot: CatalogSnapshot, tableId: string): string[] {
  return snapshot.parts
    .fields!.filter((field) => field.table_id === tableId)
    .sort((a, b) => Number(a.position) - Number(b.position))
    .map((field) => String(field.id));
}

export interface BackupTarget {
  backupId: string;
  orgId: string;
  databaseId: string;
  prefix: string;
}

export interface WrittenBackup {
  manifest: Manifest;
  manifestSha256: string;
  sizeBytes: number;
  rows: number;
}

/** Writes the whole backup; `beforeTable` runs between tables (a cancel check). */
export async function writeBackup(
  pool: pg.Pool,
  destination: BackupDestination,
  target: BackupTarget,
  beforeTable: () => void,
): Promise<WrittenBackup> {
  const client = await pool.connect();
  try {
    await client.query(['BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY', ...EXACT_TEXT_SETTINGS].join('; '));
    // The snapshot is taken at the first query of the transaction: this one.
    const [{ snapshot_at: snapshotAt }] = (await client.query<{ snapshot_at: Date }>('SELECT now() AS snapshot_at'))
      .rows as [{ snapshot_at: Date }];
    const catalog = await readCatalog(pgExecutor(client), target.databaseId);
    const files: Written[] = [
      await writeObject(
        destination,
        target.prefix,
        CATALOG_FILE,
        Readable.from([Buffer.from(JSON.stringify(catalog))]),
      ),
    ];
    const tables: Manifest['tables'] = [];
    for (const table of catalog.parts.data_tables!) {
      beforeTable();
      const tableId = String(table.id);
      const fieldIds = fieldIdsOf(catalog, tableId);
      const rows = await writeObject(
        destination,
        target.prefix,
        rowsFileOf(tableId),
        client.query(copyTo(copyRowsOut(target.databaseId, tableId, fieldIds))),
      );
      const history = await writeObject(
        destination,
        target.prefix,
        historyFileOf(tableId),
        client.query(copyTo(copyHistoryOut(target.databaseId, tableId))),
      );
      files.push(rows, history);
      tables.push({ id: tableId, name: String(table.name), fieldIds, rows: rows.lines, historyEntries: history.lines });
    }
    await client.query('COMMIT');
    const manifest: Manifest = {
      format: FORMAT,
      formatVersion: FORMAT_VERSION,
      backupId: target.backupId,
      orgId: target.orgId,
      databaseId: target.databaseId,
      databaseName: catalog.database.name,
      snapshotAt: snapshotAt.toISOString(),
      tables,
      files: files.map(({ path, bytes, sha256 }) => ({ path, bytes, sha256 })),
    };
    const manifestBytes = Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`);
    await destination.write(`${target.prefix}/${MANIFEST}`, Readable.from([manifestBytes]));
    return {
      manifest,
      manifestSha256: createHash('sha256').update(manifestBytes).digest('hex'),
      sizeBytes: manifestBytes.length + files.reduce((sum, file) => sum + file.bytes, 0),
      rows: tables.reduce((sum, table) => sum + table.rows, 0),
    };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
