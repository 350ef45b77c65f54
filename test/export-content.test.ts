import { describe, expect, it } from 'vitest';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { exported, exportedText, requestExport } from './helpers/exports.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { mappingOf, requestPreview } from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Issue 26 §10: CSV cells a spreadsheet would run as formulas are prefixed with `'` (OWASP CSV injection), unless
 * the export asks for raw values; file names refuse bidirectional control characters.
 */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;

const CELLS = ['=1+1', '+SUM(A1)', '-2', '@cmd', '\tTab', '\rReturn', 'plain', "'quoted"];

async function formulaTable(): Promise<TestTable> {
  const table = await createTable(suite.server, suite.org, [
    { name: '=Label', type: 'text' },
    { name: 'Count', type: 'integer' },
    { name: 'Tags', type: 'multiSelect', options: { choices: ['-x', 'y'] } },
  ]);
  for (const [index, cell] of CELLS.entries()) {
    const values = {
      [table.fields['=Label']!]: cell,
      [table.fields.Count!]: -index,
      [table.fields.Tags!]: index === 0 ? ['-x'] : [],
    };
    const created = await createRow(suite.server, admin(), table, values);
    expect(created.status, created.text).toBe(201);
  }
  return table;
}

const ORDER = (table: TestTable) => [{ field: table.fields.Count!, direction: 'desc' }];

describe('CSV formula escaping', () => {
  it('prefixes text cells and header names that begin with =, +, -, @, tab or CR; numbers stay numbers', async () => {
    const table = await formulaTable();
    const text = await exportedText(suite.server, admin(), table, { format: 'csv', orderBy: ORDER(table) });
    expect(text).toBe(
      [
        "'=Label,Count,Tags",
        "'=1+1,0,'-x",
        "'+SUM(A1),-1,",
        "'-2,-2,",
        "'@cmd,-3,",
        "'\tTab,-4,",
        '"\'\rReturn",-5,',
        'plain,-6,',
        "'quoted,-7,",
        '',
      ].join('\n'),
    );
  });

  it('exports the raw values with escapeFormulas: false', async () => {
    const table = await formulaTable();
    const text = await exportedText(suite.server, admin(), table, {
      format: 'csv',
      orderBy: ORDER(table),
      escapeFormulas: false,
    });
    expect(text.split('\n').slice(0, 3)).toEqual(['=Label,Count,Tags', '=1+1,0,-x', '+SUM(A1),-1,']);
  });

  it('leaves JSONL values exact whatever the option', async () => {
    const table = await formulaTable();
    const text = await exportedText(suite.server, admin(), table, {
      format: 'jsonl',
      orderBy: ORDER(table),
      fieldNames: true,
    });
    expect(JSON.parse(text.split('\n')[0]!).values).toEqual({ '=Label': '=1+1', Count: 0, Tags: ['-x'] });
  });

  it('refuses an escapeFormulas that is not a boolean: 422 at body.escapeFormulas', async () => {
    const table = await formulaTable();
    const accepted = await suite.server.request(
      'POST',
      `/v1/orgs/${table.orgId}/databases/${table.databaseId}/exports`,
      {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { format: 'csv', escapeFormulas: 'yes' },
      },
    );
    expectError(accepted, 422, 'VALIDATION_FAILED');
    expectProblemPaths(accepted, [['body', 'escapeFormulas']]);
  });
});

describe('bidirectional control characters in file names', () => {
  const BIDI = ['\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069'];

  it('refuses them in an export’s file name: 422 at fileName, for every one of the nine', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    for (const control of BIDI) {
      const refused = await requestExport(suite.server, admin(), table, {
        format: 'csv',
        fileName: `invoice${control}vsc.exe`,
      });
      expectError(refused, 422, 'VALIDATION_FAILED');
      expectProblemPaths(refused, [['body', 'fileName']]);
    }
    const archive = await suite.server.request(
      'POST',
      `/v1/orgs/${table.orgId}/databases/${table.databaseId}/exports`,
      {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { format: 'csv', fileName: 'all\u202epiz.exe' },
      },
    );
    expectError(archive, 422, 'VALIDATION_FAILED');
    expectProblemPaths(archive, [['body', 'fileName']]);
  });

  it('refuses them in an import’s file name', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    const refused = await requestPreview(suite.server, admin(), table, {
      content: 'Name\nAda\n',
      fileName: 'people\u2066.csv',
      mapping: mappingOf(table, ['Name']),
    });
    expectError(refused, 422, 'VALIDATION_FAILED');
    expectProblemPaths(refused, [['body', 'fileName']]);
  });

  it('drops them from a default file name made from a table name', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }], {
      name: `Report\u202egpj.exe`,
    });
    const job = await exported(suite.server, admin(), table, { format: 'csv' });
    expect(job.artifacts[0].name).toBe('Reportgpj.exe.csv');
  });
});
