import type { CellValue, FieldDefinition } from '../../data/field-types.ts';
import { typeSpecOf } from '../../data/field-types.ts';
import { DomainError, validationFailed, type FieldProblem } from '../../kernel/errors.ts';
import { problemsFromIssues } from '../../kernel/validation.ts';
import type { TableSchema } from '../../catalog/table-schema.ts';

/**
 * Checks a request's `values` against the table schema and returns canonical cells keyed by field id. Every
 * problem is reported at once (path `['values', <key as sent>]`, plus the field id when known), never just the first.
 * Keys may be field ids or field names (exact); ids win, and names cannot look like ids (src/data/field-types.ts).
 */
export type WriteMode = 'create' | 'update';

function fieldFor(schema: TableSchema, key: string): FieldDefinition | undefined {
  return schema.fieldsById.get(key) ?? schema.fieldsByName.get(key);
}

/**
 * An empty cell: null, and for text and selections also `""` and `[]` (stored as null, so "required" means
 * something). A json cell is empty only when null: `""` and `[]` are JSON values like any other.
 */
function isEmpty(field: FieldDefinition, value: unknown): boolean {
  if (value === null) return true;
  if (field.type === 'json') return false;
  return value === '' || (Array.isArray(value) && value.length === 0);
}

function checkCell(
  schema: TableSchema,
  field: FieldDefinition,
  key: string,
  value: unknown,
  problems: FieldProblem[],
): CellValue | undefined {
  const at = (message: string, path: (string | number)[] = []) =>
    problems.push({ path: ['values', key, ...path], message, fieldId: field.id });
  if (typeSpecOf(field.type).generated)
    return (at(`${field.name} is an ${field.type} field; its values are generated`), undefined);
  if (value === undefined) return (at('must not be undefined'), undefined);
  if (isEmpty(field, value)) {
    if (field.required) return (at(`${field.name} is required`), undefined);
    return null;
  }
  const parsed = schema.validators.get(field.id)!.safeParse(value);
  if (parsed.success) return parsed.data;
  for (const problem of problemsFromIssues(parsed.error.issues)) at(`${field.name} ${problem.message}`, problem.path);
  return undefined;
}

export function checkValues(
  schema: TableSchema,
  values: Record<string, unknown>,
  mode: WriteMode,
): Map<string, CellValue> {
  const problems: FieldProblem[] = [];
  const cells = new Map<string, CellValue>();
  const keyOfField = new Map<string, string>();
  for (const [key, value] of Object.entries(values)) {
    const field = fieldFor(schema, key);
    if (!field) {
      problems.push({
        path: ['values', key],
        message: 'is not a field of this table (use a field id or an exact field name)',
      });
      continue;
    }
    const earlier = keyOfField.get(field.id);
    if (earlier !== undefined) {
      problems.push({ path: ['values', key], message: `names the same field as "${earlier}"`, fieldId: field.id });
      continue;
    }
    keyOfField.set(field.id, key);
    const cell = checkCell(schema, field, key, value, problems);
    if (cell !== undefined) cells.set(field.id, cell);
  }
  if (mode === 'create') {
    for (const field of schema.fields) {
      if (keyOfField.has(field.id) || typeSpecOf(field.type).generated) continue;
      if (field.required)
        problems.push({ path: ['values', field.id], message: `${field.name} is required`, fieldId: field.id });
      else cells.set(field.id, null);
    }
  } else if (keyOfField.size === 0 && problems.length === 0) {
    problems.push({ path: ['values'], message: 'must name at least one field to change' });
  }
  if (problems.length > 0) throw validationFailed(problems, 'Some values do not fit the table schema.');
  return cells;
}

/** The stored size of a row's values, as the JSON the client would read back. */
export function checkRowSize(cells: ReadonlyMap<string, CellValue>, limitBytes: number): void {
  const size = Buffer.byteLength(JSON.stringify(Object.fromEntries(cells)), 'utf8');
  if (size > limitBytes) {
    throw new DomainError(
      'ROW_SIZE_LIMIT',
      `The row's values take ${size} bytes; a row may hold at most ${limitBytes}.`,
      {
        details: { sizeBytes: size, limitBytes },
      },
    );
  }
}
