import { createHash } from 'node:crypto';
import ExcelJS from 'exceljs';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import yauzl from 'yauzl';
import { rowsTableOf } from '../src/data/identifiers.ts';
import { sweepExpiredArtifacts } from '../src/jobs/engine/artifact-sweep.ts';
import { JobHandleResponse } from '../src/contracts/jobs.ts';
import { JobResponse } from '../src/contracts/job-results.ts';
import { expectError } from './helpers/expectations.ts';
import { download, exported, exportedText, requestExport } from './helpers/exports.ts';
import { addMember, createOrg, idempotencyKey } from './helpers/factories.ts';
import { allRows, importPreviewed, preview, tableActivity, waitForJob } from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { definitionOf, viewClient } from './helpers/views.ts';
import { createRow, createTable, type FieldSpec, type TestTable } from './helpers/workspace.ts';

/**
 * Exports (issue 15) over HTTP: each format and field type, the round trip through an import, view semantics,
 * authority and 404s, the activity entries and the database archive.
 */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;
const views = viewClient(suite);

const CHOICES = ['Alpha', 'Beta, Inc', ' padded', '[x]'];
const FIELDS: FieldSpec[] = [
  { name: 'Text', type: 'text' },
  { name: 'Long', type: 'longText' },
  { name: 'Int', type: 'integer' },
  { name: 'Num', type: 'number', options: { precision: 15, scale: 3 } },
  { name: 'Bool', type: 'boolean' },
  { name: 'Day', type: 'date' },
  { name: 'At', type: 'datetime' },
  { name: 'Mail', type: 'email' },
  { name: 'Link', type: 'url' },
  { name: 'Pick', type: 'select', options: { choices: CHOICES } },
  { name: 'Picks', type: 'multiSelect', options: { choices: CHOICES } },
  { name: 'Doc', type: 'json' },
  { name: 'Seq', type: 'autoNumber' },
];
const IMPORTABLE = FIELDS.filter((field) => field.type !== 'autoNumber').map((field) => field.name);

/** Values by field name: quotes, newlines, separators, leading zeros, unicode, empty vs null. */
const ROWS: Record<string, unknown>[] = [
  {
    Text: 'He said "hi", then\nleft',
    Long: 'line 1\r\nline 2, with a comma; and a tab\t',
    Int: 42,
    Num: 1.5,
    Bool: true,
    Day: '2024-02-29',
    At: '2024-02-29T13:45:06.789Z',
    Mail: 'ada@example.com',
    Link: 'https://example.com/a?b=c,d',
    Pick: 'Beta, Inc',
    Picks: ['Alpha', 'Beta, Inc'],
    Doc: { b: [1, 2.5, { c: 'x y' }], a: 'q"uote\n' },
  },
  {
    Text: '007',
    Long: 'Zoë 🚀 日本語',
    Int: -9007199254740991,
    Num: -0.25,
    Bool: false,
    Day: '0999-12-31',
    At: '1999-12-31T23:59:59.000Z',
    Mail: null,
    Link: null,
    Pick: null,
    Picks: ['Alpha'],
    Doc: '',
  },
  {
    Text: null,
    Long: null,
    Int: 0,
    Num: 0,
    Bool: null,
    Day: null,
    At: null,
    Mail: null,
    Link: null,
    Pick: ' padded',
    Picks: [' padded', '[x]'],
    Doc: [],
  },
  {
    Text: ',',
    Long: '"',
    Int: null,
    Num: null,
    Bool: null,
    Day: null,
    At: null,
    Mail: null,
    Link: null,
    Pick: null,
    Picks: null,
    Doc: null,
  },
];

function byId(table: TestTable, values: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(values).map(([name, value]) => [table.fields[name]!, value]));
}

function byName(table: TestTable, values: Record<string, unknown>): Record<string, unknown> {
  const names = Object.fromEntries(Object.entries(table.fields).map(([name, id]) => [id, name]));
  return Object.fromEntries(Object.entries(values).map(([id, value]) => [names[id]!, value]));
}

async function seededTable(rows = ROWS): Promise<TestTable> {
  const table = await createTable(suite.server, suite.org, FIELDS);
  for (const values of rows) {
    const response = await createRow(suite.server, admin(), table, byId(table, values));
    expect(response.status, response.text).toBe(201);
  }
  return table;
}

/** The rows of a table by field name, without the generated autoNumber, in creation order. */
async function valuesOf(table: TestTable): Promise<Record<string, unknown>[]> {
  const rows = await allRows(suite.server, admin(), table);
  return rows.map((row) => {
    const { Seq: _seq, ...values } = byName(table, row.values);
    return values;
  });
}

async function reimport(
  content: string,
  format: 'csv' | 'jsonl',
  sources: (table: TestTable, name: string) => string,
): Promise<TestTable> {
  const target = await createTable(suite.server, suite.org, FIELDS);
  const mapping = IMPORTABLE.map((name) => ({ source: sources(target, name), fieldId: target.fields[name]! }));
  const job = await preview(suite.server, admin(), target, { format, content, mapping, fileName: `again.${format}` });
  expect(job.state, JSON.stringify(job.result)).toBe('succeeded');
  expect(job.result.invalidRows).toBe(0);
  const imported = await importPreviewed(suite.server, admin(), target, job.jobId, 'all-or-nothing');
  expect(imported.state, JSON.stringify(imported.error)).toBe('succeeded');
  return target;
}

describe('POST …/tables/{tableId}/exports', () => {
  it('answers 202 with a job handle and ends with a downloadable, verified CSV artifact', async () => {
    const table = await seededTable();
    const accepted = await requestExport(suite.server, admin(), table, { format: 'csv', fileName: 'people.csv' });
    expect(accepted.status, accepted.text).toBe(202);
    JobHandleResponse.parse(accepted.body);
    const job = await exported(suite.server, admin(), table, { format: 'csv', fileName: 'people.csv' });
    JobResponse.parse(job);
    expect(job).toMatchObject({ kind: 'exportRows', state: 'succeeded', progress: { done: 4, total: 4 } });
    expect(job.result).toMatchObject({ format: 'csv', rowsDone: 4, rowsTotal: 4, artifact: { name: 'people.csv' } });
    const file = await download(suite.server, admin(), job);
    expect(file.status).toBe(200);
    expect(file.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(file.headers.get('content-disposition')).toBe('attachment; filename="people.csv"');
    const digest = createHash('sha256').update(file.bytes).digest();
    expect(file.headers.get('content-digest')).toBe(`sha-256=:${digest.toString('base64')}:`);
    expect(job.artifacts[0]).toMatchObject({
      name: 'people.csv',
      size: file.bytes.length,
      sha256: digest.toString('hex'),
    });
  });

  it('expires like any artifact: 410 after its expiry, and the sweep frees its chunks', async () => {
    const table = await seededTable([ROWS[0]!]);
    const job = await exported(suite.server, admin(), table, { format: 'csv', fileName: 'old.csv' });
    const stored = await suite.server.prisma.jobArtifactChunk.count({ where: { jobId: job.jobId } });
    expect(stored).toBe(1);
    await suite.server.prisma.jobArtifact.updateMany({
      where: { jobId: job.jobId },
      data: { expiresAt: new Date(Date.now() - 1000) },
    });
    const expired = await suite.server.request('GET', job.artifacts[0].url, { token: admin() });
    expectError(expired, 410, 'ARTIFACT_EXPIRED');
    await sweepExpiredArtifacts(suite.server.prisma);
    expect(await suite.server.prisma.jobArtifactChunk.count({ where: { jobId: job.jobId } })).toBe(0);
    expectError(await suite.server.request('GET', job.artifacts[0].url, { token: admin() }), 410, 'ARTIFACT_EXPIRED');
  });

  it('writes CSV values per field type: header of names, dates, datetimes, booleans, multiSelect, compact json', async () => {
    const table = await seededTable();
    const text = await exportedText(suite.server, admin(), table, { format: 'csv' });
    expect(text).toBe(
      [
        'Text,Long,Int,Num,Bool,Day,At,Mail,Link,Pick,Picks,Doc,Seq',
        '"He said ""hi"", then\nleft","line 1\r\nline 2, with a comma; and a tab\t",42,1.500,true,2024-02-29,2024-02-29T13:45:06.789Z,ada@example.com,"https://example.com/a?b=c,d","Beta, Inc","[""Alpha"",""Beta, Inc""]","{""a"":""q\\""uote\\n"",""b"":[1,2.5,{""c"":""x y""}]}",1',
        '007,Zoë 🚀 日本語,-9007199254740991,-0.250,false,0999-12-31,1999-12-31T23:59:59.000Z,,,,Alpha,"""""",2',
        ',,0,0.000,,,,,,  padded,"["" padded"",""[x]""]",[],3',
        '",","""",,,,,,,,,,,4',
        '',
      ]
        .join('\n')
        .replace('  padded', ' padded'),
    );
  });

  it('round-trips CSV through preview and import into an empty table of the same schema', async () => {
    const table = await seededTable();
    const text = await exportedText(suite.server, admin(), table, { format: 'csv' });
    const target = await reimport(text, 'csv', (_table, name) => name);
    expect(await valuesOf(target)).toEqual(await valuesOf(table));
  });

  it('writes JSONL as {id, version, values} keyed by field id, or by name, and round-trips it', async () => {
    const table = await seededTable();
    const text = await exportedText(suite.server, admin(), table, { format: 'jsonl' });
    const lines = text.split('\n');
    expect(lines.pop()).toBe('');
    const source = await allRows(suite.server, admin(), table);
    expect(lines.map((line) => JSON.parse(line))).toEqual(
      source.map((row) => ({ id: row.id, version: row.version, values: row.values })),
    );
    expect(lines[0]).not.toMatch(/": |, "/);
    const target = await reimport(text, 'jsonl', (_target, name) => table.fields[name]!);
    expect(await valuesOf(target)).toEqual(await valuesOf(table));

    const named = await exportedText(suite.server, admin(), table, {
      format: 'jsonl',
      fieldNames: true,
      fieldIds: ['Int', 'Text'],
    });
    expect(JSON.parse(named.split('\n')[0]!).values).toEqual({ Int: 42, Text: 'He said "hi", then\nleft' });
    const again = await reimport(
      await exportedText(suite.server, admin(), table, { format: 'jsonl', fieldNames: true }),
      'jsonl',
      (_target, name) => name,
    );
    expect(await valuesOf(again)).toEqual(await valuesOf(table));
  });

  it('writes XLSX with real cell types and a header row of field names', async () => {
    const table = await seededTable();
    const job = await exported(suite.server, admin(), table, { format: 'xlsx', fileName: 'people.xlsx' });
    const file = await download(suite.server, admin(), job);
    expect(file.headers.get('content-type')).toBe('application/vnd.openxmlformats-officedocument.spreadsheetml.sheet');
    const workbook = new ExcelJS.Workbook();
    await workbook.xlsx.load(file.bytes as never);
    const sheet = workbook.worksheets[0]!;
    expect(sheet.rowCount).toBe(5);
    expect((sheet.getRow(1).values as unknown[]).slice(1)).toEqual(FIELDS.map((field) => field.name));
    const first = sheet.getRow(2);
    expect(first.getCell(1).value).toBe('He said "hi", then\nleft');
    expect(first.getCell(3).value).toBe(42);
    expect(first.getCell(4).value).toBe(1.5);
    expect(first.getCell(5).value).toBe(true);
    expect(first.getCell(6).value).toEqual(new Date('2024-02-29T00:00:00.000Z'));
    expect(first.getCell(6).numFmt).toBe('yyyy-mm-dd');
    expect(first.getCell(7).value).toEqual(new Date('2024-02-29T13:45:06.789Z'));
    expect(first.getCell(11).value).toBe('Alpha, Beta, Inc');
    expect(first.getCell(12).value).toBe('{"a":"q\\"uote\\n","b":[1,2.5,{"c":"x y"}]}');
    expect(first.getCell(13).value).toBe(1);
    expect(sheet.getRow(3).getCell(6).value).toBe('0999-12-31');
    expect(sheet.getRow(5).getCell(3).value).toBeNull();
  });

  // PostgreSQL functions take at most 100 arguments: a row built with json_build_object failed past 50 fields.
  it('exports a 120-field table as JSONL (by id and by name) and XLSX', async () => {
    const fields: FieldSpec[] = Array.from({ length: 120 }, (_unused, index) =>
      index % 2 === 0 ? { name: `Text "${index}"`, type: 'text' } : { name: `Int ${index}`, type: 'integer' },
    );
    const table = await createTable(suite.server, suite.org, fields);
    const values = Object.fromEntries(
      fields.map((field, index) => [field.name, field.type === 'text' ? `v\\${index} "q"` : index]),
    );
    const created = await createRow(suite.server, admin(), table, byId(table, values));
    expect(created.status, created.text).toBe(201);

    const byFieldId = JSON.parse((await exportedText(suite.server, admin(), table, { format: 'jsonl' })).trimEnd());
    expect(byFieldId).toEqual({ id: created.body.row.id, version: '1', values: byId(table, values) });
    const byName = JSON.parse(
      (await exportedText(suite.server, admin(), table, { format: 'jsonl', fieldNames: true })).trimEnd(),
    );
    expect(Object.entries(byName.values)).toEqual(Object.entries(values));

    const file = await download(
      suite.server,
      admin(),
      await exported(suite.server, admin(), table, { format: 'xlsx' }),
    );
    const workbook = new ExcelJS.Workbook();
    await workbook.xlsx.load(file.bytes as never);
    expect((workbook.worksheets[0]!.getRow(2).values as unknown[]).slice(1)).toEqual(Object.values(values));
  });

  it('applies where, orderBy and fieldIds (ids or names, in the given order)', async () => {
    const table = await seededTable();
    const text = await exportedText(suite.server, admin(), table, {
      format: 'csv',
      where: { field: 'Int', op: 'gte', value: 0 },
      orderBy: [{ field: 'Int', direction: 'desc' }],
      fieldIds: ['Int', table.fields.Text!],
    });
    expect(text).toBe('Int,Text\n42,"He said ""hi"", then\nleft"\n0,\n');
  });

  it('exports through a view: its filter, order, column order and hidden columns (exportView)', async () => {
    const table = await seededTable();
    const definition = definitionOf(
      { where: { field: 'Int', op: 'gte', value: 0 }, orderBy: [{ field: 'Int', direction: 'asc' }] },
      {
        columnOrder: [table.fields.Int, table.fields.Text],
        hiddenColumns: FIELDS.slice(2)
          .filter((field) => field.name !== 'Int')
          .map((field) => table.fields[field.name]),
      },
    );
    const view = await views.postView(table, { definition, visibility: 'shared' });
    expect(view.status, view.text).toBe(201);
    const job = await exported(suite.server, admin(), table, { format: 'csv', viewId: view.body.id });
    expect(job.kind).toBe('exportView');
    expect((await download(suite.server, admin(), job)).text).toBe(
      'Int,Text,Long\n0,,\n42,"He said ""hi"", then\nleft","line 1\r\nline 2, with a comma; and a tab\t"\n',
    );
  });

  it('refuses bad requests with 422 and unknown tables, views and other orgs’ views with 404', async () => {
    const table = await seededTable([]);
    const refused = await requestExport(suite.server, admin(), table, { format: 'pdf' });
    expectError(refused, 422, 'VALIDATION_FAILED');
    expectError(
      await requestExport(suite.server, admin(), table, { format: 'csv', fieldIds: ['Nope'] }),
      422,
      'VALIDATION_FAILED',
    );
    expectError(
      await requestExport(suite.server, admin(), table, {
        format: 'csv',
        where: { field: 'Nope', op: 'eq', value: 1 },
      }),
      422,
      'VALIDATION_FAILED',
    );
    expectError(
      await requestExport(suite.server, admin(), table, { format: 'csv', fileName: 'a/b.csv' }),
      422,
      'VALIDATION_FAILED',
    );
    expectError(
      await requestExport(
        suite.server,
        admin(),
        { ...table, path: table.path.replace(table.tableId, '01ARZ3NDEKTSV4RRFFQ69G5FAV') },
        { format: 'csv' },
      ),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(
      await requestExport(suite.server, admin(), table, { format: 'csv', viewId: '01ARZ3NDEKTSV4RRFFQ69G5FAV' }),
      404,
      'RESOURCE_NOT_FOUND',
    );

    const other = await createOrg(suite.server.prisma);
    const otherTable = await createTable(suite.server, other, [{ name: 'Name', type: 'text' }]);
    const otherView = await views.postView(otherTable, { visibility: 'shared' }, other.adminKey);
    expect(otherView.status, otherView.text).toBe(201);
    expectError(
      await requestExport(suite.server, admin(), table, { format: 'csv', viewId: otherView.body.id }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(await requestExport(suite.server, admin(), otherTable, { format: 'csv' }), 404, 'RESOURCE_NOT_FOUND');
  });

  it('needs read authority; a personal view exports only for its owner', async () => {
    const table = await seededTable([ROWS[0]!]);
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    const job = await exported(suite.server, viewer.apiKey, table, { format: 'jsonl' });
    expect(job.state).toBe('succeeded');
    const personal = await views.postView(table, { visibility: 'personal' });
    expect(personal.status, personal.text).toBe(201);
    expectError(
      await requestExport(suite.server, viewer.apiKey, table, { format: 'csv', viewId: personal.body.id }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expect((await exported(suite.server, admin(), table, { format: 'csv', viewId: personal.body.id })).state).toBe(
      'succeeded',
    );
    expectError(await requestExport(suite.server, 'wds_not_a_key', table, { format: 'csv' }), 401, 'UNAUTHENTICATED');
    const missingKey = await suite.server.request('POST', `${table.path}/exports`, {
      token: admin(),
      body: { format: 'csv' },
    });
    expect(missingKey.status, missingKey.text).toBe(400);
  });

  it('records queued and succeeded events under `exports` with fileName and affectedRows', async () => {
    const table = await seededTable();
    await exported(suite.server, admin(), table, {
      format: 'csv',
      fileName: 'feed.csv',
      where: { field: 'Int', op: 'gte', value: 0 },
    });
    const entries = (await tableActivity(suite.server, admin(), table)).filter((entry) => entry.category === 'exports');
    expect(entries.map((entry) => entry.event)).toEqual(['job.exportRows.queued', 'job.exportRows.succeeded']);
    expect(entries[0]).toMatchObject({ fileName: 'feed.csv' });
    expect(entries[1]).toMatchObject({ fileName: 'feed.csv', affectedRows: 2 });
  });

  it('fails an XLSX export of more rows than a sheet holds with a clear error', async () => {
    const table = await seededTable([]);
    const client = new pg.Client({ connectionString: suite.server.database.url });
    await client.connect();
    await client.query(`INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)} (id, version, created_at, updated_at)
      SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now() FROM generate_series(1, 1048576) AS g`);
    await client.end();
    const job = await exported(suite.server, admin(), table, { format: 'xlsx' });
    expect(job.state).toBe('failed');
    expect(job.error).toMatchObject({
      code: 'VALIDATION_FAILED',
      details: { format: 'xlsx', limit: 1048575, rows: 1048576 },
    });
    expect(job.artifacts).toEqual([]);
  });
});

function unzip(bytes: Buffer): Promise<Map<string, string>> {
  return new Promise((resolve, reject) => {
    yauzl.fromBuffer(bytes, { lazyEntries: true }, (error, zip) => {
      if (error || !zip) return reject(error);
      const files = new Map<string, string>();
      zip.on('entry', (entry: yauzl.Entry) => {
        zip.openReadStream(entry, (streamError, stream) => {
          if (streamError || !stream) return reject(streamError);
          const parts: Buffer[] = [];
          stream.on('data', (part: Buffer) => parts.push(part));
          stream.on('end', () => {
            files.set(entry.fileName, Buffer.concat(parts).toString('utf8'));
            zip.readEntry();
          });
        });
      });
      zip.on('end', () => resolve(files));
      zip.readEntry();
    });
  });
}

describe('POST …/databases/{databaseId}/exports', () => {
  it('archives schema.json and one file per table, read in one snapshot', async () => {
    const table = await seededTable();
    const second = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }], {
      databaseId: table.databaseId,
      name: 'Second',
    });
    expect((await createRow(suite.server, admin(), second, { [second.fields.Name!]: 'Only' })).status).toBe(201);
    const member = await addMember(suite.server.prisma, suite.org.orgId, 'member');
    const shared = await views.postView(second, { name: 'Shared', visibility: 'shared' });
    const mine = await views.postView(table, { name: 'Mine', visibility: 'personal' });
    const theirs = await views.postView(table, { name: 'Theirs', visibility: 'personal' }, member.apiKey);
    for (const view of [shared, mine, theirs]) expect(view.status, view.text).toBe(201);
    const accepted = await suite.server.request(
      'POST',
      `/v1/orgs/${table.orgId}/databases/${table.databaseId}/exports`,
      {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { format: 'csv', fileName: 'everything.zip' },
      },
    );
    expect(accepted.status, accepted.text).toBe(202);
    const job = await waitForJob(suite.server, admin(), accepted.body.statusUrl);
    expect(job).toMatchObject({ kind: 'exportDatabase', state: 'succeeded', result: { tables: 2, rowsDone: 5 } });
    const file = await download(suite.server, admin(), job);
    expect(file.headers.get('content-type')).toBe('application/zip');
    const files = await unzip(file.bytes);
    expect([...files.keys()]).toEqual(['schema.json', `tables/${table.tableId}.csv`, `tables/${second.tableId}.csv`]);
    const schema = JSON.parse(files.get('schema.json')!);
    expect(schema).toMatchObject({
      formatVersion: 1,
      format: 'csv',
      multiSelectSeparator: ', ',
      database: { id: table.databaseId },
    });
    expect(schema.tables.map((entry: any) => [entry.id, entry.name, entry.rows, entry.file])).toEqual([
      [table.tableId, expect.any(String), 4, `tables/${table.tableId}.csv`],
      [second.tableId, 'Second', 1, `tables/${second.tableId}.csv`],
    ]);
    expect(schema.tables[0].fields[3]).toEqual({
      id: table.fields.Num,
      name: 'Num',
      type: 'number',
      required: false,
      options: { precision: 15, scale: 3 },
    });
    expect(files.get(`tables/${second.tableId}.csv`)).toBe('Name\nOnly\n');
    // Shared views and the caller's own personal ones, in table order; another user's personal view stays theirs.
    const stored = await suite.server.prisma.savedView.findMany({
      where: { id: { in: [mine.body.id, shared.body.id] } },
    });
    const expected = [mine.body.id, shared.body.id].map((id) => stored.find((view) => view.id === id)!);
    expect(schema.views).toEqual(
      expected.map((view) => ({
        id: view.id,
        name: view.name,
        tableId: view.tableId,
        kind: view.visibility,
        schemaVersion: view.schemaVersion,
        definition: view.definition,
      })),
    );
    expect(expected.map((view) => [view.name, view.tableId])).toEqual([
      ['Mine', table.tableId],
      ['Shared', second.tableId],
    ]);
    expect(files.get(`tables/${table.tableId}.csv`)).toBe(
      await exportedText(suite.server, admin(), table, { format: 'csv' }),
    );
    const missing = await suite.server.request(
      'POST',
      `/v1/orgs/${table.orgId}/databases/01ARZ3NDEKTSV4RRFFQ69G5FAV/exports`,
      {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { format: 'csv' },
      },
    );
    expectError(missing, 404, 'RESOURCE_NOT_FOUND');
  });
});
