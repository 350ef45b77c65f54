import { describe, expect, it } from 'vitest';
import { exportedText } from './helpers/exports.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { importPreviewed, preview } from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { addUniqueRule, createRow, createTable, refreshSchemaVersion, type FieldSpec } from './helpers/workspace.ts';

/**
 * A table at the field cap (500) through every path that builds SQL or JSON per field: PostgreSQL functions take at
 * most 100 arguments, and JSONL exports past 50 fields once failed on exactly that.
 */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;

const TYPES = ['text', 'integer', 'number', 'boolean', 'date', 'json', 'email'] as const;
const FIELDS: FieldSpec[] = Array.from({ length: 500 }, (_unused, index) => ({
  name: `F${index}`,
  type: TYPES[index % TYPES.length]!,
}));

function valueFor(index: number, round: number): unknown {
  switch (TYPES[index % TYPES.length]) {
    case 'text':
      return `t${index} "${round}"`;
    case 'integer':
      return index * 10 + round;
    case 'number':
      return index + round / 4;
    case 'boolean':
      return (index + round) % 2 === 0;
    case 'date':
      return `2024-0${1 + (round % 9)}-1${index % 10}`;
    case 'json':
      return { index, round, list: [round] };
    default:
      return `user${index}.${round}@example.com`;
  }
}

describe('a 500-field table', () => {
  it('creates, batches, reads, filters, updates, keeps history, exports, previews and imports rows with every field set', async () => {
    const table = await createTable(suite.server, suite.org, FIELDS);
    const byId = (round: number) =>
      Object.fromEntries(FIELDS.map((field, index) => [table.fields[field.name]!, valueFor(index, round)]));

    const created = await createRow(suite.server, admin(), table, byId(1));
    expect(created.status, created.text).toBe(201);
    const rowPath = `${table.path}/rows/${created.body.row.id}`;
    expect(created.body.row.values).toEqual(byId(1));

    const updated = await suite.server.request('PATCH', rowPath, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1', values: byId(2) },
    });
    expect(updated.status, updated.text).toBe(200);
    const read = await suite.server.request('GET', rowPath, { token: admin() });
    expect(read.body.values).toEqual(byId(2));

    const last = FIELDS.at(-1)!.name;
    const queried = await suite.server.request('POST', `${table.path}/rows/query`, {
      token: admin(),
      body: {
        where: { field: last, op: 'eq', value: valueFor(499, 2) },
        orderBy: [{ field: 'F1', direction: 'desc' }],
      },
    });
    expect(queried.status, queried.text).toBe(200);
    expect(queried.body.data.map((row: { id: string }) => row.id)).toEqual([created.body.row.id]);

    const history = await suite.server.request('GET', `${rowPath}/history?limit=100`, { token: admin() });
    expect(history.status, history.text).toBe(200);
    expect(history.body.data).toHaveLength(100);

    const jsonl = JSON.parse((await exportedText(suite.server, admin(), table, { format: 'jsonl' })).trimEnd());
    expect(jsonl.values).toEqual(byId(2));
    const csv = await exportedText(suite.server, admin(), table, { format: 'csv' });

    const target = await createTable(suite.server, suite.org, FIELDS);
    const rule = await addUniqueRule(suite.server, admin(), target, {
      fieldIds: FIELDS.filter((_field, index) => index % 7 === 1)
        .slice(0, 8)
        .map((field) => field.name),
    });
    expect(rule.job.state, JSON.stringify(rule.job)).toBe('succeeded');
    // An import maps at most 200 columns (spec 4.6); the others stay empty.
    const mapped = FIELDS.slice(0, 200);
    const ruled = await refreshSchemaVersion(suite.server, admin(), target);
    const previewed = await preview(suite.server, admin(), ruled, {
      content: csv,
      mapping: mapped.map((field) => ({ source: field.name, fieldId: target.fields[field.name]! })),
    });
    expect(previewed.state, JSON.stringify(previewed)).toBe('succeeded');
    const imported = await importPreviewed(suite.server, admin(), ruled, previewed.jobId, 'all-or-nothing');
    expect(imported.state, JSON.stringify(imported)).toBe('succeeded');
    const rows = await suite.server.request('GET', `${target.path}/rows`, { token: admin() });
    const expected = FIELDS.map((_field, index) => (index < mapped.length ? valueFor(index, 2) : null));
    expect(rows.body.data.map((row: { values: Record<string, unknown> }) => Object.values(row.values))).toEqual([
      expected,
    ]);

    const batch = await suite.server.request('POST', `${table.path}/rows/batch`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: {
        expectedSchemaVersion: table.schemaVersion,
        operations: [3, 4, 5].map((round) => ({ op: 'create', values: byId(round) })),
      },
    });
    expect(batch.status, batch.text).toBe(200);
    expect(batch.body.results.map((result: { row: { values: unknown } }) => result.row.values)).toEqual([
      byId(3),
      byId(4),
      byId(5),
    ]);
  });
});
