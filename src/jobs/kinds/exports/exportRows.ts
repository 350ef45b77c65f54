import { pipeline } from 'node:stream/promises';
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { arrayCopy, csvCopy, jsonlCopy, type ExportFormat, type ExportQuery } from '../../../data/exports.ts';
import type { FieldDefinition } from '../../../data/field-types.ts';
import { filterFieldsOf, type FilterExpression } from '../../../data/filter.ts';
import { DomainError } from '../../../kernel/errors.ts';
import { ExportRowsResult } from './results.ts';
import type { JobHandler } from '../../engine/handler.ts';
import { succeededEvent } from '../../engine/handler.ts';
import { readTable, type ExportedTable } from './catalog.ts';
import { CONTENT_TYPES, csvStream, jsonlStream, XLSX_MAX_ROWS, xlsxStream } from './file-formats.ts';
import { discardExport, runExport, type ExportJournal, type ExportProgress } from './run.ts';
import type { ChunkSink } from './sink.ts';
import type { Snapshot } from './snapshot.ts';

/**
 * Export of a table's rows to one CSV, JSONL or XLSX file (`exportRows`), or of the rows a saved view shows
 * (`exportView`: the resolver turned the view into the same filter, order and columns when the export was asked for).
 */
export const ExportRowsPayload = z.object({
  orgId: z.string(),
  databaseId: z.string(),
  tableId: z.string(),
  schemaVersion: z.number().int(),
  format: z.enum(['csv', 'jsonl', 'xlsx']),
  fileName: z.string(),
  /** The exported fields, in column order. */
  fieldIds: z.array(z.string()),
  where: z.unknown().nullable(),
  orderBy: z.array(z.object({ fieldId: z.string(), direction: z.enum(['asc', 'desc']) })),
  /** JSONL: key `values` by field name instead of field id. */
  fieldNames: z.boolean(),
  viewId: z.string().nullable(),
  /** CSV: prefix text cells that a spreadsheet would run as formulas (absent in jobs queued before the option). */
  escapeFormulas: z.boolean().default(true),
  /** What the export reads, as it was asked for (readsOf); absent in jobs queued before it: any schema change fails them. */
  reads: z
    .array(z.object({ id: z.string(), type: z.string(), options: z.unknown(), name: z.string().optional() }))
    .optional(),
});
export type ExportRowsPayload = z.infer<typeof ExportRowsPayload>;
export type ExportReads = NonNullable<ExportRowsPayload['reads']>;

/**
 * The definitions of the fields an export reads: its columns and sort keys (by id: a rename only changes the
 * header, read in the snapshot), and the fields its filter names (with their names: a filter may name a field).
 * A schema change that alters none of these (a unique rule, a foreign key, an index, another field) does not
 * fail the export (issue 26 §11).
 */
export function readsOf(
  fields: readonly FieldDefinition[],
  payload: Pick<ExportRowsPayload, 'fieldIds' | 'orderBy' | 'where'>,
): ExportReads {
  const byId = new Map(fields.map((field) => [field.id, field]));
  const reads = new Map<string, ExportReads[number]>();
  for (const id of [...payload.fieldIds, ...payload.orderBy.map((item) => item.fieldId)]) {
    const field = byId.get(id);
    if (field && !reads.has(id)) reads.set(id, { id, type: field.type, options: field.options });
  }
  const named = payload.where ? filterFieldsOf(payload.where as FilterExpression, fields) : [];
  for (const field of named)
    reads.set(field.id, { id: field.id, type: field.type, options: field.options, name: field.name });
  return [...reads.values()];
}

function schemaChanged(expected: number, current: number, fieldIds?: string[]): DomainError {
  return new DomainError(
    'SCHEMA_VERSION_CONFLICT',
    fieldIds
      ? 'A field the export reads was deleted or changed after the export was asked for; ask for it again.'
      : 'The table’s schema changed after the export was asked for; ask for it again.',
    {
      details: { expectedSchemaVersion: expected, currentSchemaVersion: current, ...(fieldIds ? { fieldIds } : {}) },
    },
  );
}

/** Fails the export when the schema changed in what it reads (any change, for a payload without `reads`). */
function checkReads(payload: ExportRowsPayload, table: ExportedTable): void {
  if (table.schemaVersion === payload.schemaVersion) return;
  if (!payload.reads) throw schemaChanged(payload.schemaVersion, table.schemaVersion);
  const now = new Map(readsOf(table.fields, payload).map((read) => [read.id, read]));
  const changed = payload.reads.filter((read) => !isDeepStrictEqual(now.get(read.id), read)).map((read) => read.id);
  if (changed.length > 0) throw schemaChanged(payload.schemaVersion, table.schemaVersion, changed);
}

function queryOf(payload: ExportRowsPayload, table: ExportedTable): ExportQuery {
  const byId = new Map(table.fields.map((field) => [field.id, field]));
  const field = (id: string): FieldDefinition => byId.get(id)!;
  return {
    databaseId: payload.databaseId,
    tableId: payload.tableId,
    fields: table.fields,
    columns: payload.fieldIds.map(field),
    where: (payload.where ?? null) as FilterExpression | null,
    keys: payload.orderBy.map((item) => ({ field: field(item.fieldId), direction: item.direction })),
  };
}

function tooManyRowsForXlsx(rows: number): DomainError {
  return new DomainError(
    'VALIDATION_FAILED',
    `An XLSX sheet holds at most ${XLSX_MAX_ROWS} rows (the header row included); this export has ${rows} rows. Export to CSV or JSONL, or narrow it with a filter.`,
    {
      details: { format: 'xlsx', limit: XLSX_MAX_ROWS - 1, rows },
    },
  );
}

async function writeRows(payload: ExportRowsPayload, snapshot: Snapshot, sink: ChunkSink, progress: ExportProgress) {
  const table = await readTable(snapshot, payload.orgId, payload.databaseId, payload.tableId);
  if (!table) throw new DomainError('RESOURCE_NOT_FOUND', 'The table was deleted before the export ran.');
  checkReads(payload, table);
  const query = queryOf(payload, table);
  const format: ExportFormat = payload.format;
  const plan =
    format === 'csv'
      ? csvCopy(query, payload.escapeFormulas)
      : format === 'jsonl'
        ? jsonlCopy(query, payload.fieldNames)
        : arrayCopy(query);
  progress.total = await snapshot.prepare(plan);
  if (format === 'xlsx' && progress.total > XLSX_MAX_ROWS - 1) throw tooManyRowsForXlsx(progress.total);
  const source = snapshot.copy(plan);
  if (format === 'csv') await pipeline(source, csvStream(query.columns, progress, payload.escapeFormulas), sink);
  else if (format === 'jsonl') await pipeline(source, jsonlStream(progress), sink);
  else await pipeline(xlsxStream(source, query.columns, progress), sink);
  return { format, fieldIds: payload.fieldIds, schemaVersion: table.schemaVersion };
}

function handlerFor(
  kind: 'exportRows' | 'exportView',
): JobHandler<ExportRowsPayload, ExportJournal<ExportRowsResult>, ExportRowsResult> {
  return {
    kind,
    payload: ExportRowsPayload,
    result: ExportRowsResult,
    successEvent: () => succeededEvent(kind),
    describe: (payload) => `Export of ${payload.fileName}`,
    fileName: (payload) => payload.fileName,
    run: (run) =>
      runExport<ExportRowsResult>(
        run as never,
        { name: run.payload.fileName, contentType: CONTENT_TYPES[run.payload.format] },
        `Export of ${run.payload.fileName}`,
        (snapshot, sink, progress) => writeRows(run.payload, snapshot, sink, progress),
      ),
    discard: (run) => discardExport(run as never),
  };
}

export const exportRows = handlerFor('exportRows');
export const exportView = handlerFor('exportView');
