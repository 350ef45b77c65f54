import { parse } from 'csv-parse/sync';
import { z } from 'zod';
import { typeSpecOf, type FieldDefinition } from '../../../data/field-types.ts';
import { resolveField } from '../../../data/filter.ts';
import type { FieldProblem } from '../../../kernel/errors.ts';
import type { ImportFormat } from './source.ts';

/**
 * An import mapping item (spec 2.16 leaves its shape open): `source` is a CSV header name, a 0-based CSV column
 * index, or a JSONL property name; `fieldId` is the target field's id (or its exact name).
 */
export const MappingItem = z.strictObject({
  source: z.union([z.string().min(1).max(255), z.number().int().min(0).max(9_999)]),
  fieldId: z.string().min(1).max(64),
});
export type MappingItem = z.infer<typeof MappingItem>;

/** A mapping resolved against the table and the file: where each target field's value comes from. */
export type ResolvedMapping = {
  fieldId: string;
  /** CSV column index, or JSONL property name. */
  column: number | null;
  property: string | null;
  /** How the report names the source: the header name, the column index, or the property. */
  label: string;
}[];

/**
 * A header row that cannot be parsed (e.g. an unclosed quote in it). Names cannot be checked against it; the job
 * then reports the file as malformed at line 1, which says more than "is not a column of the header row".
 */
const UNREADABLE_HEADER: readonly string[] = Object.freeze([]);

/** The header row of a CSV file: only its first record is parsed (the request stays cheap for a 4 MiB file). */
export function csvHeaderOf(content: string): string[] {
  try {
    const [first] = parse(content, {
      bom: true,
      to: 1,
      relax_column_count: true,
      skip_empty_lines: true,
      record_delimiter: ['\r\n', '\n', '\r'],
    }) as string[][];
    return first ?? [];
  } catch {
    return UNREADABLE_HEADER as string[]; // a malformed header is reported by the job with its line
  }
}

function sourceOf(
  item: MappingItem,
  format: ImportFormat,
  header: string[] | null,
  index: number,
  problems: FieldProblem[],
) {
  const path = ['mapping', index, 'source'];
  if (format === 'jsonl') {
    if (typeof item.source === 'number')
      problems.push({ path, message: 'JSONL sources are property names, not column indexes' });
    return { column: null, property: String(item.source), label: String(item.source) };
  }
  if (typeof item.source === 'number') {
    // With a header row the width is known: a column past it would read as empty on every line, without a word.
    if (header !== null && header !== UNREADABLE_HEADER && item.source >= header.length) {
      problems.push({
        path,
        message: `is past the header row, which has ${header.length} columns (indexes are 0-based)`,
      });
    }
    return { column: item.source, property: null, label: String(item.source) };
  }
  if (header === null) {
    problems.push({ path, message: 'a file without a header row is mapped by 0-based column index' });
    return { column: null, property: null, label: item.source };
  }
  if (header === UNREADABLE_HEADER) return { column: null, property: null, label: item.source };
  const column = header.indexOf(item.source);
  if (column < 0) problems.push({ path, message: 'is not a column of the header row' });
  else if (header.indexOf(item.source, column + 1) >= 0)
    problems.push({ path, message: 'names a header that appears more than once; map it by column index' });
  return { column, property: null, label: item.source };
}

/** Every problem of the mapping at once (422 before any job exists), or the resolved mapping. */
export function resolveMapping(
  fields: readonly FieldDefinition[],
  mapping: readonly MappingItem[],
  format: ImportFormat,
  header: string[] | null,
): { mapping: ResolvedMapping; problems: FieldProblem[] } {
  const problems: FieldProblem[] = [];
  const resolved: ResolvedMapping = [];
  const targets = new Set<string>();
  mapping.forEach((item, index) => {
    const source = sourceOf(item, format, header, index, problems);
    const field = resolveField(fields, item.fieldId);
    const path = ['mapping', index, 'fieldId'];
    if (!field) problems.push({ path, message: 'is not a field of this table' });
    else if (typeSpecOf(field.type).generated)
      problems.push({
        path,
        message: `${field.type} values are generated; they cannot be imported`,
        fieldId: field.id,
      });
    else if (targets.has(field.id))
      problems.push({ path, message: 'is the target of another mapping item', fieldId: field.id });
    else {
      targets.add(field.id);
      resolved.push({ fieldId: field.id, ...source });
    }
  });
  for (const field of fields) {
    if (field.required && !typeSpecOf(field.type).generated && !targets.has(field.id)) {
      problems.push({
        path: ['mapping'],
        message: `the required field ${field.name} is not mapped`,
        fieldId: field.id,
      });
    }
  }
  return { mapping: resolved, problems };
}
