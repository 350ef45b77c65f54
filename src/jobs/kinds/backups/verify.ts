import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { gunzipSync } from 'node:zlib';
import type { SqlExecutor } from '../../../db/sql.ts';
import { DomainError } from '../../../kernel/errors.ts';
import type { BackupDestination } from './destination.ts';
import { CATALOG_FILE, Manifest, MANIFEST, type CatalogSnapshot } from './archive-format.ts';

/**
 * Verifies a backup before anything reads it for a restore: the manifest's sha256 against the catalog, every
 * object's size and sha256 against the manifest. A missing, truncated or altered object is ARTIFACT_UNVERIFIED; a
 * backup past its expiry (or pruned) is ARTIFACT_EXPIRED. Nothing is changed before this has passed.
 */

export interface BackupRow {
  id: string;
  org_id: string;
  database_id: string;
  location: string;
  sha256: string;
  expired: boolean;
  pruned: boolean;
}

export async function loadBackupRow(sql: SqlExecutor, backupId: string): Promise<BackupRow> {
  const [row] = await sql.query<BackupRow>(
    `SELECT id, org_id, database_id, location, sha256, expires_at IS NOT NULL AND expires_at <= now() AS expired, pruned_at IS NOT NULL AS pruned
       FROM public.backups WHERE id = $1::bpchar`,
    [backupId],
  );
  if (!row) throw new DomainError('RESOURCE_NOT_FOUND', 'The backup does not exist.');
  return { ...row, id: row.id.trim(), org_id: row.org_id.trim(), database_id: row.database_id.trim() };
}

function unverified(message: string, details: Record<string, unknown>): DomainError {
  return new DomainError('ARTIFACT_UNVERIFIED', message, { details });
}

async function digestOf(stream: Readable): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of stream) {
    hash.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { bytes, sha256: hash.digest('hex') };
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export interface VerifiedBackup {
  row: BackupRow;
  manifest: Manifest;
  catalog: CatalogSnapshot;
}

async function readManifest(destination: BackupDestination, row: BackupRow): Promise<Manifest> {
  const stream = await destination.read(`${row.location}/${MANIFEST}`);
  if (!stream) throw unverified('The backup’s manifest is missing.', { backupId: row.id, path: MANIFEST });
  const bytes = await readAll(stream);
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  if (sha256 !== row.sha256)
    throw unverified('The backup’s manifest does not match its recorded sha256.', {
      backupId: row.id,
      path: MANIFEST,
      expected: row.sha256,
      actual: sha256,
    });
  const parsed = Manifest.safeParse(JSON.parse(bytes.toString('utf8')));
  if (!parsed.success)
    throw unverified('The backup’s manifest is not a format this service reads.', { backupId: row.id, path: MANIFEST });
  return parsed.data;
}

/** Reads a gzip object whose digest was verified, and checks it again while reading (it could change between). */
export async function readVerifiedCatalog(
  destination: BackupDestination,
  row: BackupRow,
  manifest: Manifest,
): Promise<CatalogSnapshot> {
  const expected = manifest.files.find((file) => file.path === CATALOG_FILE);
  const stream = await destination.read(`${row.location}/${CATALOG_FILE}`);
  if (!expected || !stream)
    throw unverified('The backup’s catalog is missing.', { backupId: row.id, path: CATALOG_FILE });
  const bytes = await readAll(stream);
  if (createHash('sha256').update(bytes).digest('hex') !== expected.sha256) {
    throw unverified('The backup’s catalog does not match its sha256.', { backupId: row.id, path: CATALOG_FILE });
  }
  // The catalog part is small (definitions only, no rows), so it is read whole.
  return JSON.parse(gunzipSync(bytes).toString('utf8')) as CatalogSnapshot;
}

export async function verifyBackup(
  sql: SqlExecutor,
  destination: BackupDestination,
  backupId: string,
): Promise<VerifiedBackup> {
  const row = await loadBackupRow(sql, backupId);
  if (row.expired || row.pruned) {
    throw new DomainError('ARTIFACT_EXPIRED', 'The backup has expired and its files were or will be removed.', {
      details: { backupId },
    });
  }
  const manifest = await readManifest(destination, row);
  for (const file of manifest.files) {
    const stream = await destination.read(`${row.location}/${file.path}`);
    if (!stream) throw unverified(`The backup object ${file.path} is missing.`, { backupId, path: file.path });
    const actual = await digestOf(stream);
    if (actual.bytes !== file.bytes || actual.sha256 !== file.sha256) {
      throw unverified(
        `The backup object ${file.path} does not match its manifest (${actual.bytes} of ${file.bytes} bytes).`,
        {
          backupId,
          path: file.path,
          expectedBytes: file.bytes,
          actualBytes: actual.bytes,
        },
      );
    }
  }
  return { row, manifest, catalog: await readVerifiedCatalog(destination, row, manifest) };
}
