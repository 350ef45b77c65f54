import { z } from 'zod';
import { Id, SchemaVersion } from '../../../kernel/formats.ts';

/*
 * What the schema-change kinds answer as a job's `result`; the OpenAPI `Job` reads these through JOB_RESULTS
 * (src/jobs/kinds/results.ts). A change's cutover bumps the table's schema version, which every result reports.
 */

const Count = z.number().int().min(0);

export const FieldChangeResult = z
  .strictObject({ fieldId: Id, schemaVersion: SchemaVersion })
  .meta({ id: 'FieldChangeResult', description: 'add_field, rename_field, update_field, delete_field.' });
export type FieldChangeResult = z.infer<typeof FieldChangeResult>;

export const ReorderFieldsResult = z
  .strictObject({ fieldIds: z.array(Id), schemaVersion: SchemaVersion })
  .meta({ id: 'ReorderFieldsResult' });
export type ReorderFieldsResult = z.infer<typeof ReorderFieldsResult>;

/** The `unconvertible.jsonl` artifact of a conversion: at most 100,000 lines (`truncated` says more were found). */
export const UnconvertibleReport = z
  .strictObject({
    name: z.string(),
    size: Count.describe('Bytes.'),
    sha256: z.string().regex(/^[0-9a-f]{64}$/),
    rows: Count.describe('Rows listed in the report.'),
    truncated: z.boolean(),
  })
  .meta({ id: 'UnconvertibleReport' });
export type UnconvertibleReport = z.infer<typeof UnconvertibleReport>;

export const ConvertFieldResult = z
  .strictObject({
    fieldId: Id,
    schemaVersion: SchemaVersion,
    converted: Count,
    emptied: Count.describe('Values that could not convert and were emptied (onUnconvertible: empty).'),
    report: UnconvertibleReport,
  })
  .meta({ id: 'ConvertFieldResult', description: 'convert_field that cut over (succeeded or partially completed).' });

export const ConvertFieldRefusedResult = z
  .strictObject({ unconvertible: Count.min(1), report: UnconvertibleReport })
  .meta({
    id: 'ConvertFieldRefusedResult',
    description: 'convert_field with onUnconvertible: fail that found values it cannot convert: the job failed.',
  });

export const AddIndexResult = z
  .strictObject({ indexId: Id, schemaVersion: SchemaVersion })
  .meta({ id: 'AddIndexResult' });

export const DropIndexResult = z
  .strictObject({
    indexId: Id,
    dropped: z.boolean(),
    keptForViews: z.boolean().describe('A shared view’s order still needs the index: it stays, as automatic.'),
    schemaVersion: SchemaVersion,
  })
  .meta({ id: 'DropIndexResult' });

export const ApplySchemaChangeResult = z
  .union([ConvertFieldResult, ConvertFieldRefusedResult, AddIndexResult, DropIndexResult])
  .meta({ id: 'ApplySchemaChangeResult', description: 'convert_field, add_index or drop_index.' });
export type ApplySchemaChangeResult = z.infer<typeof ApplySchemaChangeResult>;

export const CreateUniqueRuleResult = z
  .strictObject({ ruleId: Id, schemaVersion: SchemaVersion })
  .meta({ id: 'CreateUniqueRuleResult' });
export type CreateUniqueRuleResult = z.infer<typeof CreateUniqueRuleResult>;

export const CreateForeignKeyResult = z
  .strictObject({ foreignKeyId: Id, schemaVersion: SchemaVersion })
  .meta({ id: 'CreateForeignKeyResult' });
export type CreateForeignKeyResult = z.infer<typeof CreateForeignKeyResult>;

export const DeleteUniqueRuleResult = z
  .strictObject({ ruleId: Id, deleted: z.literal(true), schemaVersion: SchemaVersion })
  .meta({ id: 'DeleteUniqueRuleResult' });
export type DeleteUniqueRuleResult = z.infer<typeof DeleteUniqueRuleResult>;

export const UpdateTableResult = z
  .union([
    z.strictObject({ indexId: Id, state: z.literal('ready') }),
    z.strictObject({ indexId: Id, dropped: z.literal(true) }),
  ])
  .meta({
    id: 'UpdateTableResult',
    description: 'An automatic index for shared views’ orders: built (`ready`) or dropped (no view needs it).',
  });
export type UpdateTableResult = z.infer<typeof UpdateTableResult>;
