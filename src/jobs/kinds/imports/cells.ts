import type { z } from 'zod';
import type { CellValue, FieldDefinition } from '../../../data/field-types.ts';

/**
 * Turning an imported cell into a typed value. JSONL cells are JSON already and go straight to the field's
 * validator. CSV cells are text; each type reads one unambiguous textual form and the value then passes the same
 * validator as a row write (no rounding, no coercion beyond the textual form). docs/decisions/imports.md lists the forms.
 */
export type CellResult = { ok: true; value: CellValue } | { ok: false; message: string };

const INTEGER_TEXT = /^[+-]?\d+$/;
const NUMBER_TEXT = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

function fromCsvText(field: FieldDefinition, text: string): CellResult {
  switch (field.type) {
    case 'integer':
      return INTEGER_TEXT.test(text) ? { ok: true, value: Number(text) } : { ok: false, message: 'must be an integer' };
    case 'number':
      return NUMBER_TEXT.test(text)
        ? { ok: true, value: Number(text) }
        : { ok: false, message: 'must be a decimal number' };
    case 'boolean': {
      const lower = text.toLowerCase();
      return lower === 'true' || lower === 'false'
        ? { ok: true, value: lower === 'true' }
        : { ok: false, message: 'must be true or false' };
    }
    case 'multiSelect':
      if (text.startsWith('['))
        return fromJsonText(text, 'must be a JSON array of choices, or choices separated by commas');
      return { ok: true, value: text.split(',').map((choice) => choice.trim()) };
    case 'json':
      return fromJsonText(text, 'must be a JSON document');
    default:
      return { ok: true, value: text };
  }
}

function fromJsonText(text: string, message: string): CellResult {
  try {
    return { ok: true, value: JSON.parse(text) as CellValue };
  } catch {
    return { ok: false, message };
  }
}

function validated(validator: z.ZodType<CellValue>, value: CellValue): CellResult {
  const parsed = validator.safeParse(value);
  return parsed.success
    ? { ok: true, value: parsed.data }
    : { ok: false, message: parsed.error.issues[0]?.message ?? 'is not valid for this field' };
}

/** An empty CSV cell (or a missing/null JSONL property) is an empty value; `required` is checked by the caller. */
export function csvCell(field: FieldDefinition, validator: z.ZodType<CellValue>, text: string): CellResult {
  if (text === '') return { ok: true, value: null };
  const typed = fromCsvText(field, text);
  return typed.ok ? validated(validator, typed.value) : typed;
}

export function jsonCell(validator: z.ZodType<CellValue>, value: unknown): CellResult {
  if (value === null || value === undefined) return { ok: true, value: null };
  return validated(validator, value as CellValue);
}
