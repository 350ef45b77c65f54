import { describe, expect, it } from 'vitest';
import { sqlPoolOf } from '../src/db/prisma.ts';
import { startJobRunner } from '../src/jobs/engine/runner.ts';
import { JOB_HANDLERS } from '../src/jobs/kinds/registry.ts';
import { startWorker } from '../src/jobs/start-worker.ts';
import { createLogger } from '../src/kernel/log.ts';
import { requestExport } from './helpers/exports.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { waitForJob } from './helpers/jobs.ts';
import { appliedChange } from './helpers/schema-changes.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { addUniqueRule, createRow, createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Issue 26 §11: an export queued before a schema change fails with SCHEMA_VERSION_CONFLICT only when the change
 * touches what it reads. No worker runs beside the server: each schema change runs on a runner that claims only
 * schema work, so the export stays queued until the test runs it.
 */
const suite = useServerWithOrg({ RUN_WORKER: 'false' });
const admin = () => suite.org.adminKey;
const EXPORT_KINDS = new Set(['exportRows', 'exportView', 'exportDatabase']);

async function withSchemaRunner<T>(work: () => Promise<T>): Promise<T> {
  const { config } = suite.server;
  const runner = startJobRunner({
    pool: sqlPoolOf(suite.server.prisma),
    prisma: suite.server.prisma,
    config,
    log: createLogger('silent'),
    handlers: JOB_HANDLERS.filter((handler) => !EXPORT_KINDS.has(handler.kind)),
    concurrency: 1,
    leaseSeconds: config.JOB_LEASE_SECONDS,
    pollMs: config.JOB_POLL_MS,
  });
  try {
    return await work();
  } finally {
    await runner.stop();
  }
}

async function runQueued(statusUrl: string): Promise<any> {
  const worker = startWorker(suite.server.prisma, suite.server.config, createLogger('silent'));
  try {
    return await waitForJob(suite.server, admin(), statusUrl);
  } finally {
    await worker.stop();
  }
}

async function people(): Promise<TestTable> {
  const table = await createTable(suite.server, suite.org, [
    { name: 'Name', type: 'text' },
    { name: 'Code', type: 'text', options: { maxLength: 20 } },
    { name: 'Other', type: 'integer' },
  ]);
  expect(
    (
      await createRow(suite.server, admin(), table, {
        [table.fields.Name!]: 'Ada',
        [table.fields.Code!]: 'A1',
        [table.fields.Other!]: 1,
      })
    ).status,
  ).toBe(201);
  return table;
}

async function queuedExport(table: TestTable, body: Record<string, unknown>): Promise<string> {
  const accepted = await requestExport(suite.server, admin(), table, body);
  expect(accepted.status, accepted.text).toBe(202);
  return accepted.body.statusUrl;
}

describe('an export queued before a schema change', () => {
  it('succeeds when a unique rule over an exported field is added, and when it is deleted', async () => {
    const table = await people();
    const beforeAdd = await queuedExport(table, { format: 'csv' });
    const rule = await withSchemaRunner(() =>
      addUniqueRule(suite.server, admin(), table, { fieldIds: [table.fields.Code!] }),
    );
    expect(rule.job.state, JSON.stringify(rule.job)).toBe('succeeded');
    const beforeDelete = await queuedExport(rule.table, { format: 'csv' });
    await withSchemaRunner(async () => {
      const accepted = await suite.server.request('DELETE', `${table.path}/unique-rules/${rule.ruleId}`, {
        token: admin(),
        idempotencyKey: idempotencyKey(),
      });
      expect(accepted.status, accepted.text).toBe(202);
      expect((await waitForJob(suite.server, admin(), accepted.body.statusUrl)).state).toBe('succeeded');
    });
    for (const statusUrl of [beforeAdd, beforeDelete]) {
      const job = await runQueued(statusUrl);
      expect(job.state, JSON.stringify(job.error)).toBe('succeeded');
    }
  });

  it('succeeds when a field it does not read is deleted; fails naming the field when one it reads is', async () => {
    const table = await people();
    const narrow = await queuedExport(table, { format: 'csv', fieldIds: ['Name', 'Code'] });
    const everything = await queuedExport(table, { format: 'jsonl' });
    await withSchemaRunner(() => appliedChange(suite, table, { kind: 'delete_field', fieldId: table.fields.Other! }));
    const kept = await runQueued(narrow);
    expect(kept.state, JSON.stringify(kept.error)).toBe('succeeded');
    const failed = await runQueued(everything);
    expect(failed).toMatchObject({
      state: 'failed',
      error: {
        code: 'SCHEMA_VERSION_CONFLICT',
        details: {
          expectedSchemaVersion: table.schemaVersion,
          currentSchemaVersion: table.schemaVersion + 1,
          fieldIds: [table.fields.Other],
        },
      },
    });
  });

  it('fails when a field its filter names is renamed, not when an exported column is', async () => {
    const table = await people();
    const filtered = await queuedExport(table, {
      format: 'csv',
      fieldIds: ['Name'],
      where: { field: 'Code', op: 'eq', value: 'A1' },
    });
    const plain = await queuedExport(table, { format: 'csv', fieldIds: ['Name', 'Code'] });
    await withSchemaRunner(() =>
      appliedChange(suite, table, { kind: 'rename_field', fieldId: table.fields.Code!, name: 'Key' }),
    );
    expect((await runQueued(filtered)).error).toMatchObject({
      code: 'SCHEMA_VERSION_CONFLICT',
      details: { fieldIds: [table.fields.Code] },
    });
    const renamed = await runQueued(plain);
    expect(renamed.state, JSON.stringify(renamed.error)).toBe('succeeded');
  });
});
