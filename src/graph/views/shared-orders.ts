import type { TransactionClient } from '../../db/prisma.ts';
import { prismaExecutor } from '../../db/sql.ts';
import { MAX_INDEXES_PER_TABLE, type IndexKey } from '../../data/sort-indexes.ts';
import { newId } from '../../kernel/ids.ts';
import { neededSignatures } from '../../jobs/kinds/schema/index-changes.ts';
import * as catalog from '../../catalog/table-indexes.ts';
import type { Caller } from '../../kernel/caller.ts';
import { enqueueJob } from '../jobs/enqueue.ts';
import type { TableSchema } from '../../catalog/table-schema.ts';

/**
 * Automatic indexes (issue 14): after a shared view is saved, changed or deleted, in the same transaction, the
 * table gets an index for every shared view's orderBy that has none (while it has fewer than
 * MAX_INDEXES_PER_TABLE, declared ones included) and loses the automatic indexes no shared view needs any more.
 * The save only writes catalog rows and enqueues `updateTable` jobs that build or drop concurrently: it stays
 * fast, and the view reads rows (unindexed) before its index is ready. These jobs do not count against the org's
 * queue cap: a saved view must not fail because imports are queued, and each save enqueues at most two.
 */
export async function followSharedOrders(tx: TransactionClient, caller: Caller, schema: TableSchema): Promise<void> {
  const sql = prismaExecutor(tx);
  await sql.run(catalog.lockTableIndexes(schema.tableId));
  const needed = await neededSignatures(sql, schema);
  const existing = await sql.run<catalog.IndexRow>(catalog.selectTableIndexes(schema.tableId));
  const jobs: { indexId: string; summary: string }[] = [];
  const describe = (keys: readonly IndexKey[]) =>
    keys.map((key) => `${schema.fieldsById.get(key.fieldId)?.name ?? key.fieldId} ${key.direction}`).join(', ');
  for (const index of existing) {
    if (index.origin !== 'automatic' || needed.has(index.signature)) continue;
    await sql.run(catalog.deleteTableIndex(index.id));
    jobs.push({
      indexId: index.id,
      summary: `Drop the index on ${describe(index.keys)}: no shared view is sorted that way`,
    });
  }
  let count = existing.length - jobs.length;
  for (const [signature, keys] of needed) {
    if (count >= MAX_INDEXES_PER_TABLE || existing.some((index) => index.signature === signature)) continue;
    const indexId = newId();
    await sql.run(catalog.insertTableIndex(indexId, schema.tableId, keys, 'automatic'));
    jobs.push({ indexId, summary: `Index ${describe(keys)} for a shared view` });
    count += 1;
  }
  if (jobs.length === 0) return;
  await sql.run(catalog.bumpIndexVersion(schema.tableId));
  const { orgId, databaseId, tableId } = schema;
  for (const job of jobs) {
    await enqueueJob(tx, caller, {
      kind: 'updateTable',
      category: 'schema',
      orgId,
      databaseId,
      tableId,
      summary: `Queued: ${job.summary}`,
      payload: { orgId, databaseId, tableId, ...job },
      queueLimit: Number.MAX_SAFE_INTEGER,
    });
  }
}
