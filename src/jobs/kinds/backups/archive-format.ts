import { z } from 'zod';

/**
 * The backup format, version 1 (docs/backup-format.md). A backup is a set of objects under one prefix:
 * `catalog.json.gz`, `tables/<tableId>/rows.copy.gz`, `tables/<tableId>/history.copy.gz`, and `manifest.json`,
 * written last, which lists every other object with its size and sha256. The catalog keeps the manifest's own
 * sha256, so a backup is verified from the catalog down to the last byte.
 */
export const FORMAT = 'wds-backup';
export const FORMAT_VERSION = 1;
export const MANIFEST = 'manifest.json';
export const CATALOG_FILE = 'catalog.json.gz';

export const rowsFileOf = (tableId: string) => `tables/${tableId}/rows.copy.gz`;
export const historyFileOf = (tableId: string) => `tables/${tableId}/history.copy.gz`;

/** Where a backup's objects live, relative to the destination's root. */
export const locationOf = (orgId: string, databaseId: string, backupId: string) => `${orgId}/${databaseId}/${backupId}`;

export const ManifestFile = z.strictObject({
  path: z.string(),
  bytes: z.number().int().min(0),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});

export const ManifestTable = z.strictObject({
  id: z.string(),
  name: z.string(),
  /** Field ids in the order of the rows file's columns after id, version, created_at, updated_at. */
  fieldIds: z.array(z.string()),
  rows: z.number().int().min(0),
  historyEntries: z.number().int().min(0),
});

export const Manifest = z.strictObject({
  format: z.literal(FORMAT),
  formatVersion: z.literal(FORMAT_VERSION),
  backupId: z.string(),
  orgId: z.string(),
  databaseId: z.string(),
  databaseName: z.string(),
  /** The instant of the snapshot (the start of its repeatable-read transaction). */
  snapshotAt: z.string(),
  tables: z.array(ManifestTable),
  files: z.array(ManifestFile),
});
export type Manifest = z.infer<typeof Manifest>;

/**
 * What enforces a rule, as PostgreSQL printed it: a hashed rule's key type, lock function (pg_get_functiondef) and
 * trigger (pg_get_triggerdef); a unique index (pg_get_indexdef); an exclusion constraint or a foreign key
 * (pg_get_constraintdef, added with ALTER TABLE … ADD CONSTRAINT name).
 */
export interface ConstraintDefinition {
  kind: 'keyType' | 'keyLock' | 'keyTrigger' | 'index' | 'exclusion' | 'foreignKey';
  tableName: string;
  name: string;
  definition: string;
}

/** The catalog part of a backup: the database and its whole catalog rows, as `to_jsonb` wrote them. */
export interface CatalogSnapshot {
  database: { id: string; name: string; version: string };
  parts: Record<string, Record<string, unknown>[]>;
  constraints: ConstraintDefinition[];
  sequences: { tableId: string; fieldId: string; lastValue: string; isCalled: boolean }[];
}
