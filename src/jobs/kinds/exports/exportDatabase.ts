import { PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ZipFile } from 'yazl';
import { z } from 'zod';
import { csvCopy, FORMULA_PREFIX, jsonlCopy, MULTI_SELECT_SEPARATOR, type CopyPlan } from '../../../data/exports.ts';
import { DomainError } from '../../../kernel/errors.ts';
import { ExportDatabaseResult } from './results.ts';
import type { JobHandler } from '../../engine/handler.ts';
import { succeededEvent } from '../../engine/handler.ts';
import { readDatabase, type ExportedDatabase, type ExportedTable } from './catalog.ts';
import { csvStream, jsonlStream } from './file-formats.ts';
import { discardExport, runExport, type ExportJournal, type ExportProgress } from './run.ts';
import type { ChunkSink } from './sink.ts';
import type { Snapshot } from './snapshot.ts';

/**
 * Export of a whole database to one ZIP archive: `schema.json` (tables, fields with options, unique rules, foreign
 * keys, saved views; format documented in docs/decisions/exports.md) and one CSV or JSONL file per table, every table read in the same
 * snapshot so that foreign keys hold between the files.
 */
export const ExportDatabasePayload = z.object({
  orgId: z.string(),
  databaseId: z.string(),
  format: z.enum(['csv', 'jsonl']),
  fileName: z.string(),
  /** The user whose personal views the archive includes besides the shared ones; null or absent: shared only. */
  viewsOf: z.string().nullable().optional(),
  /** CSV: prefix text cells that a spreadsheet would run as formulas (absent in jobs queued before the option). */
  escapeFormulas: z.boolean().default(true),
});
export type ExportDatabasePayload = z.infer<typeof ExportDatabasePayload>;

/** Bumped when schema.json changes incompatibly. */
export const ARCHIVE_FORMAT_VERSION = 1;

function planOf(payload: ExportDatabasePayload, table: ExportedTable): CopyPlan {
  const query = {
    databaseId: payload.databaseId,
    tableId: table.id,
    fields: table.fields,
    columns: table.fields,
    where: null,
    keys: [],
  };
  return payload.format === 'csv' ? csvCopy(query, payload.escapeFormulas) : jsonlCopy(query, false);
}

const fileOf = (payload: ExportDatabasePayload, table: ExportedTable) => `tables/${table.id}.${payload.format}`;

function schemaDocument(
  payload: ExportDatabasePayload,
  database: ExportedDatabase,
  counts: number[],
  snapshotAt: string,
) {
  return {
    formatVersion: ARCHIVE_FORMAT_VERSION,
    snapshotAt,
    format: payload.format,
    multiSelectSeparator: MULTI_SELECT_SEPARATOR,
    ...(payload.format === 'csv' ? { formulaPrefix: payload.escapeFormulas ? FORMULA_PREFIX : null } : {}),
    database: { id: payload.databaseId, name: database.name },
    tables: database.tables.map((table, index) => ({
      id: table.id,
      name: table.name,
      schemaVersion: table.schemaVersion,
      file: fileOf(payload, table),
      rows: counts[index]!,
      fields: table.fields.map(({ id, name, type, required, options }) => ({ id, name, type, required, options })),
      uniqueRules: table.uniqueRules,
      foreignKeys: table.foreignKeys,
    })),
    views: database.views,
  };
}

async function writeDatabase(
  payload: ExportDatabasePayload,
  snapshot: Snapshot,
  sink: ChunkSink,
  progress: ExportProgress,
) {
  const database = await readDatabase(snapshot, payload.orgId, payload.databaseId, payload.viewsOf ?? null);
  if (!database) throw new DomainError('RESOURCE_NOT_FOUND', 'The database was deleted before the export ran.');
  const plans = database.tables.map((table) => planOf(payload, table));
  const counts: number[] = [];
  for (const plan of plans) counts.push(await snapshot.prepare(plan));
  progress.total = counts.reduce((sum, count) => sum + count, 0);
  const [{ at }] = (await snapshot.query<{ at: string }>(
    `SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at`,
  )) as [{ at: string }];
  const zip = new ZipFile();
  const written = pipeline(zip.outputStream, sink);
  // A failed sink (a cancel) must also stop the table being read, which would otherwise wait on backpressure.
  const stop = new AbortController();
  written.catch(() => stop.abort());
  zip.addBuffer(
    Buffer.from(`${JSON.stringify(schemaDocument(payload, database, counts, at), null, 2)}\n`, 'utf8'),
    'schema.json',
  );
  const entries = database.tables.map((table) => {
    const entry = new PassThrough();
    zip.addReadStream(entry, fileOf(payload, table));
    return entry;
  });
  zip.end();
  try {
    // One COPY at a time on the snapshot's connection; the archive reads the entries in the same order.
    for (const [index, table] of database.tables.entries()) {
      const format =
        payload.format === 'csv' ? csvStream(table.fields, progress, payload.escapeFormulas) : jsonlStream(progress);
      await pipeline(snapshot.copy(plans[index]!), format, entries[index]!, { signal: stop.signal });
    }
  } catch (error) {
    // The sink's own failure (a cancel) is the cause when it aborted the read; otherwise the read failed.
    if (!stop.signal.aborted) (zip.outputStream as unknown as Readable).destroy(error as Error);
    const sinkError: unknown = await written.then(
      () => null,
      (failure: unknown) => failure,
    );
    throw stop.signal.aborted && sinkError ? sinkError : error;
  }
  await written;
  return { format: payload.format, tables: database.tables.length };
}

export const exportDatabase: JobHandler<
  ExportDatabasePayload,
  ExportJournal<ExportDatabaseResult>,
  ExportDatabaseResult
> = {
  kind: 'exportDatabase',
  payload: ExportDatabasePayload,
  result: ExportDatabaseResult,
  successEvent: () => succeededEvent('exportDatabase'),
  describe: (payload) => `Export of ${payload.fileName}`,
  fileName: (payload) => payload.fileName,
  run: (run) =>
    runExport<ExportDatabaseResult>(
      run as never,
      { name: run.payload.fileName, contentType: 'application/zip' },
      `Export of ${run.payload.fileName}`,
      (snapshot, sink, progress) => writeDatabase(run.payload, snapshot, sink, progress),
    ),
  discard: (run) => discardExport(run as never),
};
