import { z } from 'zod';
import type { ErrorCode } from './errors.ts';

/*
 * What `error.details` carries, per error code (spec §7 leaves it open): the one table the REST envelope, a job's
 * `error` and the OpenAPI document read, and that types every `new DomainError(code, …, { details })`. Every key is
 * optional, since one code is raised in several places that each say what they know (a 409 UNIQUE_CONFLICT of a
 * row write names the rule; of a rule build, the duplicate groups). The document lets details carry more keys than
 * listed (clients must tolerate them, spec §9); TypeScript does not, so a new key is declared here first.
 */

const Int = z.number().int();
const Count = Int.min(0);
const Version = z.union([z.string(), Int]).describe('A row, view, member or database version (decimal string).');
const FieldIds = z.array(z.string()).describe('The fields concerned, by id.');
const FieldNames = z.array(z.string()).describe('The same fields, by name.');
const CellValues = z.record(z.string(), z.json()).describe('Values by field id.');

export const FieldProblem = z
  .object({
    path: z.array(z.union([z.string(), Int])).describe('JSON path of the offending input.'),
    message: z.string(),
    fieldId: z.string().optional().describe('For cells and filters: the field concerned.'),
  })
  .meta({ id: 'FieldProblem' });

/** One failing operation of a row batch (POST …/rows/batch): every one is listed, the top-level code is the worst. */
const BatchFailure = z
  .object({
    index: Count,
    code: z.string(),
    message: z.string(),
    details: z.unknown().optional().describe('The details of that operation’s own error.'),
  })
  .meta({ id: 'BatchFailure' });
const Failures = z.array(BatchFailure).describe('Row batches: every failing operation by index.');

const ReferencingKey = z.looseObject({
  id: z.string(),
  tableId: z.string(),
  tableName: z.string(),
  trashed: z.boolean().optional(),
});

/** Each code's details, as shapes (zod object shapes: the document wraps them loose, TypeScript strict). */
const SHAPES = {
  BAD_REQUEST: { maxDepth: Int.optional(), problems: z.array(FieldProblem).optional() },
  VALIDATION_FAILED: {
    problems: z.array(FieldProblem).optional().describe('Each problem with the JSON path where it was found.'),
    failures: Failures.optional(),
    violations: Count.optional().describe('update_field: rows whose values the new settings would refuse.'),
    rowIds: z.array(z.string()).optional().describe('update_field: a sample of those rows.'),
    unconvertible: Count.optional().describe('convert_field with onUnconvertible: fail: values that cannot convert.'),
    line: Int.optional().describe('Import preview: the line where the file is malformed.'),
    format: z.string().optional(),
    limit: Count.optional(),
    rows: Count.optional().describe('XLSX export: rows the sheet would need.'),
  },
  SCHEMA_VERSION_CONFLICT: {
    expectedSchemaVersion: Int.optional(),
    currentSchemaVersion: Int.optional(),
    fieldIds: FieldIds.optional().describe('Export: the fields read whose definition changed.'),
    failures: Failures.optional(),
  },
  ROW_VERSION_CONFLICT: {
    expectedVersion: Version.nullable().optional(),
    currentVersion: Version.nullable().optional().describe('null: the row does not exist (any more).'),
    deleted: z.boolean().optional(),
    matchOn: z.string().optional().describe('Upsert: the unique rule the key was matched on.'),
    key: z.json().optional().describe('Upsert: the key no row holds.'),
    reason: z.string().optional().describe('`concurrent_write`: a deadlock with another write; retry.'),
    failures: Failures.optional(),
  },
  UNIQUE_CONFLICT: {
    ruleId: z.string().optional(),
    fieldIds: FieldIds.optional(),
    fieldNames: FieldNames.optional(),
    conflictsWith: Count.optional().describe('Row batch: the earlier operation writing the same values.'),
    duplicates: z
      .array(z.looseObject({ rowIds: z.array(z.string()), values: CellValues }))
      .optional()
      .describe('Unique rule build: groups of rows sharing values (at most 20).'),
    truncated: z.boolean().optional(),
    resource: z.string().optional().describe('Named resources: which kind already has the name or e-mail.'),
    fields: z.array(z.string()).optional(),
    name: z.string().optional(),
    failures: Failures.optional(),
  },
  FOREIGN_KEY_CONFLICT: {
    foreignKeyId: z.string().optional(),
    fieldIds: FieldIds.optional(),
    fieldNames: FieldNames.optional(),
    referencedTableId: z.string().optional(),
    referencingTableId: z.string().optional(),
    foreignKeys: z.array(ReferencingKey).optional().describe('The keys that still reference the rule or table.'),
    orphans: z
      .array(z.looseObject({ rowId: z.string(), values: CellValues }))
      .optional()
      .describe('Foreign key build: rows whose values the referenced table lacks (at most 20).'),
    truncated: z.boolean().optional(),
    failures: Failures.optional(),
  },
  AUTO_INCREMENT_EXHAUSTED: {
    fieldIds: FieldIds.optional(),
    fieldNames: FieldNames.optional(),
    failures: Failures.optional(),
  },
  ROW_LIMIT_REACHED: { limit: Count.optional(), failures: Failures.optional() },
  ROW_SIZE_LIMIT: { sizeBytes: Count.optional(), limitBytes: Count.optional(), failures: Failures.optional() },
  CAPACITY_LIMIT: {
    limit: Count.optional(),
    scope: z.string().optional().describe('What is full: `table indexes`, `shared`/`personal` views, the job queue.'),
    queued: Count.optional(),
    indexIds: z.array(z.string()).optional(),
  },
  PAYLOAD_TOO_LARGE: {
    limit: Count.optional(),
    length: Count.optional().describe('Import: the content’s characters.'),
    size: Count.optional().describe('Artifact: its bytes.'),
    url: z.string().optional().describe('Artifact: where to download it instead.'),
  },
  JOB_STATE_CONFLICT: {
    state: z.string().optional(),
    kind: z.string().optional(),
    importJobId: z.string().optional().describe('The import already started from this preview.'),
  },
  ARTIFACT_UNVERIFIED: {
    reason: z.string().optional(),
    name: z.string().optional(),
    backupId: z.string().optional(),
    path: z.string().optional(),
    expected: z.string().optional(),
    actual: z.string().optional(),
    expectedBytes: Count.optional(),
    actualBytes: Count.optional(),
    destination: z.string().optional(),
    bytesWritten: Count.optional(),
    bytesRead: Count.nullable().optional(),
  },
  ARTIFACT_EXPIRED: { backupId: z.string().optional(), expiredAt: z.string().optional() },
  DEPENDENCY_UNAVAILABLE: {
    dependency: z.string().optional().describe('`database`, `delivery-hook`'),
    status: Int.optional(),
    destination: z.string().optional().describe('A backup destination test: `local` or `s3`.'),
  },
  ACCESS_DENIED: { reason: z.string().optional() },
  FORBIDDEN: { requiredCapability: z.string().optional(), reason: z.string().optional() },
  INSUFFICIENT_SCOPE: { requiredScope: z.string().optional() },
  STEP_UP_REQUIRED: { maxAgeSeconds: Count.optional(), reason: z.string().optional() },
  DELEGATION_EXCEEDS_AUTHORITY: {
    requested: z.array(z.string()).optional(),
    held: z.array(z.string()).optional(),
    scopesLimited: z.boolean().optional(),
  },
  QUERY_TOO_COMPLEX: { limit: z.string().optional(), max: Count.optional() },
  IDEMPOTENCY_CONFLICT: { operation: z.string().optional().describe('The operation the key was first used for.') },
  RATE_LIMITED: { limit: z.string().optional(), scope: z.string().optional(), max: Count.optional() },
} satisfies Partial<Record<ErrorCode, z.ZodRawShape>>;

type Shapes = typeof SHAPES;
export type DetailedCode = keyof Shapes;

/** The details a code's error may carry (TypeScript's view: exactly the declared keys). */
export type ErrorDetailsOf<Code extends ErrorCode> = Code extends DetailedCode
  ? z.input<z.ZodObject<Shapes[Code]>>
  : never;

const componentName = (code: string) =>
  `${code
    .toLowerCase()
    .split('_')
    .map((word) => word[0]!.toUpperCase() + word.slice(1))
    .join('')}Details`;

/** The document's schema of each detailed code's details: the declared keys, more allowed. */
export const ERROR_DETAILS = Object.fromEntries(
  Object.entries(SHAPES).map(([code, shape]) => [code, z.looseObject(shape).meta({ id: componentName(code) })]),
) as unknown as { [Code in DetailedCode]: z.ZodType };

export function hasDeclaredDetails(code: ErrorCode): code is DetailedCode {
  return Object.hasOwn(SHAPES, code);
}
