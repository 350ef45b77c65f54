import { StringDecoder } from 'node:string_decoder';
import { PassThrough, Transform, type Readable, type TransformCallback } from 'node:stream';
import type ExcelJS from 'exceljs';
import { FORMULA_PREFIX, FORMULA_STARTS, MULTI_SELECT_SEPARATOR, type ExportFormat } from '../../../data/exports.ts';
import type { FieldDefinition } from '../../../data/field-types.ts';

/**
 * The byte streams of each export format, fed by a COPY (src/data/exports.ts). They count rows as they pass, for
 * the job's progress.
 */
export interface RowCounter {
  rows: number;
}

const QUOTE = 0x22;
const NEWLINE = 0x0a;

/** RFC 4180 field text: quoted when it holds a comma, quote or line break, quotes doubled (as COPY writes them). */
function csvField(text: string): string {
  return /[",\r\n]/.test(text) || text === '' ? `"${text.replaceAll('"', '""')}"` : text;
}

/** A field name as a header cell, escaped like a text cell (src/data/exports.ts, FORMULA_STARTS). */
function headerText(name: string, escapeFormulas: boolean): string {
  return escapeFormulas && FORMULA_STARTS.some((start) => name.startsWith(start)) ? `${FORMULA_PREFIX}${name}` : name;
}

export function csvHeader(columns: readonly FieldDefinition[], escapeFormulas = true): string {
  return `${columns.map((field) => csvField(headerText(field.name, escapeFormulas))).join(',')}\n`;
}

/**
 * COPY's CSV with a header row of field names in front. A record ends at a newline outside quotes (a quoted field
 * may hold newlines; a doubled quote toggles twice), which is how records are counted without parsing them.
 */
export function csvStream(columns: readonly FieldDefinition[], counter: RowCounter, escapeFormulas = true): Transform {
  let quoted = false;
  let started = false;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback: TransformCallback) {
      if (!started) {
        started = true;
        this.push(Buffer.from(csvHeader(columns, escapeFormulas), 'utf8'));
      }
      for (let index = 0; index < chunk.length; index += 1) {
        const byte = chunk[index];
        if (byte === QUOTE) quoted = !quoted;
        else if (byte === NEWLINE && !quoted) counter.rows += 1;
      }
      callback(null, chunk);
    },
    flush(callback) {
      callback(null, started ? null : Buffer.from(csvHeader(columns, escapeFormulas), 'utf8'));
    },
  });
}

/** JSON documents never hold a raw newline, so every newline ends one row. */
export function jsonlStream(counter: RowCounter): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, callback: TransformCallback) {
      let at = chunk.indexOf(NEWLINE);
      while (at !== -1) {
        counter.rows += 1;
        at = chunk.indexOf(NEWLINE, at + 1);
      }
      callback(null, chunk);
    },
  });
}

/** Excel's sheet size: 1,048,576 rows, the header row included. */
export const XLSX_MAX_ROWS = 1_048_576;

const DATE_FORMAT = 'yyyy-mm-dd';
const DATETIME_FORMAT = 'yyyy-mm-dd hh:mm:ss.000';

/** Excel's calendar starts in 1900; earlier dates stay text rather than become wrong numbers. */
function excelDate(text: string): Date | string {
  const date = new Date(text.length === 10 ? `${text}T00:00:00.000Z` : text);
  return Number.isNaN(date.getTime()) || date.getUTCFullYear() < 1900 ? text : date;
}

function xlsxCell(field: FieldDefinition, value: unknown): ExcelJS.CellValue {
  if (value === null || value === undefined) return null;
  switch (field.type) {
    case 'date':
    case 'datetime':
      return excelDate(value as string);
    case 'multiSelect':
      return (value as string[]).join(MULTI_SELECT_SEPARATOR);
    default:
      return value as ExcelJS.CellValue;
  }
}

/**
 * XLSX through exceljs' streaming writer: one header row of field names, then each row's cells with real types
 * (numbers, booleans, dates with a date format; json as compact text). Each COPY line is one JSON array of cells.
 */
export function xlsxStream(source: Readable, columns: readonly FieldDefinition[], counter: RowCounter): Readable {
  const output = new PassThrough();
  const write = async () => {
    // Loaded on first use: exceljs takes ~0.5-0.9 s to load, which every worker would otherwise pay at start-up.
    const { default: excel } = await import('exceljs');
    const workbook = new excel.stream.xlsx.WorkbookWriter({ stream: output, useStyles: true, useSharedStrings: false });
    const sheet = workbook.addWorksheet('Export');
    sheet.columns = columns.map((field) => ({
      header: field.name,
      key: field.id,
      width: Math.min(Math.max(field.name.length + 2, 12), 60),
      ...(field.type === 'date'
        ? { style: { numFmt: DATE_FORMAT } }
        : field.type === 'datetime'
          ? { style: { numFmt: DATETIME_FORMAT } }
          : {}),
    }));
    const decoder = new StringDecoder('utf8');
    let rest = '';
    for await (const chunk of source) {
      // The consumer stopped (a cancel, a failed chunk write): stop reading the COPY too.
      if (output.destroyed) {
        source.destroy();
        return;
      }
      const lines = (rest + decoder.write(chunk as Buffer)).split('\n');
      rest = lines.pop()!;
      for (const line of lines) {
        const cells = JSON.parse(line) as unknown[];
        sheet.addRow(columns.map((field, index) => xlsxCell(field, cells[index]))).commit();
        counter.rows += 1;
      }
    }
    sheet.commit();
    await workbook.commit();
  };
  write().catch((error: unknown) => output.destroy(error as Error));
  return output;
}

export const CONTENT_TYPES: Record<ExportFormat, string> = {
  csv: 'text/csv',
  jsonl: 'application/x-ndjson',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
};
