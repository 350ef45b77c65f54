import { z } from 'zod';
import { OrderBy } from '../data/filter.ts';
import { Id } from '../kernel/formats.ts';
import { BIDI_CONTROL_MESSAGE, BIDI_CONTROLS } from '../kernel/input-hygiene.ts';

/**
 * The exports domain's contract (issue 15): the bodies that start an export job. The answer is a job handle
 * (`JobHandleResponse` in jobs.ts); the file is the job's artifact. No side effects.
 */

const ExportFileName = z
  .string()
  .min(1)
  .max(128)
  .refine((name) => name.trim() === name, 'must not start or end with whitespace')
  .refine(
    (name) => !/[\u0000-\u001f\u007f/\\]/.test(name),
    'must be a file name without control characters or path separators',
  )
  .refine((name) => !BIDI_CONTROLS.test(name), BIDI_CONTROL_MESSAGE);

export const ExportRowsBody = z.strictObject({
  format: z.enum(['csv', 'jsonl', 'xlsx']),
  viewId: Id.optional().describe(
    'Export what this saved view shows: its filter (and `where`), its order unless `orderBy` is given, its column order and hidden columns.',
  ),
  where: z.unknown().optional().describe('A filter expression (spec 2.4).'),
  orderBy: OrderBy.optional(),
  fieldIds: z
    .array(z.string().min(1).max(64))
    .min(1)
    .max(500)
    .optional()
    .describe(
      'The exported fields (ids or names), in this column order; default: every field (through a view: its visible columns).',
    ),
  fieldNames: z.boolean().optional().describe('JSONL: key `values` by field name instead of field id.'),
  escapeFormulas: z
    .boolean()
    .optional()
    .describe(
      "CSV: prefix with `'` every text cell (and header) that begins with =, +, -, @, a tab or a carriage return, so a spreadsheet does not run it as a formula (default true); false exports the raw values, for programs.",
    ),
  fileName: ExportFileName.optional().describe(
    'The artifact’s file name (default: the table’s name and the format’s extension).',
  ),
});
export type ExportRowsBody = z.infer<typeof ExportRowsBody>;

export const ExportDatabaseBody = z.strictObject({
  format: z.enum(['csv', 'jsonl']),
  fileName: ExportFileName.optional().describe('The archive’s file name (default: the database’s name with `.zip`).'),
  escapeFormulas: z
    .boolean()
    .optional()
    .describe(
      "CSV: prefix with `'` every text cell (and header) that begins with =, +, -, @, a tab or a carriage return, so a spreadsheet does not run it as a formula (default true); false exports the raw values, for programs.",
    ),
});
export type ExportDatabaseBody = z.infer<typeof ExportDatabaseBody>;
