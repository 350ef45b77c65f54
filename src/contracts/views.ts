import { z } from 'zod';
import { FilterExpression, OrderBy } from '../data/filter.ts';
import { VIEW_VISIBILITIES } from '../data/view-visibility.ts';
import { Id, SchemaVersion, Timestamp, VersionString } from '../kernel/formats.ts';

/**
 * Saved views (spec 2.2, 2.3): every body and response of the domain. The GraphQL inputs validate with them, REST
 * validates and documents with them, and the OpenAPI document is generated from them. How a definition fits its
 * table (its fields) is the domain's check (src/graph/views/definition.ts), not a shape.
 */

/**
 * A view definition (spec 2.3), checked in two layers. The shape (this zod schema, every limit of spec §8) is a
 * 422 wherever it is broken. The fit against the table (`definitionProblems`) is a 422 when a view is written —
 * the client names the schema version it wrote against — and, when the table has changed since, the same
 * problems are reported on reads as `validationErrors` while the view keeps loading (docs/decisions/views.md).
 */
export const MAX_COLUMNS = 200;
export const MAX_VALIDATION_ERRORS = 200;

export const ViewQuery = z.strictObject({ where: FilterExpression.optional(), orderBy: OrderBy.optional() });

export const ViewDefinition = z.strictObject({
  columnOrder: z.array(Id).max(MAX_COLUMNS),
  columnWidths: z
    .record(z.string().min(1).max(64), z.number().min(40).max(2000))
    .refine((widths) => Object.keys(widths).length <= MAX_COLUMNS, `at most ${MAX_COLUMNS} columns`),
  frozenColumns: z.number().int().min(0).max(MAX_COLUMNS),
  hiddenColumns: z.array(Id).max(MAX_COLUMNS),
  query: ViewQuery,
});
export type ViewDefinition = z.infer<typeof ViewDefinition>;

export const ViewName = z.string().trim().min(1).max(120);
export const Visibility = z.enum(VIEW_VISIBILITIES);

export const CreateViewBody = z.strictObject({
  expectedSchemaVersion: SchemaVersion,
  name: ViewName,
  visibility: Visibility,
  definition: ViewDefinition,
});
export const UpdateViewBody = z
  .strictObject({
    expectedVersion: VersionString,
    expectedSchemaVersion: SchemaVersion.optional(),
    name: ViewName.optional(),
    visibility: Visibility.optional(),
    definition: ViewDefinition.optional(),
  })
  .refine((body) => body.definition === undefined || body.expectedSchemaVersion !== undefined, {
    path: ['expectedSchemaVersion'],
    message: 'is required when the definition changes',
  });
export const DeleteViewBody = z.strictObject({ expectedVersion: VersionString });
export type CreateViewBody = z.infer<typeof CreateViewBody>;
export type UpdateViewBody = z.infer<typeof UpdateViewBody>;
export type DeleteViewBody = z.infer<typeof DeleteViewBody>;

/** Spec 2.2: all fields required, no others. */
export const SavedViewResponse = z.strictObject({
  id: Id,
  tableId: Id,
  name: z.string().min(1).max(120),
  visibility: Visibility,
  ownerUserId: Id.nullable(),
  ownerName: z.string(),
  version: VersionString,
  schemaVersion: SchemaVersion,
  canEdit: z.boolean(),
  canChangeVisibility: z.boolean(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  definition: ViewDefinition,
  validationErrors: z.array(z.string()).max(MAX_VALIDATION_ERRORS),
});

/** Spec 2.8. */
export const ViewDeletionResponse = z.strictObject({ id: Id, deleted: z.boolean(), version: VersionString });
