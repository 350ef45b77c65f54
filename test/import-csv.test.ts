import { describe, expect, it } from 'vitest';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { allRows, mappingOf, preview, reportOf, requestPreview } from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createTable, type TestTable } from './helpers/workspace.ts';

/** How an import preview reads files: RFC 4180 CSV (quotes, newlines, line endings, BOM, header or not) and JSONL. */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;

/** A fresh table per test: Name (text), Age (integer), Note (longText). */
const peopleTable = () =>
  createTable(suite.server, suite.org, [
    { name: 'Name', type: 'text' },
    { name: 'Age', type: 'integer' },
    { name: 'Note', type: 'longText' },
  ]);

async function previewed(
  table: TestTable,
  content: string,
  options: {
    names?: string[];
    header?: boolean;
    format?: 'csv' | 'jsonl';
    mapping?: { source: string | number; fieldId: string }[];
  } = {},
) {
  const job = await preview(suite.server, admin(), table, {
    content,
    format: options.format ?? 'csv',
    mapping: options.mapping ?? mappingOf(table, options.names ?? ['Name', 'Age', 'Note']),
    ...(options.header === undefined ? {} : { header: options.header }),
  });
  return { job, report: await reportOf(suite.server, admin(), job) };
}

/** The preview's rows as `{line, valid, values by field name}`. */
function rowsOf(table: TestTable, job: any) {
  const names = Object.fromEntries(Object.entries(table.fields).map(([name, id]) => [id, name]));
  return job.result.preview.map((row: any) => ({
    line: row.line,
    valid: row.valid,
    values: Object.fromEntries(Object.entries(row.values).map(([id, value]) => [names[id], value])),
  }));
}

describe('CSV', () => {
  it('reads quoted fields holding commas and doubled quotes', async () => {
    const table = await peopleTable();
    const { job, report } = await previewed(
      table,
      'Name,Age,Note\n"Smith, Jane",41,"She said ""hi"", then left"\n"""Quoted""",,""\n',
    );
    expect(job.state).toBe('succeeded');
    expect(report).toEqual([]);
    expect(rowsOf(table, job)).toEqual([
      { line: 2, valid: true, values: { Name: 'Smith, Jane', Age: 41, Note: 'She said "hi", then left' } },
      { line: 3, valid: true, values: { Name: '"Quoted"', Age: null, Note: null } },
    ]);
  });

  it('keeps embedded newlines in a quoted field, and reports the physical line each record starts on', async () => {
    const table = await peopleTable();
    const content = 'Name,Age,Note\nAda,1,"first\nsecond\r\nthird"\nBob,x,plain\n"Cy\nCyrus",y,\n';
    const { job, report } = await previewed(table, content);
    expect(job.result).toMatchObject({ totalRows: 3, validRows: 1, invalidRows: 2 });
    expect(rowsOf(table, job)).toEqual([
      { line: 2, valid: true, values: { Name: 'Ada', Age: 1, Note: 'first\nsecond\r\nthird' } },
      { line: 5, valid: false, values: { Name: 'Bob', Age: null, Note: 'plain' } },
      { line: 6, valid: false, values: { Name: 'Cy\nCyrus', Age: null, Note: null } },
    ]);
    expect(report.map(({ line, column, code }) => ({ line, column, code }))).toEqual([
      { line: 5, column: 'Age', code: 'TYPE_MISMATCH' },
      { line: 6, column: 'Age', code: 'TYPE_MISMATCH' },
    ]);
  });

  it.each([
    ['LF', '\n'],
    ['CRLF', '\r\n'],
    ['CR', '\r'],
  ])('reads %s line endings with the same lines', async (_name, eol) => {
    const table = await peopleTable();
    const { job } = await previewed(table, ['Name,Age', 'Ada,1', 'Bob,x', ''].join(eol), { names: ['Name', 'Age'] });
    expect(rowsOf(table, job)).toEqual([
      { line: 2, valid: true, values: { Name: 'Ada', Age: 1 } },
      { line: 3, valid: false, values: { Name: 'Bob', Age: null } },
    ]);
  });

  it('reads mixed line endings in one file, and a last record without a line break', async () => {
    const table = await peopleTable();
    const { job, report } = await previewed(table, 'Name,Age\r\nAda,1\nBob,2\r\nCy,z\rDee,4', {
      names: ['Name', 'Age'],
    });
    expect(rowsOf(table, job).map((row: any) => [row.line, row.values.Name])).toEqual([
      [2, 'Ada'],
      [3, 'Bob'],
      [4, 'Cy'],
      [5, 'Dee'],
    ]);
    expect(report.map((problem) => problem.line)).toEqual([4]);
  });

  it('strips a UTF-8 byte order mark, so the first header name maps', async () => {
    const table = await peopleTable();
    const { job } = await previewed(table, '\uFEFFName,Age\nÅsa,7\n', { names: ['Name', 'Age'] });
    expect(job.state).toBe('succeeded');
    expect(rowsOf(table, job)).toEqual([{ line: 2, valid: true, values: { Name: 'Åsa', Age: 7 } }]);
  });

  it('skips empty lines without counting them, and keeps the physical line numbers of the records after them', async () => {
    const table = await peopleTable();
    const { job, report } = await previewed(table, '\nName,Age\n\nAda,1\r\n\r\n\nBob,x\n\n', {
      names: ['Name', 'Age'],
    });
    expect(job.result).toMatchObject({ totalRows: 2, validRows: 1, invalidRows: 1 });
    expect(rowsOf(table, job).map((row: any) => row.line)).toEqual([4, 7]);
    expect(report.map((problem) => problem.line)).toEqual([7]);
  });

  it('reports RAGGED_ROW for a record with more or fewer cells than the header, with no column or field', async () => {
    const table = await peopleTable();
    const { job, report } = await previewed(table, 'Name,Age\nAda,1\nBob,2,extra\nCy\n', { names: ['Name', 'Age'] });
    expect(job.state).toBe('succeeded');
    expect(job.result).toMatchObject({ totalRows: 3, validRows: 1, invalidRows: 2 });
    expect(report).toEqual([
      { line: 3, column: null, fieldId: null, code: 'RAGGED_ROW', message: expect.stringMatching(/3 cells.*2/) },
      { line: 4, column: null, fieldId: null, code: 'RAGGED_ROW', message: expect.stringMatching(/1 cells.*2/) },
    ]);
  });

  it('fails the preview with VALIDATION_FAILED and a CSV_MALFORMED report line at an unclosed quote', async () => {
    const table = await peopleTable();
    const { job, report } = await previewed(table, 'Name,Age\nAda,1\nBob,x\n"Cy,3\nDee,4\n', {
      names: ['Name', 'Age'],
    });
    expect(job.state).toBe('failed');
    expect(job.error).toEqual({
      code: 'VALIDATION_FAILED',
      message: expect.stringContaining('line 4'),
      details: { line: 4 },
    });
    // The malformed record counts as an invalid row: the counts add up to the lines the report names.
    expect(job.result).toMatchObject({ totalRows: 3, validRows: 1, invalidRows: 2 });
    expect(report).toEqual([
      expect.objectContaining({ line: 3, code: 'TYPE_MISMATCH' }),
      { line: 4, column: null, fieldId: null, code: 'CSV_MALFORMED', message: expect.any(String) },
    ]);
    expect(await allRows(suite.server, admin(), table)).toEqual([]);
  });

  it('an unclosed quote in the header row: the job fails at line 1 (not a 422 about unknown header names)', async () => {
    const table = await peopleTable();
    const { job, report } = await previewed(table, '"Name,Age\nAda,1\n', { names: ['Name', 'Age'] });
    expect(job).toMatchObject({ state: 'failed', error: { code: 'VALIDATION_FAILED', details: { line: 1 } } });
    expect(report).toEqual([
      { line: 1, column: null, fieldId: null, code: 'CSV_MALFORMED', message: expect.any(String) },
    ]);
  });

  it('maps by header name and by 0-based column index in one mapping', async () => {
    const table = await peopleTable();
    const mapping = [
      { source: 'Name', fieldId: table.fields.Name! },
      { source: 2, fieldId: table.fields.Age! },
    ];
    const { job, report } = await previewed(table, 'Name,Skip,Years\nAda,?,36\nBob,?,old\n', { mapping });
    expect(rowsOf(table, job)).toEqual([
      { line: 2, valid: true, values: { Name: 'Ada', Age: 36 } },
      { line: 3, valid: false, values: { Name: 'Bob', Age: null } },
    ]);
    // A column mapped by index is named by its index in the report.
    expect(report).toEqual([
      { line: 3, column: '2', fieldId: table.fields.Age, code: 'TYPE_MISMATCH', message: expect.any(String) },
    ]);
  });

  it('with header:false reads the first line as data, maps by index, and reports MISSING_CELL for a short record', async () => {
    const table = await peopleTable();
    const mapping = [
      { source: 1, fieldId: table.fields.Name! },
      { source: 0, fieldId: table.fields.Age! },
    ];
    const { job, report } = await previewed(table, '36,Ada\n41,Bob\n7\n', { mapping, header: false });
    expect(job.result).toMatchObject({ totalRows: 3, validRows: 2, invalidRows: 1 });
    expect(rowsOf(table, job)).toEqual([
      { line: 1, valid: true, values: { Name: 'Ada', Age: 36 } },
      { line: 2, valid: true, values: { Name: 'Bob', Age: 41 } },
      { line: 3, valid: false, values: { Name: null, Age: 7 } },
    ]);
    expect(report).toEqual([
      { line: 3, column: '1', fieldId: table.fields.Name, code: 'MISSING_CELL', message: expect.any(String) },
    ]);
  });

  it('with header:false refuses a header-name source with 422 before any job exists', async () => {
    const table = await peopleTable();
    const response = await requestPreview(suite.server, admin(), table, {
      content: 'Ada,36\n',
      header: false,
      mapping: mappingOf(table, ['Name']),
    });
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [['mapping', 0, 'source']]);
  });

  it('counts a header-only file as zero rows', async () => {
    const table = await peopleTable();
    const { job, report } = await previewed(table, 'Name,Age\r\n', { names: ['Name', 'Age'] });
    expect(job.state).toBe('succeeded');
    expect(job.result).toMatchObject({ totalRows: 0, validRows: 0, invalidRows: 0, preview: [] });
    expect(report).toEqual([]);
  });
});

describe('JSONL', () => {
  it('reports INVALID_JSON and NOT_AN_OBJECT per line, reads missing and null properties as empty, and skips blank lines', async () => {
    const table = await peopleTable();
    const content = [
      '{"Name":"Ada","Age":36,"Note":"a"}',
      '{"Name":"Bob",',
      '[1,2]',
      '"text"',
      '',
      'null',
      '{"Name":"Cy"}',
      '{"Name":"Dee","Age":null,"Extra":true}',
      '{"Name":"Eve","Age":"41"}',
    ].join('\n');
    const { job, report } = await previewed(table, content, { format: 'jsonl' });
    expect(job.state).toBe('succeeded');
    expect(job.result).toMatchObject({ totalRows: 8, validRows: 3, invalidRows: 5 });
    expect(report.map(({ line, column, fieldId, code }) => ({ line, column, fieldId, code }))).toEqual([
      { line: 2, column: null, fieldId: null, code: 'INVALID_JSON' },
      { line: 3, column: null, fieldId: null, code: 'NOT_AN_OBJECT' },
      { line: 4, column: null, fieldId: null, code: 'NOT_AN_OBJECT' },
      { line: 6, column: null, fieldId: null, code: 'NOT_AN_OBJECT' },
      // JSONL values are JSON already: the string "41" is not an integer.
      { line: 9, column: 'Age', fieldId: table.fields.Age, code: 'TYPE_MISMATCH' },
    ]);
    expect(rowsOf(table, job).filter((row: any) => row.valid)).toEqual([
      { line: 1, valid: true, values: { Name: 'Ada', Age: 36, Note: 'a' } },
      { line: 7, valid: true, values: { Name: 'Cy', Age: null, Note: null } },
      { line: 8, valid: true, values: { Name: 'Dee', Age: null, Note: null } },
    ]);
  });

  it('reads CRLF lines and a byte order mark', async () => {
    const table = await peopleTable();
    const { job } = await previewed(table, '\uFEFF{"Name":"Ada"}\r\n{"Name":"Bob"}\r\n', {
      format: 'jsonl',
      names: ['Name'],
    });
    expect(rowsOf(table, job)).toEqual([
      { line: 1, valid: true, values: { Name: 'Ada' } },
      { line: 2, valid: true, values: { Name: 'Bob' } },
    ]);
  });
});
