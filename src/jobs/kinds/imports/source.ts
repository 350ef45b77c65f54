import { parse, type CsvError } from 'csv-parse';

/**
 * Reading an import's content into records with the physical line each starts on. CSV goes through csv-parse
 * (RFC 4180: quoted fields, embedded newlines, CRLF/LF/CR, BOM); JSONL is one JSON object per line. The
 * content is at most 4,194,304 characters (spec §8), so a whole file's records fit in memory; the job then
 * works through them in checkpointed batches.
 */
export type ImportFormat = 'csv' | 'jsonl';

export type SourceRecord =
  | { line: number; kind: 'csv'; values: string[] }
  | { line: number; kind: 'jsonl'; object: Record<string, unknown> }
  | { line: number; kind: 'unreadable'; code: 'INVALID_JSON' | 'NOT_AN_OBJECT'; message: string };

export interface ParsedSource {
  /** CSV header cells (when the file has a header row); null for JSONL. */
  header: string[] | null;
  records: SourceRecord[];
  /** A structural CSV error ends the file: nothing after it can be read reliably. */
  malformed: { line: number; message: string } | null;
}

const NEWLINE = 0x0a;
const CARRIAGE_RETURN = 0x0d;

/** Physical line numbers from byte offsets: `\r\n`, `\n` and a lone `\r` each end a line. */
class LineCounter {
  private position = 0;
  private line = 1;

  constructor(private readonly bytes: Buffer) {}

  private endsLine(index: number): boolean {
    const byte = this.bytes[index];
    return byte === NEWLINE || (byte === CARRIAGE_RETURN && this.bytes[index + 1] !== NEWLINE);
  }

  /** The line of the first character at or after the current position that is not a line break (blank lines are skipped). */
  startOfNext(): number {
    while (
      this.position < this.bytes.length &&
      (this.bytes[this.position] === NEWLINE || this.bytes[this.position] === CARRIAGE_RETURN)
    ) {
      if (this.endsLine(this.position)) this.line += 1;
      this.position += 1;
    }
    return this.line;
  }

  advanceTo(offset: number): void {
    for (; this.position < offset; this.position += 1) if (this.endsLine(this.position)) this.line += 1;
  }
}

export function parseCsv(content: string, hasHeader: boolean): Promise<ParsedSource> {
  const bytes = Buffer.from(content, 'utf8');
  const lines = new LineCounter(bytes);
  const rows: { line: number; values: string[] }[] = [];
  return new Promise((resolve) => {
    parse(
      bytes,
      {
        bom: true,
        relax_column_count: true,
        skip_empty_lines: true,
        record_delimiter: ['\r\n', '\n', '\r'],
        on_record: (values: string[], context: { bytes: number }) => {
          const line = lines.startOfNext();
          lines.advanceTo(context.bytes);
          rows.push({ line, values });
          return null; // collected here, so the records before a structural error are kept
        },
      },
      (error: CsvError | undefined) => {
        const malformed = error
          ? { line: lines.startOfNext(), message: error.message.replace(/ at line \d+/, '') }
          : null;
        const [first, ...rest] = hasHeader ? rows : [undefined, ...rows];
        resolve({
          header: first?.values ?? (hasHeader ? [] : null),
          records: rest.map((row) => ({ line: row!.line, kind: 'csv', values: row!.values })),
          malformed,
        });
      },
    );
  });
}

/**
 * A line of a JSONL export (`{id, version, values}`, issue 15) imports its `values`, so that an export can be
 * imported again as it is; any other object is the record itself.
 */
function exportedValues(object: Record<string, unknown>): Record<string, unknown> {
  const keys = Object.keys(object);
  const { values } = object;
  const isExport =
    keys.length === 3 &&
    typeof object.id === 'string' &&
    typeof object.version === 'string' &&
    values !== null &&
    typeof values === 'object' &&
    !Array.isArray(values);
  return isExport ? (values as Record<string, unknown>) : object;
}

export function parseJsonl(content: string): ParsedSource {
  const records: SourceRecord[] = [];
  const text = content.charCodeAt(0) === 0xfeff ? content.slice(1) : content;
  text.split(/\r\n|\n|\r/).forEach((raw, index) => {
    const line = index + 1;
    if (raw.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch (error) {
      records.push({
        line,
        kind: 'unreadable',
        code: 'INVALID_JSON',
        message: `is not valid JSON (${(error as Error).message})`,
      });
      return;
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      records.push({ line, kind: 'unreadable', code: 'NOT_AN_OBJECT', message: 'must be a JSON object' });
    } else {
      records.push({ line, kind: 'jsonl', object: exportedValues(value as Record<string, unknown>) });
    }
  });
  return { header: null, records, malformed: null };
}

export function parseSource(format: ImportFormat, content: string, hasHeader: boolean): Promise<ParsedSource> {
  return format === 'csv' ? parseCsv(content, hasHeader) : Promise.resolve(parseJsonl(content));
}
