import { z } from 'zod';
import { pgExecutor, type SqlExecutor } from '../../../db/sql.ts';
import { PreviewDatabaseRestoreResult } from './results.ts';
import type { JobHandler } from '../../engine/handler.ts';
import { succeededEvent } from '../../engine/handler.ts';
import { destinationOf } from './destination.ts';
import { verifyBackup, type VerifiedBackup } from './verify.ts';

/**
 * previewDatabaseRestore: verifies every checksum (ARTIFACT_UNVERIFIED / ARTIFACT_EXPIRED otherwise) and reports
 * what restoring the backup over the database would change: tables added, removed and altered, row counts before
 * and after. It reads and changes nothing else, so a rerun after a crash simply starts again.
 */
export const PreviewRestorePayload = z.strictObject({ backupId: z.string() });
type PreviewRestorePayload = z.infer<typeof PreviewRestorePayload>;

interface TableFacts {
  id: string;
  name: string;
  schemaVersion: number;
  rows: number;
  shape: string;
}

/** What a table's definition is, in a form two definitions can be compared by: fields, rules and keys. */
function shapeOf(
  fields: Record<string, unknown>[],
  rules: Record<string, unknown>[],
  keys: Record<string, unknown>[],
  tableId: string,
): string {
  const of = (rows: Record<string, unknown>[], columns: string[]) =>
    rows
      .filter((row) => String(row.table_id).trim() === tableId)
      .map((row) => columns.map((column) => JSON.stringify(row[column] ?? null)).join('|'))
      .sort();
  return JSON.stringify([
    of(fields, ['id', 'name', 'type', 'required', 'options', 'position']),
    of(rules, ['id', 'field_ids', 'where']),
    of(keys, ['id', 'field_ids', 'referenced_table_id', 'referenced_rule_id']),
  ]);
}

async function currentTables(sql: SqlExecutor, databaseId: string): Promise<TableFacts[]> {
  const read = async (part: string, filter: string) =>
    (
      await sql.query<{ rows: Record<string, unknown>[] }>(
        `SELECT coalesce(jsonb_agg(to_jsonb(x)), '[]'::jsonb) AS rows FROM public.${part} x WHERE ${filter}`,
        [databaseId],
      )
    )[0]!.rows;
  const inDatabase = 'x.table_id IN (SELECT id FROM public.data_tables WHERE database_id = $1::bpchar)';
  const [tables, fields, rules, keys] = await Promise.all([
    read('data_tables', 'x.database_id = $1::bpchar'),
    read('fields', inDatabase),
    read('unique_rules', inDatabase),
    read('foreign_keys', inDatabase),
  ]);
  return tables.map((table) => ({
    id: String(table.id).trim(),
    name: String(table.name),
    schemaVersion: Number(table.schema_version),
    rows: Number(table.row_count),
    shape: shapeOf(fields, rules, keys, String(table.id).trim()),
  }));
}

function snapshotTables(verified: VerifiedBackup): TableFacts[] {
  const { parts } = verified.catalog;
  const rows = new Map(verified.manifest.tables.map((table) => [table.id, table.rows]));
  return (parts.data_tables ?? []).map((table) => ({
    id: String(table.id).trim(),
    name: String(table.name),
    schemaVersion: Number(table.schema_version),
    rows: rows.get(String(table.id)) ?? 0,
    shape: shapeOf(parts.fields ?? [], parts.unique_rules ?? [], parts.foreign_keys ?? [], String(table.id).trim()),
  }));
}

export function restoreDifference(before: TableFacts[], after: TableFacts[]) {
  const now = new Map(before.map((table) => [table.id, table]));
  const then = new Map(after.map((table) => [table.id, table]));
  const brief = (table: TableFacts) => ({ id: table.id, name: table.name });
  return {
    tablesAdded: after.filter((table) => !now.has(table.id)).map(brief),
    tablesRemoved: before.filter((table) => !then.has(table.id)).map(brief),
    tablesAltered: after
      .filter((table) => {
        const current = now.get(table.id);
        return (
          current !== undefined &&
          (current.shape !== table.shape ||
            current.name !== table.name ||
            current.schemaVersion !== table.schemaVersion)
        );
      })
      .map((table) => ({
        ...brief(table),
        schemaVersionBefore: now.get(table.id)!.schemaVersion,
        schemaVersionAfter: table.schemaVersion,
      })),
    rowCounts: [...new Set([...now.keys(), ...then.keys()])].map((id) => ({
      tableId: id,
      name: (then.get(id) ?? now.get(id))!.name,
      before: now.get(id)?.rows ?? 0,
      after: then.get(id)?.rows ?? 0,
    })),
  };
}

export const previewDatabaseRestore: JobHandler<
  PreviewRestorePayload,
  Record<string, never>,
  PreviewDatabaseRestoreResult
> = {
  kind: 'previewDatabaseRestore',
  payload: PreviewRestorePayload,
  result: PreviewDatabaseRestoreResult,
  successEvent: () => succeededEvent('previewDatabaseRestore'),
  describe: (payload) => `Restore preview of backup ${payload.backupId}`,
  async run(run) {
    const sql = pgExecutor(run.pool);
    const verified = await verifyBackup(sql, destinationOf(run.config, run.signal), run.payload.backupId);
    const difference = restoreDifference(await currentTables(sql, run.job.databaseId!), snapshotTables(verified));
    const result: PreviewDatabaseRestoreResult = {
      backupId: run.payload.backupId,
      verified: true,
      snapshotAt: verified.manifest.snapshotAt,
      formatVersion: verified.manifest.formatVersion,
      files: verified.manifest.files.length,
      ...difference,
    };
    return { state: 'succeeded', result, summary: `Restore preview of ${verified.catalog.database.name}` };
  },
};
