import { z } from 'zod';
import { pgExecutor, type SqlExecutor } from '../../../db/sql.ts';
import type { FieldDefinition } from '../../../data/field-types.ts';
import { DomainError } from '../../../kernel/errors.ts';
import { loadTableHead, readSchema, schemaVersionConflict, type TableSchema } from '../../../catalog/table-schema.ts';
import type { JobHandler, JobOutcome, JobRun } from '../../engine/handler.ts';
import type { JobKind } from '../../engine/kinds.ts';
import { CHANGE_JOBS, PlannedChange } from './plan.ts';
import { bump, lockVersion } from './steps.ts';

/**
 * What the schema-change kinds (endpoint 5) share: the payload, the table's schema as the change expects it, and
 * the handler around a kind's change. Every change ends in one short transaction that holds the table's catalog row,
 * re-checks the expected schema version, applies the change and bumps `schemaVersion`; its outcome is then in the
 * journal, so a rerun answers it without doing anything again.
 */
export const SchemaChangePayload = z.object({
  orgId: z.string(),
  databaseId: z.string(),
  tableId: z.string(),
  expectedSchemaVersion: z.number().int(),
  change: PlannedChange,
  summary: z.string(),
});
export type SchemaChangePayload = z.infer<typeof SchemaChangePayload>;

/** The last checkpoint of a finished change: its outcome. */
export type ChangeDone<Result> = { phase: 'done'; outcome: JobOutcome<Result> };

export type SchemaChangeRun<Journal> = JobRun<SchemaChangePayload, Journal>;

export type ChangeOf<Kind extends PlannedChange['kind']> = Extract<PlannedChange, { kind: Kind }>;

/** The table's schema, provided it is still at the version the change was planned against (409 otherwise). */
export async function schemaOf(run: SchemaChangeRun<unknown>): Promise<TableSchema> {
  const { orgId, databaseId, tableId, expectedSchemaVersion } = run.payload;
  const head = await loadTableHead(pgExecutor(run.pool), { orgId, databaseId, tableId });
  if (head.schemaVersion !== expectedSchemaVersion)
    throw schemaVersionConflict(expectedSchemaVersion, head.schemaVersion);
  return readSchema(run.prisma, head);
}

export function fieldIn(schema: TableSchema, fieldId: string): FieldDefinition {
  const field = schema.fieldsById.get(fieldId);
  if (!field) throw new DomainError('RESOURCE_NOT_FOUND', 'The field no longer exists.');
  return field;
}

interface SchemaChangeKind<Journal, Result> {
  kind: JobKind;
  result: z.ZodType<Result>;
  /** Runs (or resumes) the change until the journal holds its outcome (`phase: 'done'`). */
  change(run: SchemaChangeRun<Journal>, schema: TableSchema): Promise<void>;
  discard?(run: SchemaChangeRun<Journal>): Promise<void>;
}

/** A schema-change kind's handler: the payload, the event of the change it carries, the outcome from the journal. */
export function schemaChangeHandler<Journal extends { phase?: string }, Result>(
  kind: SchemaChangeKind<Journal, Result>,
): JobHandler<SchemaChangePayload, Journal, Result> {
  return {
    kind: kind.kind,
    payload: SchemaChangePayload,
    result: kind.result,
    successEvent: (payload) => CHANGE_JOBS[payload.change.kind].successEvent,
    describe: (payload) => payload.summary,
    async run(run) {
      if (run.journal.phase !== 'done') await kind.change(run, await schemaOf(run));
      return (run.journal as unknown as ChangeDone<Result>).outcome;
    },
    ...(kind.discard ? { discard: kind.discard } : {}),
  };
}

/**
 * A change that is one transaction (add, rename, update settings, delete, reorder): `apply` runs after the version
 * check, and its answer with the bumped `schemaVersion` is the result.
 */
export function directChange<Result extends { schemaVersion: number }>(
  kind: JobKind,
  result: z.ZodType<Result>,
  apply: (
    sql: SqlExecutor,
    run: SchemaChangeRun<unknown>,
    schema: TableSchema,
  ) => Promise<Omit<Result, 'schemaVersion'>>,
): JobHandler<SchemaChangePayload, ChangeDone<Result>, Result> {
  return schemaChangeHandler<ChangeDone<Result>, Result>({
    kind,
    result,
    change: (run, schema) =>
      run.step(async (sql) => {
        await lockVersion(sql, run.payload);
        const applied = await apply(sql, run, schema);
        const schemaVersion = await bump(sql, run.payload.tableId);
        const outcome: JobOutcome<Result> = {
          state: 'succeeded',
          result: { ...applied, schemaVersion } as Result,
          summary: run.payload.summary,
        };
        return { journal: { phase: 'done', outcome }, progress: { done: 1, total: 1 } };
      }),
  });
}

/** The payload's change, which must be one this kind runs (CHANGE_JOBS maps each change to one kind). */
export function changeOf<Kind extends PlannedChange['kind']>(
  payload: SchemaChangePayload,
  ...kinds: Kind[]
): ChangeOf<Kind> {
  const { change } = payload;
  if (!(kinds as string[]).includes(change.kind)) throw new Error(`not a ${kinds.join(' or ')} change: ${change.kind}`);
  return change as ChangeOf<Kind>;
}
