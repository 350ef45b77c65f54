import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { JobHandleResponse } from '../src/contracts/jobs.ts';
import { JobResponse } from '../src/contracts/job-results.ts';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { addMember, createOrg, idempotencyKey } from './helpers/factories.ts';
import {
  allRows,
  mappingOf,
  preview,
  reportOf,
  requestPreview,
  waitForJob,
  type PreviewRequest,
} from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import {
  addForeignKey,
  addUniqueRule,
  createRow,
  createTable,
  refreshSchemaVersion,
  type FieldSpec,
  type TestTable,
} from './helpers/workspace.ts';
import { checkedFetch } from './helpers/contract.ts';

/** Endpoint 4: what a preview validates and reports, and what the request is refused for before any job exists. */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;
const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

async function previewed(table: TestTable, request: PreviewRequest) {
  const job = await preview(suite.server, admin(), table, request);
  expect(JobResponse.safeParse(job).success, JSON.stringify(job)).toBe(true);
  return { job, report: await reportOf(suite.server, admin(), job) };
}

async function jobCount(): Promise<number> {
  return suite.server.prisma.job.count({ where: { orgId: suite.org.orgId } });
}

const TYPED: FieldSpec[] = [
  { name: 'Int', type: 'integer' },
  { name: 'Num', type: 'number', options: { precision: 10, scale: 2 } },
  { name: 'Flag', type: 'boolean' },
  { name: 'Day', type: 'date' },
  { name: 'At', type: 'datetime' },
  { name: 'Colour', type: 'select', options: { choices: ['red', 'green'] } },
  { name: 'Tags', type: 'multiSelect', options: { choices: ['a', 'b', 'c'] } },
  { name: 'Doc', type: 'json' },
  { name: 'Mail', type: 'email' },
  { name: 'Site', type: 'url' },
];
const TYPED_NAMES = TYPED.map((field) => field.name);

describe('the preview result', () => {
  it('has exact counts, the first 50 rows as typed values, and a report whose size and sha256 match its download', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'Name', type: 'text', required: true },
      { name: 'Age', type: 'integer' },
    ]);
    const lines = Array.from({ length: 60 }, (_, index) =>
      index % 7 === 3 ? `Person ${index},old` : `Person ${index},${index}`,
    );
    const content = `Name,Age\n${lines.join('\n')}\n`;
    const { job, report } = await previewed(table, {
      content,
      fileName: 'people.csv',
      mapping: mappingOf(table, ['Name', 'Age']),
    });
    expect(job).toMatchObject({
      kind: 'previewImportRows',
      state: 'succeeded',
      error: null,
      progress: { done: 60, total: 60 },
    });
    const invalid = lines.filter((_, index) => index % 7 === 3).length;
    const download = await suite.server.request('GET', job.artifacts[0].url, { token: admin() });
    expect(job.result).toEqual({
      totalRows: 60,
      validRows: 60 - invalid,
      invalidRows: invalid,
      schemaVersion: table.schemaVersion,
      preview: expect.any(Array),
      report: {
        name: 'errors.jsonl',
        size: Buffer.byteLength(download.text),
        sha256: sha256(download.text),
        problems: invalid,
        truncated: false,
      },
    });
    expect(job.result.preview).toHaveLength(50);
    expect(job.result.preview[0]).toEqual({
      line: 2,
      valid: true,
      values: { [table.fields.Name!]: 'Person 0', [table.fields.Age!]: 0 },
    });
    expect(job.result.preview[3]).toEqual({
      line: 5,
      valid: false,
      values: { [table.fields.Name!]: 'Person 3', [table.fields.Age!]: null },
    });
    expect(job.result.preview.map((row: any) => row.line)).toEqual(Array.from({ length: 50 }, (_, index) => index + 2));
    expect(job.artifacts).toEqual([
      {
        name: 'errors.jsonl',
        contentType: 'application/x-ndjson',
        size: job.result.report.size,
        sha256: job.result.report.sha256,
        createdAt: expect.any(String),
        expiresAt: expect.any(String),
        url: `/v1/orgs/${suite.org.orgId}/jobs/${job.jobId}/artifacts/errors.jsonl`,
      },
    ]);
    expect(report).toHaveLength(invalid);
    for (const problem of report)
      expect(Object.keys(problem).sort()).toEqual(['code', 'column', 'fieldId', 'line', 'message']);
    expect(await allRows(suite.server, admin(), table)).toEqual([]);
  });

  it('reads each field type’s textual form into its typed value', async () => {
    const table = await createTable(suite.server, suite.org, TYPED);
    const content = [
      TYPED_NAMES.join(','),
      '-42,3.1,TRUE,2024-02-29,2024-03-01T10:00:00.000Z,red,"a, c","{""k"":[1,null]}",ada@example.com,https://example.com/x?y=1',
      '+7,.5,false,,,,"[""b""]",[],,',
    ].join('\n');
    const { job, report } = await previewed(table, { content, mapping: mappingOf(table, TYPED_NAMES) });
    expect(report).toEqual([]);
    const id = (name: string) => table.fields[name]!;
    expect(job.result.preview).toEqual([
      {
        line: 2,
        valid: true,
        values: {
          [id('Int')]: -42,
          [id('Num')]: 3.1,
          [id('Flag')]: true,
          [id('Day')]: '2024-02-29',
          [id('At')]: '2024-03-01T10:00:00.000Z',
          [id('Colour')]: 'red',
          [id('Tags')]: ['a', 'c'],
          [id('Doc')]: { k: [1, null] },
          [id('Mail')]: 'ada@example.com',
          [id('Site')]: 'https://example.com/x?y=1',
        },
      },
      {
        line: 3,
        valid: true,
        values: {
          [id('Int')]: 7,
          [id('Num')]: 0.5,
          [id('Flag')]: false,
          [id('Day')]: null,
          [id('At')]: null,
          [id('Colour')]: null,
          [id('Tags')]: ['b'],
          [id('Doc')]: [],
          [id('Mail')]: null,
          [id('Site')]: null,
        },
      },
    ]);
  });
});

describe('the error report: every validation class as {line, column, fieldId, code, message}', () => {
  it.each([
    ['integer', 'Int', '1.5'],
    ['integer beyond 2^53', 'Int', '9007199254740993'],
    ['number with too many decimals', 'Num', '1.234'],
    ['number written as text', 'Num', 'ten'],
    ['boolean', 'Flag', 'yes'],
    ['date that is not a calendar date', 'Day', '2023-02-29'],
    ['date in another form', 'Day', '01/02/2024'],
    ['datetime without a zone', 'At', '2024-03-01 10:00'],
    ['select outside the choices', 'Colour', 'purple'],
    ['multiSelect outside the choices', 'Tags', 'a, zzz'],
    ['multiSelect repeating a choice', 'Tags', 'a,a'],
    ['json', 'Doc', '{bad'],
    ['email', 'Mail', 'not-an-address'],
    ['url that is not http(s)', 'Site', 'ftp://example.com'],
    ['url that is relative', 'Site', '/relative/path'],
  ])('TYPE_MISMATCH for a %s', async (_case, name, text) => {
    const table = await createTable(suite.server, suite.org, TYPED);
    const cells = TYPED_NAMES.map((field) => (field === name ? `"${text.replaceAll('"', '""')}"` : ''));
    const { job, report } = await previewed(table, {
      content: `${TYPED_NAMES.join(',')}\n${TYPED_NAMES.map(() => '').join(',')}\n${cells.join(',')}\n`,
      mapping: mappingOf(table, TYPED_NAMES),
    });
    expect(job.result).toMatchObject({ totalRows: 2, validRows: 1, invalidRows: 1 });
    expect(report).toEqual([
      {
        line: 3,
        column: name,
        fieldId: table.fields[name],
        code: 'TYPE_MISMATCH',
        message: expect.stringContaining(name),
      },
    ]);
    expect(job.result.preview[1]).toEqual({
      line: 3,
      valid: false,
      values: expect.objectContaining({ [table.fields[name]!]: null }),
    });
  });

  it('REQUIRED for an empty required cell (CSV) and a missing or null required property (JSONL)', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'Name', type: 'text', required: true },
      { name: 'Age', type: 'integer' },
    ]);
    const csv = await previewed(table, {
      content: 'Name,Age\n,1\n"",2\nAda,3\n',
      mapping: mappingOf(table, ['Name', 'Age']),
    });
    expect(csv.report).toEqual(
      [2, 3].map((line) => ({
        line,
        column: 'Name',
        fieldId: table.fields.Name,
        code: 'REQUIRED',
        message: 'Name is required',
      })),
    );
    const jsonl = await previewed(table, {
      format: 'jsonl',
      content: '{"Age":1}\n{"Name":null}\n{"Name":"Ada"}\n',
      mapping: mappingOf(table, ['Name', 'Age']),
    });
    expect(jsonl.report).toEqual(
      [1, 2].map((line) => ({
        line,
        column: 'Name',
        fieldId: table.fields.Name,
        code: 'REQUIRED',
        message: 'Name is required',
      })),
    );
  });

  it('reports every problem of a line, in column order', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'Name', type: 'text', required: true },
      ...TYPED,
    ]);
    const names = ['Name', 'Int', 'Flag'];
    const { job, report } = await previewed(table, {
      content: 'Name,Int,Flag\n,x,maybe\n',
      mapping: mappingOf(table, names),
    });
    expect(job.result).toMatchObject({ totalRows: 1, validRows: 0, invalidRows: 1 });
    expect(report.map(({ line, column, code }) => ({ line, column, code }))).toEqual([
      { line: 2, column: 'Name', code: 'REQUIRED' },
      { line: 2, column: 'Int', code: 'TYPE_MISMATCH' },
      { line: 2, column: 'Flag', code: 'TYPE_MISMATCH' },
    ]);
  });

  it('UNIQUE_CONFLICT against existing rows and within the file; empty values are exempt', async () => {
    const created = await createTable(suite.server, suite.org, [
      { name: 'Code', type: 'text', options: { maxLength: 20 } },
      { name: 'Label', type: 'text' },
    ]);
    expect((await addUniqueRule(suite.server, admin(), created, { fieldIds: ['Code'] })).job.state).toBe('succeeded');
    const table = await refreshSchemaVersion(suite.server, admin(), created);
    expect((await createRow(suite.server, admin(), table, { Code: 'A' })).status).toBe(201);
    const { job, report } = await previewed(table, {
      content: 'Code,Label\nA,exists\nB,first\nB,second\n,x\n,y\nC,\nB,third\n',
      mapping: mappingOf(table, ['Code', 'Label']),
    });
    expect(job.result).toMatchObject({
      totalRows: 7,
      validRows: 4,
      invalidRows: 3,
      schemaVersion: table.schemaVersion,
    });
    const conflict = (line: number, message: string) => ({
      line,
      column: 'Code',
      fieldId: table.fields.Code,
      code: 'UNIQUE_CONFLICT',
      message,
    });
    expect(report).toEqual([
      conflict(2, 'an existing row already has these values of Code'),
      conflict(4, 'line 3 already has these values of Code'),
      conflict(8, 'line 3 already has these values of Code'),
    ]);
    expect((await allRows(suite.server, admin(), table)).length).toBe(1);
  });

  it('UNIQUE_CONFLICT of a composite rule only on the whole combination', async () => {
    const created = await createTable(suite.server, suite.org, [
      { name: 'First', type: 'text', options: { maxLength: 50 } },
      { name: 'Born', type: 'date' },
    ]);
    expect((await addUniqueRule(suite.server, admin(), created, { fieldIds: ['First', 'Born'] })).job.state).toBe(
      'succeeded',
    );
    const table = await refreshSchemaVersion(suite.server, admin(), created);
    const { report } = await previewed(table, {
      content: 'First,Born\nAda,1815-12-10\nAda,1816-01-01\nAlan,1815-12-10\nAda,1815-12-10\n',
      mapping: mappingOf(table, ['First', 'Born']),
    });
    expect(report).toEqual([
      {
        line: 5,
        column: 'First',
        fieldId: table.fields.First,
        code: 'UNIQUE_CONFLICT',
        message: 'line 2 already has these values of First, Born',
      },
    ]);
  });

  it('UNIQUE_CONFLICT of a conditional rule only among rows matching its where, in the table and in the file', async () => {
    const created = await createTable(suite.server, suite.org, [
      { name: 'Code', type: 'text', options: { maxLength: 20 } },
      { name: 'Status', type: 'select', options: { choices: ['active', 'inactive'] } },
    ]);
    const rule = await addUniqueRule(suite.server, admin(), created, {
      fieldIds: ['Code'],
      where: { field: 'Status', op: 'eq', value: 'active' },
    });
    expect(rule.job.state, JSON.stringify(rule.job)).toBe('succeeded');
    const table = await refreshSchemaVersion(suite.server, admin(), created);
    expect((await createRow(suite.server, admin(), table, { Code: 'C', Status: 'active' })).status).toBe(201);
    expect((await createRow(suite.server, admin(), table, { Code: 'E', Status: 'inactive' })).status).toBe(201);
    const content = 'Code,Status\nC,inactive\nC,active\nD,active\nD,inactive\nD,active\nE,active\nE,inactive\n';
    const { job, report } = await previewed(table, { content, mapping: mappingOf(table, ['Code', 'Status']) });
    expect(job.result).toMatchObject({ totalRows: 7, validRows: 5, invalidRows: 2 });
    expect(report.map(({ line, code, message }) => ({ line, code, message }))).toEqual([
      { line: 3, code: 'UNIQUE_CONFLICT', message: 'an existing row already has these values of Code' },
      { line: 6, code: 'UNIQUE_CONFLICT', message: 'line 4 already has these values of Code' },
    ]);
  });

  it('FOREIGN_KEY_CONFLICT for a value no referenced row holds; empty references are exempt', async () => {
    const databaseId = (await createTable(suite.server, suite.org, [{ name: 'Unused', type: 'text' }])).databaseId;
    const parentCreated = await createTable(
      suite.server,
      suite.org,
      [{ name: 'Code', type: 'text', options: { maxLength: 20 } }],
      { databaseId },
    );
    const rule = await addUniqueRule(suite.server, admin(), parentCreated, { fieldIds: ['Code'] });
    expect(rule.job.state, JSON.stringify(rule.job)).toBe('succeeded');
    const parent = await refreshSchemaVersion(suite.server, admin(), parentCreated);
    expect((await createRow(suite.server, admin(), parent, { Code: 'P1' })).status).toBe(201);
    const childCreated = await createTable(
      suite.server,
      suite.org,
      [
        { name: 'Parent', type: 'text', options: { maxLength: 20 } },
        { name: 'Amount', type: 'integer' },
      ],
      { databaseId },
    );
    const key = await addForeignKey(suite.server, admin(), childCreated, {
      fieldIds: ['Parent'],
      referencedTableId: parent.tableId,
      referencedRuleId: rule.ruleId,
    });
    expect(key.job.state, JSON.stringify(key.job)).toBe('succeeded');
    const child = await refreshSchemaVersion(suite.server, admin(), childCreated);
    const { job, report } = await previewed(child, {
      content: 'Parent,Amount\nP1,1\nP2,2\n,3\nP1,4\n',
      mapping: mappingOf(child, ['Parent', 'Amount']),
    });
    expect(job.result).toMatchObject({ totalRows: 4, validRows: 3, invalidRows: 1 });
    expect(report).toEqual([
      {
        line: 3,
        column: 'Parent',
        fieldId: child.fields.Parent,
        code: 'FOREIGN_KEY_CONFLICT',
        message: expect.stringContaining('Code'),
      },
    ]);
  });

  it('ROW_SIZE_LIMIT for a row whose values exceed the row size limit (524,288 bytes as JSON)', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'Name', type: 'text' },
      { name: 'Body', type: 'longText', options: { maxLength: 1_000_000 } },
    ]);
    const big = 'x'.repeat(530_000);
    const { job, report } = await previewed(table, {
      content: `Name,Body\nsmall,${'y'.repeat(1000)}\nbig,${big}\n`,
      mapping: mappingOf(table, ['Name', 'Body']),
    });
    expect(job.result).toMatchObject({ totalRows: 2, validRows: 1, invalidRows: 1 });
    expect(report).toEqual([
      { line: 3, column: null, fieldId: null, code: 'ROW_SIZE_LIMIT', message: expect.stringContaining('524288') },
    ]);
  });
});

describe('a report past 100,000 problems', () => {
  it('is cut at 100,000 lines with truncated:true, while the counts stay exact', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Age', type: 'integer' }]);
    const { job, report } = await previewed(table, {
      content: `Age\n${'x\n'.repeat(100_001)}1\n`,
      mapping: mappingOf(table, ['Age']),
    });
    expect(job.result).toMatchObject({ totalRows: 100_002, validRows: 1, invalidRows: 100_001 });
    expect(job.result.report).toMatchObject({ problems: 100_000, truncated: true });
    expect(report).toHaveLength(100_000);
    expect(report.at(-1)).toEqual({
      line: 100_001,
      column: 'Age',
      fieldId: table.fields.Age,
      code: 'TYPE_MISMATCH',
      message: 'Age must be an integer',
    });
  }, 60_000);
});

describe('POST …/imports/preview: refused before any job exists', () => {
  const peopleTable = () =>
    createTable(suite.server, suite.org, [
      { name: 'Name', type: 'text', required: true },
      { name: 'Age', type: 'integer' },
      { name: 'No', type: 'autoNumber' },
    ]);

  it.each<[string, (table: TestTable) => Partial<PreviewRequest>, (string | number)[][]]>([
    [
      'an unknown fieldId',
      (table) => ({ mapping: [...mappingOf(table, ['Name']), { source: 'Age', fieldId: 'Nope' }] }),
      [['mapping', 1, 'fieldId']],
    ],
    [
      'a field targeted twice',
      (table) => ({ mapping: [...mappingOf(table, ['Name', 'Age']), { source: 1, fieldId: table.fields.Age! }] }),
      [['mapping', 2, 'fieldId']],
    ],
    ['an unmapped required field', (table) => ({ mapping: mappingOf(table, ['Age']) }), [['mapping']]],
    [
      'an unknown header name',
      (table) => ({ mapping: [...mappingOf(table, ['Name']), { source: 'Years', fieldId: table.fields.Age! }] }),
      [['mapping', 1, 'source']],
    ],
    [
      'a header name the header row holds twice',
      (table) => ({ content: 'Name,Age,Age\nAda,1,2\n', mapping: mappingOf(table, ['Name', 'Age']) }),
      [['mapping', 1, 'source']],
    ],
    [
      'a column index past the header row',
      (table) => ({ mapping: [...mappingOf(table, ['Name']), { source: 2, fieldId: table.fields.Age! }] }),
      [['mapping', 1, 'source']],
    ],
    [
      'a column index for JSONL',
      (table) => ({
        format: 'jsonl',
        content: '{"Name":"Ada"}\n',
        mapping: [{ source: 0, fieldId: table.fields.Name! }],
      }),
      [['mapping', 0, 'source']],
    ],
    [
      'an autoNumber target',
      (table) => ({ mapping: [...mappingOf(table, ['Name']), { source: 'Age', fieldId: table.fields.No! }] }),
      [['mapping', 1, 'fieldId']],
    ],
    [
      '201 mapping items',
      (table) => ({
        mapping: Array.from({ length: 201 }, (_, index) => ({ source: index, fieldId: table.fields.Name! })),
      }),
      [['body', 'mapping']],
    ],
    ['no mapping items', () => ({ mapping: [] }), [['body', 'mapping']]],
    ['an empty fileName', () => ({ fileName: '' }), [['body', 'fileName']]],
    ['a fileName of 256 characters', () => ({ fileName: `${'f'.repeat(252)}.csv` }), [['body', 'fileName']]],
    ['a fileName with a path separator', () => ({ fileName: 'dir/people.csv' }), [['body', 'fileName']]],
    ['a bad format', () => ({ format: 'xlsx' as 'csv' }), [['body', 'format']]],
  ])('%s: 422 VALIDATION_FAILED naming it', async (_case, change, paths) => {
    const table = await peopleTable();
    const before = await jobCount();
    const response = await requestPreview(suite.server, admin(), table, {
      content: 'Name,Age\nAda,36\n',
      mapping: mappingOf(table, ['Name', 'Age']),
      ...change(table),
    });
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, paths);
    expect(await jobCount()).toBe(before);
  });

  it('accepts a fileName of exactly 255 characters', async () => {
    const table = await peopleTable();
    const response = await requestPreview(suite.server, admin(), table, {
      content: 'Name\nAda\n',
      fileName: `${'f'.repeat(251)}.csv`,
      mapping: mappingOf(table, ['Name']),
    });
    expect(response.status, response.text).toBe(202);
    expect(JobHandleResponse.parse(response.body)).toEqual({
      jobId: response.body.jobId,
      state: 'queued',
      statusUrl: `/v1/orgs/${suite.org.orgId}/jobs/${response.body.jobId}`,
    });
  });

  it('a stale expectedSchemaVersion: 409 SCHEMA_VERSION_CONFLICT', async () => {
    const table = await peopleTable();
    const response = await requestPreview(suite.server, admin(), table, {
      content: 'Name\nAda\n',
      mapping: mappingOf(table, ['Name']),
      expectedSchemaVersion: table.schemaVersion + 1,
    });
    expectError(response, 409, 'SCHEMA_VERSION_CONFLICT');
  });

  it('content of exactly 4,194,304 characters is accepted (202); one more is 413 PAYLOAD_TOO_LARGE', async () => {
    const table = await peopleTable();
    const header = 'Name\n';
    // Characters are code points: 'é' is one character (two UTF-8 bytes), '😀' one character (a surrogate pair).
    const line = `${'é'.repeat(40)}😀${'a'.repeat(58)}\n`;
    const body = line.repeat(Math.floor((4_194_304 - header.length) / 100));
    const exact = header + body + 'b'.repeat(4_194_304 - header.length - [...body].length);
    expect([...exact].length).toBe(4_194_304);
    const accepted = await requestPreview(suite.server, admin(), table, {
      content: exact,
      mapping: mappingOf(table, ['Name']),
    });
    expect(accepted.status, accepted.text.slice(0, 500)).toBe(202);
    const tooLarge = await requestPreview(suite.server, admin(), table, {
      content: `${exact}c`,
      mapping: mappingOf(table, ['Name']),
    });
    expectError(tooLarge, 413, 'PAYLOAD_TOO_LARGE');
    expect(tooLarge.body.error.details).toEqual({ limit: 4_194_304, length: 4_194_305 });
    const job = await waitForJob(suite.server, admin(), accepted.body.statusUrl, undefined, 60_000);
    expect(job.state).toBe('succeeded');
    expect(job.result.totalRows).toBe(Math.floor((4_194_304 - header.length) / 100) + 1);
  }, 90_000);

  it('a body that is not UTF-8: a clear 400, no job', async () => {
    const table = await peopleTable();
    const before = await jobCount();
    const json = JSON.stringify({
      expectedSchemaVersion: table.schemaVersion,
      format: 'csv',
      fileName: 'a.csv',
      content: 'Name\nXX\n',
      mapping: mappingOf(table, ['Name']),
    });
    const bytes = Buffer.from(json, 'utf8');
    const at = bytes.indexOf('XX');
    bytes[at] = 0xff;
    bytes[at + 1] = 0xfe;
    const response = await checkedFetch(`${suite.server.url}${table.path}/imports/preview`, {
      method: 'POST',
      body: bytes,
      headers: {
        authorization: `Bearer ${admin()}`,
        'idempotency-key': idempotencyKey(),
        'content-type': 'application/json',
      },
    });
    const text = await response.text();
    expectError(
      { status: response.status, headers: response.headers, text, body: JSON.parse(text) },
      400,
      'BAD_REQUEST',
    );
    expect(await jobCount()).toBe(before);
  });

  it('content holding an escaped unpaired surrogate: 422 naming content', async () => {
    const table = await peopleTable();
    const raw = `{"expectedSchemaVersion":${table.schemaVersion},"format":"csv","fileName":"a.csv","content":"Name\\nA\\ud800B\\n","mapping":[{"source":"Name","fieldId":"${table.fields.Name}"}]}`;
    const response = await suite.server.request('POST', `${table.path}/imports/preview`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      rawBody: raw,
    });
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [['content']]);
  });

  it('a viewer: 403; another org’s admin: 404; no Idempotency-Key: 400', async () => {
    const table = await peopleTable();
    const request = { content: 'Name\nAda\n', mapping: mappingOf(table, ['Name']) };
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    expectError(await requestPreview(suite.server, viewer.apiKey, table, request), 403, 'FORBIDDEN');
    const other = await createOrg(suite.server.prisma);
    expectError(await requestPreview(suite.server, other.adminKey, table, request), 404, 'RESOURCE_NOT_FOUND');
    const unkeyed = await suite.server.request('POST', `${table.path}/imports/preview`, {
      token: admin(),
      body: { expectedSchemaVersion: table.schemaVersion, format: 'csv', fileName: 'a.csv', ...request },
    });
    expectError(unkeyed, 400, 'BAD_REQUEST');
    const member = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    expect((await requestPreview(suite.server, member.apiKey, table, request)).status).toBe(202);
  });

  it('the same Idempotency-Key and body replay the same job handle; another body under it is 409 IDEMPOTENCY_CONFLICT', async () => {
    const table = await peopleTable();
    const key = idempotencyKey();
    const request = { content: 'Name\nAda\n', mapping: mappingOf(table, ['Name']) };
    const first = await requestPreview(suite.server, admin(), table, request, key);
    expect(first.status, first.text).toBe(202);
    const before = await jobCount();
    const replay = await requestPreview(suite.server, admin(), table, request, key);
    expect(replay.status, replay.text).toBe(202);
    expect(replay.body).toEqual(first.body);
    expect(await jobCount()).toBe(before);
    expectError(
      await requestPreview(suite.server, admin(), table, { ...request, content: 'Name\nBob\n' }, key),
      409,
      'IDEMPOTENCY_CONFLICT',
    );
    expect(await jobCount()).toBe(before);
  });
});
