import { z } from 'zod';
import { FIELD_TYPES, FieldInput, MAX_FIELDS_PER_TABLE } from '../data/field-types.ts';
import { FilterExpression } from '../data/filter.ts';
import { KeyFieldReferences } from '../data/unique-keys.ts';
import { Id, SchemaVersion, Timestamp, VersionString } from '../kernel/formats.ts';
import { ResourceName } from './resources.ts';

/**
 * Tables, their fields, unique rules and foreign keys (spec 2.5, 2.13, endpoints 5 and 14): every body and response
 * of the domain. The GraphQL inputs validate with them once, REST validates and documents with them, and the
 * OpenAPI document is generated from them. How a rule or key fits its table is the domain's check
 * (src/graph/tables/unique-rules.ts, foreign-keys.ts), not a shape. No side effects.
 */

const caseInsensitiveDuplicates = (names: string[]) => {
  const seen = new Set<string>();
  return names.map((name) => {
    const folded = name.toLowerCase();
    const duplicate = seen.has(folded);
    seen.add(folded);
    return duplicate;
  });
};

/** POST …/tables and `createTable(input:)`. */
export const CreateTableBody = z
  .strictObject({
    name: ResourceName,
    fields: z.array(FieldInput).min(1).max(MAX_FIELDS_PER_TABLE),
  })
  .superRefine((body, context) => {
    caseInsensitiveDuplicates(body.fields.map((field) => String(field.name))).forEach((duplicate, index) => {
      if (duplicate)
        context.addIssue({
          code: 'custom',
          path: ['fields', index, 'name'],
          message: 'field names must be unique ignoring case',
        });
    });
  });
export type CreateTableBody = z.infer<typeof CreateTableBody>;

/**
 * PATCH …/tables/{tableId} and `updateTable(input:)`. A rename touches only the catalog row and leaves
 * `schemaVersion` alone: rows, views and imports address fields by id, never by the table's name.
 */
export const UpdateTableBody = z.strictObject({ expectedVersion: VersionString, name: ResourceName });
export type UpdateTableBody = z.infer<typeof UpdateTableBody>;

/** POST …/unique-rules and `createUniqueRule(input:)`: partial when the rule has a `where`. */
export const CreateUniqueRuleBody = z.strictObject({
  fieldIds: KeyFieldReferences,
  where: FilterExpression.optional(),
  expectedSchemaVersion: SchemaVersion.optional(),
});
export type CreateUniqueRuleBody = z.infer<typeof CreateUniqueRuleBody>;

/** POST …/foreign-keys and `createForeignKey(input:)`: to an unconditional unique rule in the same database. */
export const CreateForeignKeyBody = z.strictObject({
  fieldIds: KeyFieldReferences,
  referencedTableId: Id,
  referencedRuleId: Id,
  expectedSchemaVersion: SchemaVersion.optional(),
});
export type CreateForeignKeyBody = z.infer<typeof CreateForeignKeyBody>;

export const FieldResponse = z.strictObject({
  id: Id,
  name: z.string().min(1).max(64),
  type: z.enum(FIELD_TYPES),
  required: z.boolean(),
  options: z.record(z.string(), z.unknown()),
  position: z.number().int().min(0),
});

export const TableResponse = z.strictObject({
  id: Id,
  orgId: Id,
  databaseId: Id,
  name: z.string().min(1).max(120),
  state: z.enum(['active']),
  version: VersionString,
  schemaVersion: SchemaVersion,
  fields: z.array(FieldResponse),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

/** Spec 2.13. */
export const ForeignKeyResponse = z.strictObject({
  id: Id,
  tableId: Id,
  fieldIds: z.array(Id),
  referencedTableId: Id,
  referencedTableName: z.string(),
  referencedRuleId: Id,
  referencedFieldIds: z.array(Id),
  referencedFieldNames: z.array(z.string()),
  state: z.enum(['active']),
});

export const ForeignKeyDeletionResponse = z.strictObject({ id: Id, deleted: z.literal(true), mutationId: Id });

export const UniqueRuleResponse = z.strictObject({
  id: Id,
  tableId: Id,
  fieldIds: z.array(Id),
  where: z.unknown(),
  state: z.enum(['active']),
  referenceable: z
    .boolean()
    .describe('whether a foreign key can reference the rule (unconditional and not hash-enforced)'),
  createdAt: Timestamp,
});

export const SortIndexResponse = z.strictObject({
  id: Id,
  keys: z
    .array(z.strictObject({ fieldId: Id, direction: z.enum(['asc', 'desc']) }))
    .min(1)
    .max(500),
  origin: z.enum(['explicit', 'automatic']),
  state: z.enum(['building', 'ready']),
  method: z
    .enum(['btree', 'trigram', 'search'])
    .describe(
      'btree: a sort index; trigram: one text field, for POST …/rows/similar; ' +
        'search: the table’s text-like fields, for search',
    ),
  createdAt: Timestamp,
});

/** GET …/tables/{tableId}/schema: the runtime definition of a table. */
export const TableSchemaResponse = z.strictObject({
  tableId: Id,
  schemaVersion: SchemaVersion,
  fields: z.array(FieldResponse),
  uniqueRules: z.array(UniqueRuleResponse),
  foreignKeys: z.array(ForeignKeyResponse),
  indexes: z.array(SortIndexResponse),
});
