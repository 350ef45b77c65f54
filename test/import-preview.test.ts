import { describe, expect, it } from 'vitest';
import { preview, reportOf } from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createTable } from './helpers/workspace.ts';

describe('import preview', () => {
  const suite = useServerWithOrg();

  it('validates a CSV file into counts, a typed preview and an error report', async () => {
    const { server, org } = suite;
    const table = await createTable(server, org, [
      { name: 'Name', type: 'text', required: true },
      { name: 'Age', type: 'integer' },
    ]);
    const job = await preview(server, org.adminKey, table, {
      content: 'Name,Age\r\nAda,36\r\n"Grace, H",x\r\n,5\r\n',
      mapping: [{ source: 'Name', fieldId: table.fields.Name! }, { source: 'Age', fieldId: table.fields.Age! }],
    });
    expect(job.state, JSON.stringify(job)).toBe('succeeded');
    expect(job.result).toMatchObject({ totalRows: 3, validRows: 1, invalidRows: 2 });
    const report = await reportOf(server, org.adminKey, job);
    expect(report).toEqual([
      expect.objectContaining({ line: 3, column: 'Age', fieldId: table.fields.Age, code: 'TYPE_MISMATCH' }),
      expect.objectContaining({ line: 4, column: 'Name', fieldId: table.fields.Name, code: 'REQUIRED' }),
    ]);
  });
});
