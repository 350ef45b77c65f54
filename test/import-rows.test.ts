import { describe, expect, it } from 'vitest';
import { JobHandleResponse } from '../src/contracts/jobs.ts';
import { JobResponse } from '../src/contracts/job-results.ts';
import { newId } from '../src/kernel/ids.ts';
import { expectError } from './helpers/expectations.ts';
import { addMember, createOrg, idempotencyKey } from './helpers/factories.ts';
import {
  allRows,
  importPreviewed,
  mappingOf,
  preview,
  reportOf,
  requestImport,
  tableActivity,
  waitForJob,
} from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import {
  addUniqueRule,
  createRow,
  createTable,
  refreshSchemaVersion,
  type FieldSpec,
  type TestTable,
} from './helpers/workspace.ts';

/** Import commit: `POST …/imports {previewJobId, expectedSchemaVersion, mode}` appends the previewed rows. */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;

const FIELDS: FieldSpec[] = [
  { name: 'Name', type: 'text', required: true },
  { name: 'Age', type: 'integer' },
  { name: 'Score', type: 'number', options: { precision: 8, scale: 2 } },
  { name: 'Active', type: 'boolean' },
  { name: 'Born', type: 'date' },
  { name: 'Seen', type: 'datetime' },
  { name: 'Colour', type: 'select', options: { choices: ['red', 'green'] } },
  { name: 'Tags', type: 'multiSelect', options: { choices: ['a', 'b', 'c'] } },
  { name: 'Doc', type: 'json' },
  { name: 'Mail', type: 'email' },
  { name: 'Site', type: 'url' },
  { name: 'No', type: 'autoNumber' },
];
const IMPORTED = FIELDS.filter((field) => field.type !== 'autoNumber').map((field) => field.name);
const HEADER = IMPORTED.join(',');

async function previewOf(table: TestTable, content: string, fileName = 'people.csv') {
  const job = await preview(suite.server, admin(), table, { content, fileName, mapping: mappingOf(table, IMPORTED) });
  expect(job.state, JSON.stringify(job)).toBe('succeeded');
  return job;
}

/** Row values by field name. */
function named(table: TestTable, values: Record<string, unknown>): Record<string, unknown> {
  const names = Object.fromEntries(Object.entries(table.fields).map(([name, id]) => [id, name]));
  return Object.fromEntries(Object.entries(values).map(([id, value]) => [names[id], value]));
}

async function rowsByName(table: TestTable) {
  return (await allRows(suite.server, admin(), table)).map((row) => named(table, row.values));
}

/** The table's rows match its row_count and the affectedRows of its records.changed entries; returns their names. */
async function expectAccounted(table: TestTable): Promise<unknown[]> {
  const rows = await allRows(suite.server, admin(), table);
  const [{ counted }] = (await suite.server.prisma.$queryRawUnsafe<{ counted: number }[]>(
    `SELECT row_count::int AS counted FROM public.data_tables WHERE id = '${table.tableId}'`,
  )) as [{ counted: number }];
  const changes = await suite.server.prisma.activityEvent.findMany({
    where: { tableId: table.tableId, event: 'records.changed' },
  });
  expect({ counted, recorded: changes.reduce((sum, event) => sum + Number(event.affectedRows), 0) }).toEqual({
    counted: rows.length,
    recorded: rows.length,
  });
  return rows.map((row) => row.values[table.fields.Name!]);
}

describe('POST …/imports, valid-rows-only', () => {
  it('inserts the valid rows with exact typed values, ends partially_completed, and reports the skipped lines', async () => {
    const table = await createTable(suite.server, suite.org, FIELDS);
    const content = [
      HEADER,
      'Ada,36,12.5,true,1815-12-10,2024-03-01T10:00:00.000Z,red,"a,c","{""k"":[1,{""z"":true}]}",ada@example.com,https://example.com/ada',
      'Bob,old,,,,,,,,,',
      'Cy,,,,,,,,,,',
      ',1,,,,,,,,,',
      'Dee,-4,0.01,FALSE,2000-02-29,,green,[],"""text""",,',
    ].join('\r\n');
    const previewJob = await previewOf(table, content);
    const job = await importPreviewed(suite.server, admin(), table, previewJob.jobId, 'valid-rows-only');
    expect(JobResponse.safeParse(job).success, JSON.stringify(job)).toBe(true);
    expect(job).toMatchObject({
      kind: 'importRows',
      state: 'partially_completed',
      error: null,
      progress: { done: 5, total: 5 },
    });
    expect(job.result).toEqual({
      totalRows: 5,
      validRows: 3,
      invalidRows: 2,
      insertedRows: 3,
      skippedRows: 2,
      mode: 'valid-rows-only',
      report: {
        name: 'errors.jsonl',
        size: expect.any(Number),
        sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
        problems: 2,
        truncated: false,
      },
    });
    expect(
      (await reportOf(suite.server, admin(), job)).map(({ line, column, code }) => ({ line, column, code })),
    ).toEqual([
      { line: 3, column: 'Age', code: 'TYPE_MISMATCH' },
      { line: 5, column: 'Name', code: 'REQUIRED' },
    ]);
    const empty = Object.fromEntries(IMPORTED.map((name) => [name, null]));
    const rows = await rowsByName(table);
    expect(rows.map((row) => ({ ...row, No: typeof row.No }))).toEqual(
      expect.arrayContaining([
        {
          ...empty,
          No: 'number',
          Name: 'Ada',
          Age: 36,
          Score: 12.5,
          Active: true,
          Born: '1815-12-10',
          Seen: '2024-03-01T10:00:00.000Z',
          Colour: 'red',
          Tags: ['a', 'c'],
          Doc: { k: [1, { z: true }] },
          Mail: 'ada@example.com',
          Site: 'https://example.com/ada',
        },
        { ...empty, No: 'number', Name: 'Cy' },
        {
          ...empty,
          No: 'number',
          Name: 'Dee',
          Age: -4,
          Score: 0.01,
          Active: false,
          Born: '2000-02-29',
          Colour: 'green',
          Tags: [],
          Doc: 'text',
        },
      ]),
    );
    expect(rows).toHaveLength(3);
    // autoNumber values are generated in file order.
    const numbers = Object.fromEntries(rows.map((row) => [row.Name, row.No as number]));
    expect(numbers.Ada! < numbers.Cy! && numbers.Cy! < numbers.Dee!).toBe(true);
  });

  it('gives each inserted row its initial cell history, attributed to the importer and the import job', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'Name', type: 'text' },
      { name: 'Age', type: 'integer' },
      { name: 'No', type: 'autoNumber' },
    ]);
    const previewJob = await preview(suite.server, admin(), table, {
      content: 'Name\nAda\nBob\n',
      mapping: mappingOf(table, ['Name']),
    });
    const job = await importPreviewed(suite.server, admin(), table, previewJob.jobId, 'valid-rows-only');
    expect(job.state).toBe('succeeded');
    const actor = { id: suite.org.adminUserId, kind: 'user', name: 'Ada Admin' };
    for (const row of await allRows(suite.server, admin(), table)) {
      const history = await suite.server.request('GET', `${table.path}/rows/${row.id}/history?limit=100`, {
        token: admin(),
      });
      expect(history.status, history.text).toBe(200);
      const entries = history.body.data.map(({ changedAt: _changedAt, ...entry }: any) => entry);
      expect(entries).toHaveLength(3);
      expect(entries).toEqual(
        expect.arrayContaining([
          {
            rowId: row.id,
            fieldId: table.fields.Name,
            version: '1',
            operation: 'create',
            value: row.values[table.fields.Name!],
            mutationId: job.jobId,
            actor,
          },
          {
            rowId: row.id,
            fieldId: table.fields.Age,
            version: '1',
            operation: 'create',
            value: null,
            mutationId: job.jobId,
            actor,
          },
          {
            rowId: row.id,
            fieldId: table.fields.No,
            version: '1',
            operation: 'create',
            value: row.values[table.fields.No!],
            mutationId: job.jobId,
            actor,
          },
        ]),
      );
      expect(row.version).toBe('1');
    }
  });

  it('records one records.changed entry with affectedRows, between job.importRows.queued and its terminal event', async () => {
    const table = await createTable(suite.server, suite.org, FIELDS);
    const previewJob = await previewOf(table, `${HEADER}\nAda,,,,,,,,,,\nBob,x,,,,,,,,,\nCy,,,,,,,,,,\n`, 'crew.csv');
    const job = await importPreviewed(suite.server, admin(), table, previewJob.jobId, 'valid-rows-only');
    expect(job.state).toBe('partially_completed');
    const events = (await tableActivity(suite.server, admin(), table)).filter((entry) => entry.category !== 'schema');
    const of = (entry: any) => ({
      category: entry.category,
      event: entry.event,
      jobId: entry.jobId,
      fileName: entry.fileName,
      affectedRows: entry.affectedRows,
    });
    expect(events.map(of)).toEqual([
      {
        category: 'imports',
        event: 'job.previewImportRows.queued',
        jobId: previewJob.jobId,
        fileName: 'crew.csv',
        affectedRows: null,
      },
      {
        category: 'imports',
        event: 'job.previewImportRows.succeeded',
        jobId: previewJob.jobId,
        fileName: 'crew.csv',
        affectedRows: null,
      },
      {
        category: 'imports',
        event: 'job.importRows.queued',
        jobId: job.jobId,
        fileName: 'crew.csv',
        affectedRows: null,
      },
      { category: 'records', event: 'records.changed', jobId: job.jobId, fileName: 'crew.csv', affectedRows: 2 },
      {
        category: 'imports',
        event: 'job.importRows.partially_completed',
        jobId: job.jobId,
        fileName: 'crew.csv',
        affectedRows: 2,
      },
    ]);
    expect(events.every((entry) => entry.actor.id === suite.org.adminUserId && entry.table.id === table.tableId)).toBe(
      true,
    );
  });

  it('ends succeeded when every row is valid, with job.importRows.succeeded', async () => {
    const table = await createTable(suite.server, suite.org, FIELDS);
    const previewJob = await previewOf(table, `${HEADER}\nAda,1,,,,,,,,,\nBob,2,,,,,,,,,\n`);
    const job = await importPreviewed(suite.server, admin(), table, previewJob.jobId, 'valid-rows-only');
    expect(job).toMatchObject({
      state: 'succeeded',
      result: { totalRows: 2, validRows: 2, invalidRows: 0, insertedRows: 2, skippedRows: 0 },
    });
    expect((await rowsByName(table)).map((row) => row.Name).sort()).toEqual(['Ada', 'Bob']);
    const events = (await tableActivity(suite.server, admin(), table)).map((entry) => entry.event);
    expect(events.slice(-3)).toEqual(['job.importRows.queued', 'records.changed', 'job.importRows.succeeded']);
  });

  it('validates again at import time: a unique value written since the preview is skipped and reported', async () => {
    const created = await createTable(suite.server, suite.org, [
      { name: 'Code', type: 'text', options: { maxLength: 20 } },
    ]);
    expect((await addUniqueRule(suite.server, admin(), created, { fieldIds: ['Code'] })).job.state).toBe('succeeded');
    const table = await refreshSchemaVersion(suite.server, admin(), created);
    const previewJob = await preview(suite.server, admin(), table, {
      content: 'Code\nA\nB\nC\n',
      mapping: mappingOf(table, ['Code']),
    });
    expect(previewJob.result).toMatchObject({ validRows: 3, invalidRows: 0 });
    expect((await createRow(suite.server, admin(), table, { Code: 'B' })).status).toBe(201);
    const job = await importPreviewed(suite.server, admin(), table, previewJob.jobId, 'valid-rows-only');
    expect(job).toMatchObject({
      state: 'partially_completed',
      result: { totalRows: 3, invalidRows: 1, insertedRows: 2, skippedRows: 1 },
    });
    expect(await reportOf(suite.server, admin(), job)).toEqual([
      {
        line: 3,
        column: 'Code',
        fieldId: table.fields.Code,
        code: 'UNIQUE_CONFLICT',
        message: 'an existing row already has these values of Code',
      },
    ]);
    expect((await rowsByName(table)).map((row) => row.Code).sort()).toEqual(['A', 'B', 'C']);
  });
});

describe('two imports into one table at once', () => {
  it('each unique value is appended once: the import that meets a value the other appended reports it', async () => {
    const created = await createTable(suite.server, suite.org, [
      { name: 'Code', type: 'text', options: { maxLength: 20 } },
    ]);
    expect((await addUniqueRule(suite.server, admin(), created, { fieldIds: ['Code'] })).job.state).toBe('succeeded');
    const table = await refreshSchemaVersion(suite.server, admin(), created);
    const codes = (from: number) => Array.from({ length: 3_000 }, (_, index) => `C-${from + index}`);
    const [first, second] = await Promise.all(
      [0, 2_000].map((from) =>
        preview(suite.server, admin(), table, {
          content: `Code\n${codes(from).join('\n')}\n`,
          mapping: mappingOf(table, ['Code']),
        }),
      ),
    );
    expect([first.result.invalidRows, second.result.invalidRows]).toEqual([0, 0]);
    const handles = await Promise.all(
      [first, second].map((job) => requestImport(suite.server, admin(), table, job.jobId, 'valid-rows-only')),
    );
    const jobs = await Promise.all(
      handles.map((handle) => {
        expect(handle.status, handle.text).toBe(202);
        return waitForJob(suite.server, admin(), handle.body.statusUrl);
      }),
    );
    const inserted = jobs.map((job) => job.result.insertedRows);
    expect(inserted[0] + inserted[1]).toBe(5_000);
    const overlaps = jobs.map((job) => job.result.invalidRows);
    expect(overlaps.sort()).toEqual([0, 1_000]);
    const stored = (await rowsByName(table)).map((row) => row.Code);
    expect(stored).toHaveLength(5_000);
    expect(new Set(stored).size).toBe(5_000);
    const refused = jobs.find((job) => job.result.invalidRows === 1_000)!;
    expect(refused.state).toBe('partially_completed');
    expect(new Set((await reportOf(suite.server, admin(), refused)).map((problem) => problem.code))).toEqual(
      new Set(['UNIQUE_CONFLICT']),
    );
  }, 60_000);
});

describe('POST …/imports, all-or-nothing', () => {
  it('fails and inserts nothing when any row is invalid', async () => {
    const table = await createTable(suite.server, suite.org, FIELDS);
    const previewJob = await previewOf(table, `${HEADER}\nAda,1,,,,,,,,,\nBob,x,,,,,,,,,\n`, 'strict.csv');
    const job = await importPreviewed(suite.server, admin(), table, previewJob.jobId, 'all-or-nothing');
    expect(job).toMatchObject({
      state: 'failed',
      error: { code: 'JOB_FAILED', message: expect.stringContaining('1 of 2 rows are invalid') },
      result: { totalRows: 2, validRows: 1, invalidRows: 1, insertedRows: 0, skippedRows: 2, mode: 'all-or-nothing' },
    });
    expect(await allRows(suite.server, admin(), table)).toEqual([]);
    const events = (await tableActivity(suite.server, admin(), table)).map((entry) => ({
      event: entry.event,
      jobId: entry.jobId,
      fileName: entry.fileName,
    }));
    expect(events.slice(-2)).toEqual([
      { event: 'job.importRows.queued', jobId: job.jobId, fileName: 'strict.csv' },
      { event: 'job.importRows.failed', jobId: job.jobId, fileName: 'strict.csv' },
    ]);
  });

  it('fails and inserts nothing when a row became invalid after the preview (a unique value written since)', async () => {
    const created = await createTable(suite.server, suite.org, [
      { name: 'Code', type: 'text', options: { maxLength: 20 } },
    ]);
    expect((await addUniqueRule(suite.server, admin(), created, { fieldIds: ['Code'] })).job.state).toBe('succeeded');
    const table = await refreshSchemaVersion(suite.server, admin(), created);
    const previewJob = await preview(suite.server, admin(), table, {
      content: 'Code\nA\nB\nC\n',
      mapping: mappingOf(table, ['Code']),
    });
    expect(previewJob.result).toMatchObject({ validRows: 3, invalidRows: 0 });
    expect((await createRow(suite.server, admin(), table, { Code: 'C' })).status).toBe(201);
    const job = await importPreviewed(suite.server, admin(), table, previewJob.jobId, 'all-or-nothing');
    expect(job).toMatchObject({
      state: 'failed',
      error: { code: 'JOB_FAILED' },
      result: { totalRows: 3, invalidRows: 1, insertedRows: 0 },
    });
    expect(await reportOf(suite.server, admin(), job)).toEqual([
      {
        line: 4,
        column: 'Code',
        fieldId: table.fields.Code,
        code: 'UNIQUE_CONFLICT',
        message: 'an existing row already has these values of Code',
      },
    ]);
    expect((await rowsByName(table)).map((row) => row.Code)).toEqual(['C']);
  });

  it('inserts every row and succeeds when all are valid', async () => {
    const table = await createTable(suite.server, suite.org, FIELDS);
    const previewJob = await previewOf(table, `${HEADER}\nAda,1,,,,,,,,,\nBob,2,,,,,,,,,\nCy,3,,,,,,,,,\n`);
    const job = await importPreviewed(suite.server, admin(), table, previewJob.jobId, 'all-or-nothing');
    expect(job).toMatchObject({
      state: 'succeeded',
      error: null,
      result: { totalRows: 3, insertedRows: 3, skippedRows: 0, mode: 'all-or-nothing' },
    });
    expect((await rowsByName(table)).map((row) => [row.Name, row.Age]).sort()).toEqual([
      ['Ada', 1],
      ['Bob', 2],
      ['Cy', 3],
    ]);
  });
});

describe('POST …/imports: refusals', () => {
  async function previewed(table: TestTable) {
    return previewOf(table, `${HEADER}\nAda,1,,,,,,,,,\n`);
  }

  it('answers 202 with a job handle; importing the same preview again is 409 JOB_STATE_CONFLICT, while it runs and after', async () => {
    const table = await createTable(suite.server, suite.org, FIELDS);
    const previewJob = await previewed(table);
    const accepted = await requestImport(suite.server, admin(), table, previewJob.jobId, 'valid-rows-only');
    expect(accepted.status, accepted.text).toBe(202);
    expect(JobHandleResponse.parse(accepted.body)).toEqual({
      jobId: accepted.body.jobId,
      state: 'queued',
      statusUrl: `/v1/orgs/${suite.org.orgId}/jobs/${accepted.body.jobId}`,
    });
    const again = await requestImport(suite.server, admin(), table, previewJob.jobId, 'all-or-nothing');
    expectError(again, 409, 'JOB_STATE_CONFLICT');
    expect(again.body.error.details).toEqual({ importJobId: accepted.body.jobId });
    expect((await waitForJob(suite.server, admin(), accepted.body.statusUrl)).state).toBe('succeeded');
    expectError(
      await requestImport(suite.server, admin(), table, previewJob.jobId, 'valid-rows-only'),
      409,
      'JOB_STATE_CONFLICT',
    );
    expect(await allRows(suite.server, admin(), table)).toHaveLength(1);
  });

  it('replays the same handle for the same Idempotency-Key and body, and 409 IDEMPOTENCY_CONFLICT for another mode', async () => {
    const table = await createTable(suite.server, suite.org, FIELDS);
    const previewJob = await previewed(table);
    const key = idempotencyKey();
    const first = await requestImport(suite.server, admin(), table, previewJob.jobId, 'valid-rows-only', { key });
    expect(first.status, first.text).toBe(202);
    const replay = await requestImport(suite.server, admin(), table, previewJob.jobId, 'valid-rows-only', { key });
    expect({ status: replay.status, body: replay.body }).toEqual({ status: 202, body: first.body });
    expectError(
      await requestImport(suite.server, admin(), table, previewJob.jobId, 'all-or-nothing', { key }),
      409,
      'IDEMPOTENCY_CONFLICT',
    );
    await waitForJob(suite.server, admin(), first.body.statusUrl);
  });

  it('refuses a failed preview with 409 JOB_STATE_CONFLICT', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    const failed = await preview(suite.server, admin(), table, {
      content: 'Name\n"unclosed\n',
      mapping: mappingOf(table, ['Name']),
    });
    expect(failed.state).toBe('failed');
    const response = await requestImport(suite.server, admin(), table, failed.jobId, 'valid-rows-only');
    expectError(response, 409, 'JOB_STATE_CONFLICT');
    expect(response.body.error.details).toEqual({ state: 'failed' });
  });

  it('answers 404 for an unknown previewJobId, a preview of another table, and a job that is not a preview', async () => {
    const table = await createTable(suite.server, suite.org, FIELDS);
    expectError(
      await requestImport(suite.server, admin(), table, newId(), 'valid-rows-only'),
      404,
      'RESOURCE_NOT_FOUND',
    );
    const other = await createTable(suite.server, suite.org, FIELDS);
    const otherPreview = await previewed(other);
    expectError(
      await requestImport(suite.server, admin(), table, otherPreview.jobId, 'valid-rows-only'),
      404,
      'RESOURCE_NOT_FOUND',
    );
    const imported = await importPreviewed(suite.server, admin(), other, otherPreview.jobId, 'valid-rows-only');
    expectError(
      await requestImport(suite.server, admin(), other, imported.jobId, 'valid-rows-only'),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });

  it('answers 409 SCHEMA_VERSION_CONFLICT for a stale expectedSchemaVersion, and for a schema changed since the preview', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'Code', type: 'text', options: { maxLength: 20 } },
    ]);
    const previewJob = await preview(suite.server, admin(), table, {
      content: 'Code\nA\n',
      mapping: mappingOf(table, ['Code']),
    });
    expectError(
      await requestImport(suite.server, admin(), table, previewJob.jobId, 'valid-rows-only', {
        expectedSchemaVersion: table.schemaVersion + 1,
      }),
      409,
      'SCHEMA_VERSION_CONFLICT',
    );
    expect((await addUniqueRule(suite.server, admin(), table, { fieldIds: ['Code'] })).job.state).toBe('succeeded');
    const current = await refreshSchemaVersion(suite.server, admin(), table);
    const response = await requestImport(suite.server, admin(), current, previewJob.jobId, 'valid-rows-only');
    expectError(response, 409, 'SCHEMA_VERSION_CONFLICT');
    expect(await allRows(suite.server, admin(), table)).toEqual([]);
  });

  it('a viewer: 403; another org: 404; an invalid mode: 422', async () => {
    const table = await createTable(suite.server, suite.org, FIELDS);
    const previewJob = await previewed(table);
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    expectError(
      await requestImport(suite.server, viewer.apiKey, table, previewJob.jobId, 'valid-rows-only'),
      403,
      'FORBIDDEN',
    );
    const other = await createOrg(suite.server.prisma);
    expectError(
      await requestImport(suite.server, other.adminKey, table, previewJob.jobId, 'valid-rows-only'),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(
      await requestImport(suite.server, admin(), table, previewJob.jobId, 'append' as 'all-or-nothing'),
      422,
      'VALIDATION_FAILED',
    );
    expect(await allRows(suite.server, admin(), table)).toEqual([]);
  });
});

describe('POST …/jobs/{jobId}/cancel and /retry of a running import', () => {
  /**
   * Whatever a cancel does with the batches already appended (take them out, or keep and account for them), no
   * way of carrying on (retrying the job, or importing the same preview again) may append a line twice, and the
   * records.changed entries account for exactly the rows in the table.
   */
  it('no row is appended twice when a cancelled import is retried or its preview imported again', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'Name', type: 'text', required: true },
      { name: 'Age', type: 'integer' },
    ]);
    const content = `Name,Age\n${Array.from({ length: 20_000 }, (_, index) => `Person ${index},${index % 90}`).join('\n')}\n`;
    const previewJob = await preview(suite.server, admin(), table, {
      content,
      mapping: mappingOf(table, ['Name', 'Age']),
    });
    expect(previewJob.result).toMatchObject({ totalRows: 20_000, validRows: 20_000 });
    const accepted = await requestImport(suite.server, admin(), table, previewJob.jobId, 'valid-rows-only');
    expect(accepted.status, accepted.text).toBe(202);
    await expect
      .poll(
        async () =>
          (await suite.server.request('GET', `${table.path}/rows?limit=1`, { token: admin() })).body.data.length,
        { timeout: 30_000, interval: 0, message: 'the import inserted nothing in time' },
      )
      .toBeGreaterThan(0);
    const cancel = await suite.server.request(
      'POST',
      `/v1/orgs/${suite.org.orgId}/jobs/${accepted.body.jobId}/cancel`,
      { token: admin(), idempotencyKey: idempotencyKey() },
    );
    expect(cancel.status, cancel.text).toBe(200);
    expect((await waitForJob(suite.server, admin(), accepted.body.statusUrl)).state).toBe('cancelled');
    await expectAccounted(table);

    const retried = await suite.server.request(
      'POST',
      `/v1/orgs/${suite.org.orgId}/jobs/${accepted.body.jobId}/retry`,
      { token: admin(), idempotencyKey: idempotencyKey() },
    );
    if (retried.status === 200) {
      expect((await waitForJob(suite.server, admin(), accepted.body.statusUrl)).state).toBe('succeeded');
    } else {
      expectError(retried, 409, 'JOB_STATE_CONFLICT');
      const again = await requestImport(suite.server, admin(), table, previewJob.jobId, 'valid-rows-only');
      if (again.status === 202) await waitForJob(suite.server, admin(), again.body.statusUrl);
      else expectError(again, 409, 'JOB_STATE_CONFLICT');
    }
    const names = await expectAccounted(table);
    expect(new Set(names).size, 'no line appended twice').toBe(names.length);
  }, 60_000);
});

describe('with a table row limit of 3 (TABLE_ROW_LIMIT)', () => {
  const limited = useServerWithOrg({ TABLE_ROW_LIMIT: '3' });

  it('valid-rows-only inserts up to the limit and reports the rest ROW_LIMIT_REACHED; all-or-nothing inserts none', async () => {
    const { server, org } = limited;
    const table = await createTable(server, org, [{ name: 'Name', type: 'text' }]);
    expect((await createRow(server, org.adminKey, table, { Name: 'existing' })).status).toBe(201);
    const content = 'Name\nA\nB\nC\nD\n';
    const strict = await preview(server, org.adminKey, table, { content, mapping: mappingOf(table, ['Name']) });
    expect(strict.result).toMatchObject({ totalRows: 4, validRows: 4 });
    const refused = await importPreviewed(server, org.adminKey, table, strict.jobId, 'all-or-nothing');
    expect(refused).toMatchObject({ state: 'failed', error: { code: 'JOB_FAILED' }, result: { insertedRows: 0 } });
    expect(await allRows(server, org.adminKey, table)).toHaveLength(1);

    const lenient = await preview(server, org.adminKey, table, { content, mapping: mappingOf(table, ['Name']) });
    const job = await importPreviewed(server, org.adminKey, table, lenient.jobId, 'valid-rows-only');
    expect(job).toMatchObject({
      state: 'partially_completed',
      result: { totalRows: 4, validRows: 2, invalidRows: 2, insertedRows: 2, skippedRows: 2 },
    });
    expect(await reportOf(server, org.adminKey, job)).toEqual(
      [3, 4].map((line) => ({
        line: line + 1,
        column: null,
        fieldId: null,
        code: 'ROW_LIMIT_REACHED',
        message: 'the table holds its maximum of 3 rows',
      })),
    );
    expect((await allRows(server, org.adminKey, table)).map((row) => row.values[table.fields.Name!]).sort()).toEqual([
      'A',
      'B',
      'existing',
    ]);
  });
});
