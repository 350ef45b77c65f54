import { z } from 'zod';
import {
  FIELD_OPTIONS,
  FIELD_TYPES,
  FieldInput,
  FieldName,
  MAX_FIELDS_PER_TABLE,
  resolvedOptions,
  typeSpecOf,
  type FieldDefinition,
  type FieldType,
} from '../../../data/field-types.ts';
import type { FieldProblem } from '../../../kernel/errors.ts';
import { FilterExpression, resolveField } from '../../../data/filter.ts';
import { INDEX_KEY_BUDGET_BYTES, indexKeysOf, signatureOf } from '../../../data/sort-indexes.ts';
import { INDEX_BUDGET_BYTES, KeyFieldReferences, keyBytes } from '../../../data/unique-keys.ts';
import { isSearchable } from '../../../data/search.ts';
import { Id } from '../../../kernel/formats.ts';
import type { TableSchema } from '../../../catalog/table-schema.ts';
import type { JobKind } from '../../engine/kinds.ts';
import { conversionSql } from './conversions.ts';

/**
 * Schema changes (endpoint 5). `change.kind` is one of six; each runs as a durable job whose operation name and
 * success event follow spec §6 (add_field → createField / field.create, …).
 */
export const AddField = z.strictObject({ kind: z.literal('add_field'), field: FieldInput });
export const RenameField = z.strictObject({ kind: z.literal('rename_field'), fieldId: Id, name: FieldName });
export const UpdateField = z
  .strictObject({
    kind: z.literal('update_field'),
    fieldId: Id,
    required: z.boolean().optional(),
    options: z.record(z.string(), z.unknown()).optional(),
  })
  .refine(
    (change) => change.required !== undefined || change.options !== undefined,
    'name `required`, `options` or both',
  );
export const ConvertField = z.strictObject({
  kind: z.literal('convert_field'),
  fieldId: Id,
  type: z.enum(FIELD_TYPES),
  options: z.record(z.string(), z.unknown()).optional(),
  /** `fail` (default): any value that cannot convert fails the job. `empty`: such cells are emptied and reported. */
  onUnconvertible: z.enum(['fail', 'empty']).optional(),
});
export const DeleteField = z.strictObject({ kind: z.literal('delete_field'), fieldId: Id });
export const ReorderFields = z.strictObject({
  kind: z.literal('reorder_fields'),
  fieldIds: z.array(Id).min(1).max(500),
});

/** Unique rules and foreign keys built online (CREATE UNIQUE INDEX CONCURRENTLY; NOT VALID + VALIDATE). */
export const AddUniqueRule = z.strictObject({
  kind: z.literal('add_unique_rule'),
  fieldIds: KeyFieldReferences,
  where: FilterExpression.optional(),
});
export const AddForeignKey = z.strictObject({
  kind: z.literal('add_foreign_key'),
  fieldIds: KeyFieldReferences,
  referencedTableId: Id,
  referencedRuleId: Id,
});

/**
 * Sort indexes (issue 14): `fields` is an orderBy (spec 2.3), fields by id or exact name; the row id comes last.
 * `using: 'trigram'` indexes one text field's folded text for similar rows; `using: 'search'` (no fields) the
 * folded text of every text-like field, for search (issue 28). Both count against the table's index cap.
 */
export const AddIndex = z
  .strictObject({
    kind: z.literal('add_index'),
    using: z
      .enum(['btree', 'trigram', 'search'])
      .optional()
      .describe('btree (default): a sort index; trigram: one text field; search: all text-like fields'),
    fields: z
      .array(z.strictObject({ field: z.string().min(1).max(64), direction: z.enum(['asc', 'desc']).optional() }))
      .min(1)
      .max(8)
      .optional(),
  })
  .superRefine((change, context) => {
    const using = change.using ?? 'btree';
    if (using === 'search' && change.fields !== undefined)
      context.addIssue({
        code: 'custom',
        path: ['fields'],
        message: 'must be absent: a search index covers every text-like field',
      });
    if (using !== 'search' && change.fields === undefined)
      context.addIssue({ code: 'custom', path: ['fields'], message: `is required for a ${using} index` });
    if (using === 'trigram' && (change.fields?.length ?? 1) !== 1)
      context.addIssue({ code: 'custom', path: ['fields'], message: 'must name one field for a trigram index' });
    if (using === 'btree') {
      change.fields?.forEach((item, index) => {
        if (item.direction === undefined)
          context.addIssue({
            code: 'custom',
            path: ['fields', index, 'direction'],
            message: 'is required for a sort index',
          });
      });
    }
  });
export const DropIndex = z.strictObject({ kind: z.literal('drop_index'), indexId: Id });

export const SchemaChange = z.discriminatedUnion(
  'kind',
  [
    AddField,
    RenameField,
    UpdateField,
    ConvertField,
    DeleteField,
    ReorderFields,
    AddUniqueRule,
    AddForeignKey,
    AddIndex,
    DropIndex,
  ],
  {
    error:
      'kind must be one of add_field, rename_field, update_field, convert_field, delete_field, reorder_fields, add_unique_rule, add_foreign_key, add_index, drop_index',
  },
);
export type SchemaChange = z.infer<typeof SchemaChange>;

/** The job of each change kind (spec §6 operations) and the plain event that marks its success. */
export const CHANGE_JOBS: Record<SchemaChange['kind'], { kind: JobKind; successEvent: string }> = {
  add_field: { kind: 'createField', successEvent: 'field.create' },
  rename_field: { kind: 'updateField', successEvent: 'field.update' },
  update_field: { kind: 'updateField', successEvent: 'field.update' },
  convert_field: { kind: 'applySchemaChange', successEvent: 'field.convert' },
  delete_field: { kind: 'deleteField', successEvent: 'field.delete' },
  reorder_fields: { kind: 'reorderFields', successEvent: 'fields.reorder' },
  add_unique_rule: { kind: 'createUniqueRule', successEvent: 'rule.create' },
  add_foreign_key: { kind: 'createForeignKey', successEvent: 'foreign-key.create' },
  // Spec §6 names no index events: an index changes the table, so its job and event are the table's.
  add_index: { kind: 'applySchemaChange', successEvent: 'table.update' },
  drop_index: { kind: 'applySchemaChange', successEvent: 'table.update' },
};

/** A change as the job runs it: field ids resolved, options with their defaults, the new field's id chosen. */
export const PlannedChange = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('add_field'),
    field: z.object({
      id: z.string(),
      name: z.string(),
      type: z.enum(FIELD_TYPES),
      required: z.boolean(),
      options: z.record(z.string(), z.unknown()),
    }),
  }),
  z.object({ kind: z.literal('rename_field'), fieldId: z.string(), name: z.string() }),
  z.object({
    kind: z.literal('update_field'),
    fieldId: z.string(),
    required: z.boolean(),
    options: z.record(z.string(), z.unknown()),
  }),
  z.object({
    kind: z.literal('convert_field'),
    fieldId: z.string(),
    type: z.enum(FIELD_TYPES),
    options: z.record(z.string(), z.unknown()),
    onUnconvertible: z.enum(['fail', 'empty']),
  }),
  z.object({ kind: z.literal('delete_field'), fieldId: z.string() }),
  z.object({ kind: z.literal('reorder_fields'), fieldIds: z.array(z.string()) }),
  // `enforcement` defaults to btree for jobs enqueued before hashed keys existed.
  z.object({
    kind: z.literal('add_unique_rule'),
    ruleId: z.string(),
    fieldIds: z.array(z.string()),
    where: z.unknown(),
    enforcement: z.enum(['btree', 'hash']).default('btree'),
  }),
  z.object({
    kind: z.literal('add_foreign_key'),
    foreignKeyId: z.string(),
    fieldIds: z.array(z.string()),
    referencedTableId: z.string(),
    referencedRuleId: z.string(),
    referencedFieldIds: z.array(z.string()),
  }),
  z.object({
    kind: z.literal('add_index'),
    indexId: z.string(),
    keys: z.array(z.object({ fieldId: z.string(), direction: z.enum(['asc', 'desc']) })),
    method: z.enum(['btree', 'trigram', 'search']).default('btree'),
  }),
  z.object({ kind: z.literal('drop_index'), indexId: z.string() }),
]);
export type PlannedChange = z.infer<typeof PlannedChange>;

/** Options whose change alters the column type (a conversion, not an update). */
const COLUMN_SHAPING_OPTIONS: Partial<Record<FieldType, string[]>> = {
  number: ['precision', 'scale'],
  autoNumber: ['start', 'max'],
};

type Planned = { change: PlannedChange; problems: FieldProblem[] };

/** The keys of a text index: its one field (trigram), or every text-like field in position order (search). */
function textIndexKeysOf(
  schema: TableSchema,
  method: 'trigram' | 'search',
  field: string | undefined,
): { keys: { fieldId: string; direction: 'asc' }[]; problems: FieldProblem[] } {
  if (method === 'search') {
    const keys = schema.fields
      .filter(isSearchable)
      .map((candidate) => ({ fieldId: candidate.id, direction: 'asc' as const }));
    return {
      keys,
      problems:
        keys.length > 0 ? [] : [{ path: ['change', 'using'], message: 'the table has no text-like field to search' }],
    };
  }
  const found = resolveField(schema.fields, field!);
  const path = ['change', 'fields', 0, 'field'];
  if (!found) return { keys: [], problems: [{ path, message: 'is not a field of this table' }] };
  if (!isSearchable(found) || found.type === 'multiSelect')
    return {
      keys: [],
      problems: [{ path, message: `a trigram index compares text; a ${found.type} field has none`, fieldId: found.id }],
    };
  return { keys: [{ fieldId: found.id, direction: 'asc' }], problems: [] };
}

function nameProblems(
  schema: TableSchema,
  name: string,
  except: string | null,
  path: (string | number)[],
): FieldProblem[] {
  const taken = schema.fields.some((field) => field.id !== except && field.name.toLowerCase() === name.toLowerCase());
  return taken ? [{ path, message: 'another field already has this name (names are unique ignoring case)' }] : [];
}

function fieldOf(schema: TableSchema, fieldId: string, problems: FieldProblem[]): FieldDefinition | undefined {
  const field = schema.fieldsById.get(fieldId);
  if (!field) problems.push({ path: ['change', 'fieldId'], message: 'is not a field of this table' });
  return field;
}

/** Whether a rule's stored `where` names the field (by id or by name, as filters resolve them). */
function whereNames(schema: TableSchema, where: unknown, fieldId: string): boolean {
  if (where === null || typeof where !== 'object') return false;
  const node = where as { and?: unknown[]; or?: unknown[]; field?: unknown };
  const items = node.and ?? node.or;
  if (Array.isArray(items)) return items.some((item) => whereNames(schema, item, fieldId));
  return typeof node.field === 'string' && resolveField(schema.fields, node.field)?.id === fieldId;
}

/**
 * A rule's `where` after the field is renamed: leaves that name it by its old name name it by the new one (by id
 * they need nothing). Null when nothing changes.
 */
export function renamedInWhere(schema: TableSchema, where: unknown, fieldId: string, name: string): unknown {
  const rename = (node: unknown): unknown => {
    if (node === null || typeof node !== 'object') return node;
    const { and, or, field } = node as { and?: unknown[]; or?: unknown[]; field?: unknown };
    if (Array.isArray(and)) return { ...node, and: and.map(rename) };
    if (Array.isArray(or)) return { ...node, or: or.map(rename) };
    const named = typeof field === 'string' && field !== fieldId && resolveField(schema.fields, field)?.id === fieldId;
    return named ? { ...node, field: name } : node;
  };
  const renamed = rename(where);
  return JSON.stringify(renamed) === JSON.stringify(where) ? null : renamed;
}

/**
 * The rules and keys a field takes part in. A conditional rule's `where` counts: its partial index reads the
 * column, and PostgreSQL drops such an index with the column, which would leave the rule unenforced.
 */
function constraintsOn(schema: TableSchema, fieldId: string): string[] {
  return [
    ...schema.uniqueRules
      .filter((rule) => rule.fieldIds.includes(fieldId) || whereNames(schema, rule.where, fieldId))
      .map((rule) => `unique rule ${rule.id}`),
    ...schema.foreignKeys.filter((key) => key.fieldIds.includes(fieldId)).map((key) => `foreign key ${key.id}`),
    ...schema.foreignKeys
      .filter((key) => key.referencedFieldIds.includes(fieldId))
      .map((key) => `foreign key ${key.id}`),
  ];
}

function parsedOptions(
  type: FieldType,
  options: Record<string, unknown> | undefined,
  path: (string | number)[],
  problems: FieldProblem[],
) {
  const parsed = FIELD_OPTIONS[type].safeParse(options ?? {});
  if (parsed.success) return parsed.data as Record<string, unknown>;
  for (const issue of parsed.error.issues)
    problems.push({
      path: [...path, ...issue.path.map((part) => (typeof part === 'symbol' ? String(part) : part))],
      message: issue.message,
    });
  return {};
}

/**
 * A text field's maxLength sizes the btree entries of the sort indexes and btree-enforced unique rules over it.
 * Raising it past their budget would let in a value no entry can hold: PostgreSQL would refuse that row's write
 * (54000), a 500 where the caller deserves to hear why now. Hashed rules take any width. Checked when the change
 * is accepted and again when it is applied: a shared view saved in between may have added an automatic index.
 */
export function keysThatNoLongerFit(schema: TableSchema, widened: FieldDefinition): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const path = ['change', 'options', 'maxLength'];
  const bytesOf = (fieldIds: readonly string[]) =>
    keyBytes(
      fieldIds
        .map((id) => (id === widened.id ? widened : schema.fieldsById.get(id)))
        .filter((field) => field !== undefined),
    );
  for (const index of schema.indexes) {
    // A GIN trigram index holds trigrams, not values: any length fits.
    if (index.method !== 'btree') continue;
    const bytes = bytesOf(index.keys.map((key) => key.fieldId));
    if (index.keys.some((key) => key.fieldId === widened.id) && bytes > INDEX_KEY_BUDGET_BYTES) {
      const remedy = index.origin === 'automatic' ? 'sort no shared view by this field first' : 'drop it first';
      problems.push({
        path,
        message: `sort index ${index.id} could no longer hold every value (${bytes} bytes, at most ${INDEX_KEY_BUDGET_BYTES}); ${remedy}`,
        fieldId: widened.id,
      });
    }
  }
  for (const rule of schema.uniqueRules) {
    const bytes = bytesOf(rule.fieldIds);
    if (rule.enforcement === 'btree' && rule.fieldIds.includes(widened.id) && bytes > INDEX_BUDGET_BYTES) {
      problems.push({
        path,
        message: `unique rule ${rule.id} could no longer hold every key (${bytes} bytes, at most ${INDEX_BUDGET_BYTES}); delete it and add it again, hashed`,
        fieldId: widened.id,
      });
    }
  }
  return problems;
}

function planUpdate(schema: TableSchema, change: z.infer<typeof UpdateField>, problems: FieldProblem[]): PlannedChange {
  const field = fieldOf(schema, change.fieldId, problems);
  if (!field) return { kind: 'update_field', fieldId: change.fieldId, required: false, options: {} };
  if (typeSpecOf(field.type).generated)
    problems.push({ path: ['change', 'fieldId'], message: `${field.type} fields have no settings to update` });
  const options =
    change.options === undefined
      ? field.options
      : parsedOptions(field.type, { ...field.options, ...change.options }, ['change', 'options'], problems);
  for (const name of COLUMN_SHAPING_OPTIONS[field.type] ?? []) {
    if (change.options && name in change.options && change.options[name] !== field.options[name]) {
      problems.push({
        path: ['change', 'options', name],
        message: `changing ${name} changes the column; use convert_field`,
      });
    }
  }
  if (
    field.type === 'json' &&
    change.options?.maxDepth !== undefined &&
    Number(change.options.maxDepth) < Number(field.options.maxDepth)
  ) {
    problems.push({
      path: ['change', 'options', 'maxDepth'],
      message: 'maxDepth cannot be lowered (existing documents would need re-validation); convert through text instead',
    });
  }
  if (problems.length === 0) problems.push(...keysThatNoLongerFit(schema, { ...field, options }));
  return { kind: 'update_field', fieldId: field.id, required: change.required ?? field.required, options };
}

function planConvert(
  schema: TableSchema,
  change: z.infer<typeof ConvertField>,
  problems: FieldProblem[],
): PlannedChange {
  const onUnconvertible = change.onUnconvertible ?? 'fail';
  const field = fieldOf(schema, change.fieldId, problems);
  const options = parsedOptions(change.type, change.options, ['change', 'options'], problems);
  const planned: PlannedChange = {
    kind: 'convert_field',
    fieldId: change.fieldId,
    type: change.type,
    options,
    onUnconvertible,
  };
  if (!field) return planned;
  const used = constraintsOn(schema, field.id);
  if (used.length > 0)
    problems.push({ path: ['change', 'fieldId'], message: `is part of ${used.join(', ')}; delete those first` });
  if (problems.length === 0 && conversionSql(field, { ...field, type: change.type, options }, 'v') === null) {
    problems.push({ path: ['change', 'type'], message: `a ${field.type} field cannot be converted to ${change.type}` });
  }
  if (onUnconvertible === 'empty' && field.required)
    problems.push({ path: ['change', 'onUnconvertible'], message: 'a required field cannot have cells emptied' });
  return planned;
}

/**
 * Checks a field change against the table at the expected version: every problem at once (422), or the planned
 * change. (Unique rules and foreign keys are checked by the rules' own code in src/graph/tables.)
 */
export function planChange(
  schema: TableSchema,
  change: Exclude<SchemaChange, { kind: 'add_unique_rule' | 'add_foreign_key' }>,
  newFieldId: string,
): Planned {
  const problems: FieldProblem[] = [];
  switch (change.kind) {
    case 'add_field': {
      const input = change.field as FieldInput;
      problems.push(...nameProblems(schema, input.name, null, ['change', 'field', 'name']));
      if (schema.fields.length >= MAX_FIELDS_PER_TABLE)
        problems.push({ path: ['change'], message: `a table may have at most ${MAX_FIELDS_PER_TABLE} fields` });
      const field = {
        id: newFieldId,
        name: input.name,
        type: input.type,
        required: input.required ?? false,
        options: resolvedOptions(input.type, input.options),
      };
      return { change: { kind: 'add_field', field }, problems };
    }
    case 'rename_field': {
      const field = fieldOf(schema, change.fieldId, problems);
      if (field) problems.push(...nameProblems(schema, change.name, field.id, ['change', 'name']));
      return { change, problems };
    }
    case 'update_field':
      return { change: planUpdate(schema, change, problems), problems };
    case 'convert_field':
      return { change: planConvert(schema, change, problems), problems };
    case 'delete_field': {
      const field = fieldOf(schema, change.fieldId, problems);
      if (field) {
        const used = constraintsOn(schema, field.id);
        if (used.length > 0)
          problems.push({ path: ['change', 'fieldId'], message: `is part of ${used.join(', ')}; delete those first` });
        if (schema.fields.length === 1)
          problems.push({ path: ['change', 'fieldId'], message: 'a table keeps at least one field' });
      }
      return { change, problems };
    }
    case 'add_index': {
      const method = change.using ?? 'btree';
      const { keys, problems: keyProblems } =
        method === 'btree'
          ? indexKeysOf(
              schema.fields,
              change.fields!.map((item) => ({ field: item.field, direction: item.direction! })),
              ['change', 'fields'],
            )
          : textIndexKeysOf(schema, method, change.fields?.[0]?.field);
      problems.push(...keyProblems);
      const same = schema.indexes.find(
        (index) => (index.method ?? 'btree') === method && signatureOf(index.keys) === signatureOf(keys),
      );
      if (same?.origin === 'explicit' && problems.length === 0)
        problems.push({ path: ['change', 'fields'], message: `the same index already exists (${same.id})` });
      return { change: { kind: 'add_index', indexId: same?.id ?? newFieldId, keys, method }, problems };
    }
    case 'drop_index': {
      const index = schema.indexes.find((candidate) => candidate.id === change.indexId);
      if (!index) problems.push({ path: ['change', 'indexId'], message: 'is not an index of this table' });
      else if (index.origin === 'automatic') {
        problems.push({
          path: ['change', 'indexId'],
          message: 'is an automatic index of a shared view’s order; it goes when no shared view is sorted that way',
        });
      }
      return { change, problems };
    }
    case 'reorder_fields': {
      const current = new Set(schema.fields.map((field) => field.id));
      const given = new Set(change.fieldIds);
      if (given.size !== change.fieldIds.length)
        problems.push({ path: ['change', 'fieldIds'], message: 'names a field twice' });
      if (given.size !== current.size || [...given].some((id) => !current.has(id))) {
        problems.push({ path: ['change', 'fieldIds'], message: 'must list every field of the table exactly once' });
      }
      return { change, problems };
    }
  }
}
