import type pg from 'pg';
import { outsideTransaction, pgExecutor, type SqlExecutor } from '../../../db/sql.ts';
import {
  createSortIndex,
  createTextIndex,
  dropSortIndex,
  indexKeysOf,
  MAX_INDEXES_PER_TABLE,
  signatureOf,
  sortIndexState,
  viewIndexKeys,
  type IndexKey,
} from '../../../data/sort-indexes.ts';
import { DomainError } from '../../../kernel/errors.ts';
import { newId } from '../../../kernel/ids.ts';
import type { TableSchema } from '../../../catalog/table-schema.ts';
import type { JobOutcome, JobRun } from '../../engine/handler.ts';
import type { PlannedChange } from './plan.ts';
import type { ApplySchemaChangeResult } from './results.ts';
import { bump, lockVersion } from './steps.ts';
import * as catalog from '../../../catalog/table-indexes.ts';
import { insertJob, notifyWorkers } from '../../engine/sql/queue.ts';
import type { Statement } from '../../../data/statement.ts';

/**
 * Sort indexes built and dropped online (issue 14). `add_index` / `drop_index` are schema changes (endpoint 5,
 * serial per table, cutover bumps `schemaVersion`); the indexes that shared views' orders need are built and
 * dropped by `updateTable` jobs that never move `schemaVersion`. Both build with CREATE INDEX CONCURRENTLY outside
 * any transaction. A worker killed mid-build leaves an INVALID index: the rerun drops it and builds again.
 */
type Target = { orgId: string; databaseId: string; tableId: string; expectedSchemaVersion: number; summary: string };
type AddIndex = Extract<PlannedChange, { kind: 'add_index' }>;
type DropIndex = Extract<PlannedChange, { kind: 'drop_index' }>;
type IndexOutcome = JobOutcome<ApplySchemaChangeResult>;
export type IndexChangeJournal =
  | { phase: 'build'; indexId: string; keys: IndexKey[] }
  | { phase: 'cutover'; indexId: string }
  | { phase: 'drop'; outcome: IndexOutcome }
  | { phase: 'done'; outcome: IndexOutcome };
type ChangeJournal = IndexChangeJournal;
type ChangeRun = JobRun<Target & { change: PlannedChange }, ChangeJournal>;

async function query<T>(sql: SqlExecutor, statement: { sql: string; params: unknown[] }): Promise<T[]> {
  return sql.run<T>(statement);
}

/** Builds the index unless a valid one is there already; an INVALID leftover of an interrupted build is dropped first. */
export async function ensureSortIndex(
  pool: pg.Pool,
  target: { databaseId: string; tableId: string },
  indexId: string,
  keys: readonly IndexKey[],
  build?: Statement,
): Promise<void> {
  await outsideTransaction(pool, async (sql) => {
    const [state] = await query<{ valid: boolean }>(sql, sortIndexState(target.databaseId, indexId));
    if (state?.valid) return;
    if (state) await sql.run(dropSortIndex(target.databaseId, indexId));
    await sql.run(build ?? createSortIndex(target.databaseId, target.tableId, indexId, keys));
  });
}

/** The build of an index of any method: a text index (issue 28) over its fields' folded text, else a sort index. */
function buildOf(
  schema: TableSchema,
  indexId: string,
  method: catalog.IndexMethod,
  keys: readonly IndexKey[],
): Statement | undefined {
  if (method === 'btree') return undefined;
  return createTextIndex(
    schema.databaseId,
    schema.tableId,
    indexId,
    method,
    keys.map((key) => schema.fieldsById.get(key.fieldId)!),
  );
}

async function isValid(sql: SqlExecutor, databaseId: string, indexId: string): Promise<boolean> {
  const [state] = await query<{ valid: boolean }>(sql, sortIndexState(databaseId, indexId));
  return state?.valid === true;
}

/** The signatures the table's shared views are sorted by (only orders that can be indexed). */
export async function neededSignatures(
  sql: SqlExecutor,
  schema: Pick<TableSchema, 'tableId' | 'fields'>,
): Promise<Map<string, IndexKey[]>> {
  const views = await query<{ orderBy: unknown }>(sql, catalog.selectSharedOrders(schema.tableId));
  const needed = new Map<string, IndexKey[]>();
  for (const view of views) {
    const keys = viewIndexKeys(schema.fields, view.orderBy);
    if (keys) needed.set(signatureOf(keys), keys);
  }
  return needed;
}

function capacityLimit(): DomainError {
  return new DomainError(
    'CAPACITY_LIMIT',
    `A table may have at most ${MAX_INDEXES_PER_TABLE} indexes, automatic ones included; drop one first.`,
    {
      details: { limit: MAX_INDEXES_PER_TABLE, scope: 'table indexes' },
    },
  );
}

async function addIndex(run: ChangeRun, schema: TableSchema, change: AddIndex): Promise<void> {
  if (!run.journal.phase) {
    await run.step(async (sql) => {
      await lockVersion(sql, run.payload);
      await sql.run(catalog.lockTableIndexes(schema.tableId));
      const existing = await query<catalog.IndexRow>(sql, catalog.selectTableIndexes(schema.tableId));
      const signature = catalog.indexSignatureOf(change.method, change.keys);
      if (!existing.some((index) => index.signature === signature) && existing.length >= MAX_INDEXES_PER_TABLE)
        throw capacityLimit();
      const [row] = await query<catalog.IndexRow>(
        sql,
        catalog.insertTableIndex(change.indexId, schema.tableId, change.keys, 'explicit', change.method),
      );
      await sql.run(catalog.bumpIndexVersion(schema.tableId));
      return { journal: { phase: 'build', indexId: row!.id, keys: change.keys }, progress: { done: 0, total: 2 } };
    });
  }
  if (run.journal.phase === 'build') {
    const { indexId, keys } = run.journal as Extract<ChangeJournal, { phase: 'build' }>;
    await ensureSortIndex(run.pool, schema, indexId, keys, buildOf(schema, indexId, change.method, keys));
    await run.step(async () => ({ journal: { phase: 'cutover', indexId }, progress: { done: 1, total: 2 } }));
  }
  if (run.journal.phase === 'cutover') {
    const { indexId } = run.journal as Extract<ChangeJournal, { phase: 'cutover' }>;
    await run.step(async (sql) => {
      await lockVersion(sql, run.payload);
      if (!(await isValid(sql, schema.databaseId, indexId)))
        throw new Error('The index is missing or invalid at cutover');
      const [updated] = await query(sql, catalog.setIndexState(indexId, 'ready'));
      if (!updated)
        throw new DomainError(
          'RESOURCE_NOT_FOUND',
          'The index was removed while it was built (its field was deleted).',
        );
      await sql.run(catalog.bumpIndexVersion(schema.tableId));
      const schemaVersion = await bump(sql, schema.tableId);
      const outcome: IndexOutcome = {
        state: 'succeeded',
        result: { indexId, schemaVersion },
        summary: run.payload.summary,
      };
      return { journal: { phase: 'done', outcome }, progress: { done: 2, total: 2 } };
    });
  }
}

/**
 * drop_index: the row goes first (reads stop relying on the index), the index after, concurrently. An index that a
 * shared view's order still needs is kept and becomes automatic: it goes when no view needs it any more.
 */
async function dropIndex(run: ChangeRun, schema: TableSchema, change: DropIndex): Promise<void> {
  if (!run.journal.phase) {
    await run.step(async (sql) => {
      await lockVersion(sql, run.payload);
      await sql.run(catalog.lockTableIndexes(schema.tableId));
      const [row] = await query<catalog.IndexRow>(sql, catalog.selectTableIndex(change.indexId));
      if (!row) throw new DomainError('RESOURCE_NOT_FOUND', 'The index no longer exists.');
      const needed = (await neededSignatures(sql, schema)).has(row.signature);
      if (needed) await sql.run(catalog.setIndexOrigin(row.id, 'automatic'));
      else await sql.run(catalog.deleteTableIndex(row.id));
      await sql.run(catalog.bumpIndexVersion(schema.tableId));
      const schemaVersion = await bump(sql, schema.tableId);
      const outcome: IndexOutcome = {
        state: 'succeeded',
        result: { indexId: row.id, dropped: !needed, keptForViews: needed, schemaVersion },
        summary: run.payload.summary,
      };
      return {
        journal: needed ? { phase: 'done', outcome } : { phase: 'drop', outcome },
        progress: { done: 1, total: 2 },
      };
    });
  }
  if (run.journal.phase === 'drop') {
    const { outcome } = run.journal as Extract<ChangeJournal, { phase: 'drop' }>;
    await outsideTransaction(run.pool, (sql) => sql.run(dropSortIndex(schema.databaseId, change.indexId)));
    await run.step(async () => ({ journal: { phase: 'done', outcome }, progress: { done: 2, total: 2 } }));
  }
}

/** Runs (or resumes) add_index / drop_index to its end; the outcome is in the journal. */
export async function runIndexChange(run: ChangeRun, schema: TableSchema): Promise<void> {
  const change = run.payload.change;
  if (change.kind === 'add_index') await addIndex(run, schema, change);
  else if (change.kind === 'drop_index') await dropIndex(run, schema, change);
}

/** Undoes an add_index that will not cut over: its row (unless it was adopted and is ready) and its index. */
export async function abandonIndexChange(
  run: JobRun<Target & { change: PlannedChange }, Partial<ChangeJournal>>,
): Promise<void> {
  const journal = run.journal as Partial<{ indexId: string }>;
  if (run.payload.change.kind !== 'add_index' || !journal.indexId) return;
  const indexId = journal.indexId;
  const removed = await query(pgExecutor(run.pool), catalog.discardBuildingIndex(indexId, ['explicit']));
  if (removed.length > 0)
    await outsideTransaction(run.pool, (sql) => sql.run(dropSortIndex(run.payload.databaseId, indexId)));
}

/** delete_field: the column's indexes go with it (PostgreSQL drops them with the column), so do their rows. */
export async function forgetFieldIndexes(sql: SqlExecutor, tableId: string, fieldId: string): Promise<void> {
  const gone = await query(sql, catalog.deleteIndexesOnField(tableId, fieldId));
  if (gone.length > 0) await sql.run(catalog.bumpIndexVersion(tableId));
}

/**
 * convert_field's cutover drops the old column and its indexes with it: each index over the field is rebuilt over
 * the new column by an `updateTable` job (reads use no index until it is ready), or forgotten when the new type
 * cannot be indexed. Runs inside the cutover transaction, so the jobs exist exactly when the conversion does.
 */
export async function rebuildFieldIndexes(
  sql: SqlExecutor,
  run: JobRun<Target, unknown>,
  fields: TableSchema['fields'],
  fieldId: string,
): Promise<void> {
  const { orgId, databaseId, tableId } = run.payload;
  const indexes = await query<catalog.IndexRow>(sql, catalog.selectIndexesOnField(tableId, fieldId));
  for (const index of indexes) {
    const order = index.keys.map((key) => ({ field: key.fieldId, direction: key.direction }));
    // A text index over the field went with its column; it is not rebuilt over a new type (add it again).
    if (index.method !== 'btree' || indexKeysOf(fields, order, []).problems.length > 0) {
      await sql.run(catalog.deleteTableIndex(index.id));
      continue;
    }
    await sql.runEach([
      catalog.setIndexState(index.id, 'building'),
      insertJob({
        id: newId(),
        orgId,
        kind: 'updateTable',
        databaseId,
        tableId,
        serialKey: null,
        maxAttempts: 5,
        actor: run.job.actor,
        runAt: null,
        payload: {
          orgId,
          databaseId,
          tableId,
          indexId: index.id,
          summary: `Rebuild index ${index.id} after a field conversion`,
        },
      }),
    ]);
  }
  if (indexes.length > 0) await sql.runEach([catalog.bumpIndexVersion(tableId), notifyWorkers()]);
}
