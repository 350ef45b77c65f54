import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { columnOf, rowsTableOf } from '../src/data/identifiers.ts';
import type { JobResponse } from '../src/contracts/job-results.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { allRows, tableActivity } from './helpers/jobs.ts';
import { conversionLeftovers, NO_LEFTOVERS, schemaChangeApi } from './helpers/schema-changes.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type FieldSpec, type TestTable } from './helpers/workspace.ts';

/**
 * convert_field (endpoint 5): each supported pair with values that convert exactly and values that do not (never
 * rounded), the fail and empty modes with their `unconvertible.jsonl` report, and writes made while the backfill
 * runs. The backfill is paused at exact points by holding row locks from the test (no sleeps): the worker's own
 * statements wait, and pg_stat_activity shows when they do.
 */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;
type Body = Record<string, unknown>;

const { apply, accepted, finished, schemaOf } = schemaChangeApi(suite);

/** A one-field table holding these values (one row each, in order); returns the table and the row ids. */
async function tableWith(
  field: FieldSpec,
  values: unknown[],
): Promise<{ table: TestTable; rowIds: string[]; fieldId: string }> {
  const table = await createTable(suite.server, suite.org, [{ name: 'Label', type: 'text' }, field]);
  const rowIds: string[] = [];
  for (const [index, value] of values.entries()) {
    const response = await createRow(suite.server, admin(), table, { Label: `row ${index}`, [field.name]: value });
    expect(response.status, response.text).toBe(201);
    rowIds.push(response.body.row.id);
  }
  return { table, rowIds, fieldId: table.fields[field.name]! };
}

/** The field's value per row id. */
async function valuesById(table: TestTable, fieldId: string): Promise<Record<string, unknown>> {
  return Object.fromEntries((await allRows(suite.server, admin(), table)).map((row) => [row.id, row.values[fieldId]]));
}

async function unconvertibleReport(job: ReturnType<typeof JobResponse.parse>): Promise<Body[]> {
  const artifact = job.artifacts.find((item) => item.name === 'unconvertible.jsonl');
  expect(artifact, JSON.stringify(job)).toBeDefined();
  expect(artifact!.contentType).toBe('application/x-ndjson');
  const response = await suite.server.request('GET', artifact!.url, { token: admin() });
  expect(response.status, response.text).toBe(200);
  expect(Buffer.byteLength(response.text)).toBe(artifact!.size);
  return response.text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line));
}

const leftovers = (table: TestTable) => conversionLeftovers(suite.server, table);
const NONE = NO_LEFTOVERS;

interface Case {
  from: FieldSpec;
  to: { type: string; options?: Body };
  /** [stored value, converted value or UNCONVERTIBLE] */
  values: [unknown, unknown][];
  /** The field as GET …/schema shows it afterwards. */
  field: { type: string; options: Body };
}
const UNCONVERTIBLE = Symbol('unconvertible');

const CASES: Record<string, Case> = {
  'text → integer': {
    from: { name: 'V', type: 'text' },
    to: { type: 'integer' },
    field: { type: 'integer', options: {} },
    values: [
      ['42', 42],
      ['-7', -7],
      ['+3', 3],
      ['007', 7],
      ['9007199254740991', 9007199254740991],
      ['9007199254740992', UNCONVERTIBLE],
      ['1.0', UNCONVERTIBLE],
      ['1e3', UNCONVERTIBLE],
      [' 5', UNCONVERTIBLE],
      ['five', UNCONVERTIBLE],
      [null, null],
      // "" is an empty cell (stored as null, docs/decisions/data-plane.md), so it stays empty rather than failing.
      ['', null],
    ],
  },
  'text → integer within min/max': {
    from: { name: 'V', type: 'text' },
    to: { type: 'integer', options: { min: 0, max: 10 } },
    field: { type: 'integer', options: { min: 0, max: 10 } },
    values: [
      ['0', 0],
      ['10', 10],
      ['11', UNCONVERTIBLE],
      ['-1', UNCONVERTIBLE],
    ],
  },
  'text → number (scale 2: never rounded)': {
    from: { name: 'V', type: 'text' },
    to: { type: 'number', options: { precision: 6, scale: 2 } },
    field: { type: 'number', options: { precision: 6, scale: 2 } },
    values: [
      ['1.23', 1.23],
      ['1.230', 1.23],
      ['1.234', UNCONVERTIBLE],
      ['.5', 0.5],
      ['-12', -12],
      ['1e2', 100],
      ['9999.99', 9999.99],
      ['10000', UNCONVERTIBLE],
      ['0.005', UNCONVERTIBLE],
      ['NaN', UNCONVERTIBLE],
      ['1,5', UNCONVERTIBLE],
    ],
  },
  'text → boolean': {
    from: { name: 'V', type: 'text' },
    to: { type: 'boolean' },
    field: { type: 'boolean', options: {} },
    values: [
      ['true', true],
      ['FALSE', false],
      ['True', true],
      ['yes', UNCONVERTIBLE],
      ['1', UNCONVERTIBLE],
    ],
  },
  'text → date': {
    from: { name: 'V', type: 'text' },
    to: { type: 'date' },
    field: { type: 'date', options: {} },
    values: [
      ['2024-02-29', '2024-02-29'],
      ['2023-02-29', UNCONVERTIBLE],
      ['2024-1-5', UNCONVERTIBLE],
      ['0000-01-01', UNCONVERTIBLE],
      ['2024-01-05T00:00:00.000Z', UNCONVERTIBLE],
      ['today', UNCONVERTIBLE],
    ],
  },
  'text → datetime': {
    from: { name: 'V', type: 'text' },
    to: { type: 'datetime' },
    field: { type: 'datetime', options: {} },
    values: [
      ['2024-01-02T03:04:05.678Z', '2024-01-02T03:04:05.678Z'],
      ['2024-01-02T03:04:05Z', UNCONVERTIBLE],
      ['2024-01-02 03:04:05', UNCONVERTIBLE],
      ['2024-01-02T24:00:00.000Z', UNCONVERTIBLE],
      ['2024-01-02', UNCONVERTIBLE],
    ],
  },
  'text → select': {
    from: { name: 'V', type: 'text' },
    to: { type: 'select', options: { choices: ['open', 'closed'] } },
    field: { type: 'select', options: { choices: ['open', 'closed'] } },
    values: [
      ['open', 'open'],
      ['closed', 'closed'],
      ['Open', UNCONVERTIBLE],
      ['pending', UNCONVERTIBLE],
    ],
  },
  'text → select (choices holding quotes, dollar quotes and placeholders)': {
    from: { name: 'V', type: 'text' },
    to: { type: 'select', options: { choices: ["it's", 'b$fn$c', '$SOURCE', '$1'] } },
    field: { type: 'select', options: { choices: ["it's", 'b$fn$c', '$SOURCE', '$1'] } },
    values: [
      ["it's", "it's"],
      ['b$fn$c', 'b$fn$c'],
      ['$SOURCE', '$SOURCE'],
      ['$1', '$1'],
      ['$2', UNCONVERTIBLE],
    ],
  },
  'text → multiSelect': {
    from: { name: 'V', type: 'text' },
    to: { type: 'multiSelect', options: { choices: ['a', 'b'] } },
    field: { type: 'multiSelect', options: { choices: ['a', 'b'] } },
    values: [
      ['a', ['a']],
      ['a, b', UNCONVERTIBLE],
    ],
  },
  'integer → number': {
    from: { name: 'V', type: 'integer' },
    to: { type: 'number', options: { precision: 5, scale: 2 } },
    field: { type: 'number', options: { precision: 5, scale: 2 } },
    values: [
      [0, 0],
      [-999, -999],
      [999, 999],
      [1000, UNCONVERTIBLE],
    ],
  },
  'number → integer': {
    from: { name: 'V', type: 'number', options: { precision: 10, scale: 2 } },
    to: { type: 'integer' },
    field: { type: 'integer', options: {} },
    values: [
      [2, 2],
      [-3, -3],
      [2.5, UNCONVERTIBLE],
      [0.01, UNCONVERTIBLE],
    ],
  },
  'number → number with a smaller scale': {
    from: { name: 'V', type: 'number', options: { precision: 10, scale: 3 } },
    to: { type: 'number', options: { precision: 10, scale: 1 } },
    field: { type: 'number', options: { precision: 10, scale: 1 } },
    values: [
      [1.5, 1.5],
      [2, 2],
      [1.25, UNCONVERTIBLE],
      [0.001, UNCONVERTIBLE],
    ],
  },
  'date → datetime': {
    from: { name: 'V', type: 'date' },
    to: { type: 'datetime' },
    field: { type: 'datetime', options: {} },
    values: [
      ['2024-02-29', '2024-02-29T00:00:00.000Z'],
      ['1999-12-31', '1999-12-31T00:00:00.000Z'],
    ],
  },
  'datetime → date (only midnight UTC: a time of day is never dropped)': {
    from: { name: 'V', type: 'datetime' },
    to: { type: 'date' },
    field: { type: 'date', options: {} },
    values: [
      ['2024-02-29T00:00:00.000Z', '2024-02-29'],
      ['2024-02-29T23:30:00.000Z', UNCONVERTIBLE],
      ['2024-03-01T00:00:00.001Z', UNCONVERTIBLE],
    ],
  },
  'select → multiSelect': {
    from: { name: 'V', type: 'select', options: { choices: ['a', 'b', 'c'] } },
    to: { type: 'multiSelect', options: { choices: ['a', 'b'] } },
    field: { type: 'multiSelect', options: { choices: ['a', 'b'] } },
    values: [
      ['a', ['a']],
      ['b', ['b']],
      ['c', UNCONVERTIBLE],
    ],
  },
  'integer → boolean': {
    from: { name: 'V', type: 'integer' },
    to: { type: 'boolean' },
    field: { type: 'boolean', options: {} },
    values: [
      [1, true],
      [0, false],
      [2, UNCONVERTIBLE],
      [-1, UNCONVERTIBLE],
    ],
  },
  'text → json (a JSON string)': {
    from: { name: 'V', type: 'text' },
    to: { type: 'json', options: { maxBytes: 12 } },
    field: { type: 'json', options: { maxBytes: 12, maxDepth: 16 } },
    // maxBytes counts the JSON text: "{\"a\":1}" is 11 bytes, "0123456789" 12, "0123456789A" 13.
    values: [
      ['{"a":1}', '{"a":1}'],
      ['abc', 'abc'],
      ['0123456789', '0123456789'],
      ['0123456789A', UNCONVERTIBLE],
    ],
  },
  'number → json': {
    from: { name: 'V', type: 'number', options: { precision: 10, scale: 2 } },
    to: { type: 'json' },
    field: { type: 'json', options: { maxBytes: 65536, maxDepth: 16 } },
    values: [
      [1.5, 1.5],
      [2, 2],
      [-0.01, -0.01],
    ],
  },
  'integer → text': {
    from: { name: 'V', type: 'integer' },
    to: { type: 'text', options: { maxLength: 5 } },
    field: { type: 'text', options: { maxLength: 5 } },
    values: [
      [42, '42'],
      [-1234, '-1234'],
      [123456, UNCONVERTIBLE],
    ],
  },
  'number → text (no trailing zeros)': {
    from: { name: 'V', type: 'number', options: { precision: 10, scale: 2 } },
    to: { type: 'text' },
    field: { type: 'text', options: { maxLength: 255 } },
    values: [
      [1.5, '1.5'],
      [100, '100'],
      [-0.25, '-0.25'],
    ],
  },
  'boolean → text': {
    from: { name: 'V', type: 'boolean' },
    to: { type: 'text' },
    field: { type: 'text', options: { maxLength: 255 } },
    values: [
      [true, 'true'],
      [false, 'false'],
    ],
  },
  'date → text': {
    from: { name: 'V', type: 'date' },
    to: { type: 'longText' },
    field: { type: 'longText', options: { maxLength: 100000 } },
    values: [['2024-02-29', '2024-02-29']],
  },
  'datetime → text': {
    from: { name: 'V', type: 'datetime' },
    to: { type: 'text' },
    field: { type: 'text', options: { maxLength: 255 } },
    values: [['2024-01-02T03:04:05.600Z', '2024-01-02T03:04:05.600Z']],
  },
  'select → text': {
    from: { name: 'V', type: 'select', options: { choices: ['open', 'closed'] } },
    to: { type: 'text' },
    field: { type: 'text', options: { maxLength: 255 } },
    values: [['open', 'open']],
  },
  'multiSelect → text': {
    from: { name: 'V', type: 'multiSelect', options: { choices: ['a', 'b'] } },
    to: { type: 'text' },
    field: { type: 'text', options: { maxLength: 255 } },
    values: [
      [['a', 'b'], 'a, b'],
      [['b'], 'b'],
      [[], null],
    ],
  },
  'email → text': {
    from: { name: 'V', type: 'email' },
    to: { type: 'text', options: { maxLength: 10 } },
    field: { type: 'text', options: { maxLength: 10 } },
    values: [
      ['a@b.co', 'a@b.co'],
      ['someone@example.com', UNCONVERTIBLE],
    ],
  },
  'text → text with a shorter maxLength': {
    from: { name: 'V', type: 'text' },
    to: { type: 'text', options: { maxLength: 3 } },
    field: { type: 'text', options: { maxLength: 3 } },
    values: [
      ['abc', 'abc'],
      ['äöü', 'äöü'],
      ['abcd', UNCONVERTIBLE],
    ],
  },
};

describe('convert_field: each supported pair', () => {
  it.each(Object.entries(CASES))(
    '%s: exact values convert; with onUnconvertible empty the others are emptied and reported',
    async (_name, testCase) => {
      const { table, rowIds, fieldId } = await tableWith(
        testCase.from,
        testCase.values.map(([value]) => value),
      );
      const bad = testCase.values.flatMap(([value, converted], index) =>
        converted === UNCONVERTIBLE ? [{ rowId: rowIds[index]!, value }] : [],
      );
      const handle = accepted(
        await apply(table, {
          kind: 'convert_field',
          fieldId,
          type: testCase.to.type,
          options: testCase.to.options,
          onUnconvertible: 'empty',
        }),
      );
      const job = await finished(handle.statusUrl);
      expect(job.kind).toBe('applySchemaChange');
      expect(job.state, JSON.stringify(job)).toBe(bad.length > 0 ? 'partially_completed' : 'succeeded');
      const schema = await schemaOf(table);
      expect(schema.schemaVersion).toBe(table.schemaVersion + 1);
      expect(schema.fields[1]).toEqual({ id: fieldId, name: 'V', required: false, position: 1, ...testCase.field });
      const expected = Object.fromEntries(
        testCase.values.map(([, converted], index) => [rowIds[index], converted === UNCONVERTIBLE ? null : converted]),
      );
      expect(await valuesById(table, fieldId)).toEqual(expected);
      expect(job.result).toEqual({
        fieldId,
        schemaVersion: table.schemaVersion + 1,
        converted: testCase.values.length - bad.length,
        emptied: bad.length,
        report: {
          name: 'unconvertible.jsonl',
          size: expect.any(Number),
          sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
          rows: bad.length,
          truncated: false,
        },
      });
      expect(await unconvertibleReport(job)).toEqual(
        bad.map(({ rowId, value }) => ({
          rowId,
          fieldId,
          value,
          code: 'UNCONVERTIBLE',
          message: expect.any(String),
        })),
      );
      expect(await leftovers(table)).toEqual(NONE);
      // The converted field takes writes of its new type.
      const typed = testCase.values.find(([, converted]) => converted !== UNCONVERTIBLE && converted !== null)![1];
      const write = await createRow(
        suite.server,
        admin(),
        { ...table, schemaVersion: schema.schemaVersion },
        { V: typed },
      );
      expect(write.status, write.text).toBe(201);
      expect(write.body.row.values[fieldId]).toEqual(typed);
    },
  );
});

describe('convert_field: values that cannot convert', () => {
  it('fail mode: the job fails with VALIDATION_FAILED, the report lists exactly those rows, the table is unchanged', async () => {
    const values = ['1', 'x', '2', '2.5', null, '3'];
    const { table, rowIds, fieldId } = await tableWith({ name: 'V', type: 'text', options: { maxLength: 20 } }, values);
    const before = await schemaOf(table);
    const valuesBefore = await valuesById(table, fieldId);
    const job = await finished(
      accepted(await apply(table, { kind: 'convert_field', fieldId, type: 'integer' })).statusUrl,
    );
    expect(job.state).toBe('failed');
    expect(job.error).toEqual({
      code: 'VALIDATION_FAILED',
      message: expect.stringContaining('2 values cannot be converted'),
      details: { unconvertible: 2 },
    });
    expect(job.result).toMatchObject({
      unconvertible: 2,
      report: { name: 'unconvertible.jsonl', rows: 2, truncated: false },
    });
    expect(await unconvertibleReport(job)).toEqual(
      [
        { rowId: rowIds[1], fieldId, value: 'x', code: 'UNCONVERTIBLE', message: expect.any(String) },
        { rowId: rowIds[3], fieldId, value: '2.5', code: 'UNCONVERTIBLE', message: expect.any(String) },
      ].sort((a, b) => a.rowId!.localeCompare(b.rowId!)),
    );
    expect(await schemaOf(table)).toEqual(before);
    expect(await valuesById(table, fieldId)).toEqual(valuesBefore);
    expect(await leftovers(table)).toEqual(NONE);
    // The table still takes text in the field, and the next change needs the unchanged version.
    expect((await createRow(suite.server, admin(), table, { V: 'still text' })).status).toBe(201);
    const events = (await tableActivity(suite.server, admin(), table))
      .filter((entry) => entry.jobId === job.jobId)
      .map((entry) => entry.event);
    expect(events).toEqual(['job.applySchemaChange.queued', 'job.applySchemaChange.failed']);
  });

  it('a required field stays required after its conversion, and its cells all converted', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'V', type: 'text', required: true }]);
    for (const value of ['1', '2'])
      expect((await createRow(suite.server, admin(), table, { V: value })).status).toBe(201);
    const job = await finished(
      accepted(await apply(table, { kind: 'convert_field', fieldId: table.fields.V, type: 'integer' })).statusUrl,
    );
    expect(job.state, JSON.stringify(job)).toBe('succeeded');
    const schema = await schemaOf(table);
    expect(schema.fields[0]).toMatchObject({ type: 'integer', required: true });
    const current = { ...table, schemaVersion: schema.schemaVersion };
    expect((await createRow(suite.server, admin(), current, {})).status).toBe(422);
    expect(Object.values(await valuesById(table, table.fields.V!)).sort()).toEqual([1, 2]);
    // Cell history is not rewritten: it still shows the text that was written.
    const rowId = Object.keys(await valuesById(table, table.fields.V!))[0]!;
    const history = await suite.server.request('GET', `${table.path}/rows/${rowId}/history`, { token: admin() });
    expect(history.status, history.text).toBe(200);
    expect(history.body.data.map((entry: { value: unknown }) => typeof entry.value)).toEqual(['string']);
    const notNull = await suite.server.prisma.$queryRaw<{ nullable: string }[]>`
      SELECT is_nullable AS nullable FROM information_schema.columns
       WHERE table_schema = ${`d_${table.databaseId.toLowerCase()}`} AND table_name = ${`t_${table.tableId.toLowerCase()}`}
         AND column_name = ${`f_${table.fields.V!.toLowerCase()}`}`;
    expect(notNull).toEqual([{ nullable: 'NO' }]);
  });

  it('a conversion whose expected schema version moved on before it ran fails with SCHEMA_VERSION_CONFLICT and changes nothing', async () => {
    const { table, fieldId } = await tableWith({ name: 'V', type: 'text' }, ['1']);
    // The catalog row is held, so the job waits at its version check; meanwhile the version moves on.
    const catalog = await open();
    await catalog.client.query('UPDATE public.data_tables SET schema_version = schema_version + 1 WHERE id = $1', [
      table.tableId,
    ]);
    const handle = accepted(await apply(table, { kind: 'convert_field', fieldId, type: 'integer' }));
    await waitForLockWait('SELECT schema_version FROM public.data_tables WHERE id = $1::bpchar%');
    await catalog.release();
    const job = await finished(handle.statusUrl);
    expect(job).toMatchObject({
      state: 'failed',
      result: null,
      error: {
        code: 'SCHEMA_VERSION_CONFLICT',
        details: { expectedSchemaVersion: table.schemaVersion, currentSchemaVersion: table.schemaVersion + 1 },
      },
    });
    expect((await schemaOf(table)).fields[1]).toMatchObject({ type: 'text' });
    expect(await leftovers(table)).toEqual(NONE);
  });
});

/** A test-held connection: its transaction's locks pause the worker at a known point. */
class Session {
  private constructor(
    readonly client: pg.Client,
    readonly pid: number,
  ) {}

  static async open(): Promise<Session> {
    const client = new pg.Client({ connectionString: suite.server.database.url });
    await client.connect();
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    await client.query('BEGIN');
    return new Session(client, rows[0]!.pid);
  }

  async release(): Promise<void> {
    await this.client.query('COMMIT');
    await this.client.end();
  }
}

const sessions: Session[] = [];
afterEach(async () => {
  await Promise.all(sessions.splice(0).map((session) => session.release().catch(() => undefined)));
});

async function open(): Promise<Session> {
  const session = await Session.open();
  sessions.push(session);
  return session;
}

/** Waits until a backend (other than the test's sessions) waits on a lock while running a statement like `pattern`. */
async function waitForLockWait(pattern: string, timeoutMs = 30_000): Promise<void> {
  await expect
    .poll(
      async () =>
        (
          await suite.server.prisma.$queryRaw<{ pid: number }[]>`
    SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE ${pattern}`
        ).length,
      { timeout: timeoutMs, interval: 0, message: `nothing waited on a lock running ${pattern} in time` },
    )
    .toBeGreaterThan(0);
}

async function waitForPidWaiting(pid: number, timeoutMs = 30_000): Promise<void> {
  await expect
    .poll(
      async () =>
        (
          await suite.server.prisma.$queryRaw<{ waiting: boolean }[]>`
    SELECT wait_event_type = 'Lock' AS waiting FROM pg_stat_activity WHERE pid = ${pid}`
        )[0]?.waiting === true,
      { timeout: timeoutMs, interval: 0, message: `session ${pid} did not wait in time` },
    )
    .toBe(true);
}

/**
 * Starts a conversion and holds it between two backfill steps (shadow column and trigger in place): the catalog row
 * is held so the first step waits inside its transaction, then the job row is requested FOR SHARE behind it, so
 * the following steps cannot start until `resume()`. Row locks are not granted in strict order, so the worker may
 * slip one more step in before the gate holds: `done` says how many rows were backfilled at the pause.
 */
async function startPaused(
  table: TestTable,
  change: Body,
  phases: readonly string[] = ['backfill'],
): Promise<{ jobId: string; statusUrl: string; done: number; resume(): Promise<void> }> {
  const catalog = await open();
  await catalog.client.query('SELECT 1 FROM public.data_tables WHERE id = $1 FOR UPDATE', [table.tableId]);
  const handle = accepted(await apply(table, change));
  await waitForLockWait('SELECT schema_version FROM public.data_tables WHERE id = $1::bpchar%');
  const gate = await open();
  const held = gate.client.query('SELECT 1 FROM public.jobs WHERE id = $1 FOR SHARE', [handle.jobId]);
  await waitForPidWaiting(gate.pid);
  await catalog.release();
  await held;
  const job = await suite.server.prisma.job.findUniqueOrThrow({ where: { id: handle.jobId } });
  const journal = job.journal as { phase: string; done?: number; total?: number };
  expect(phases).toContain(journal.phase);
  // A cutover's journal holds `total` (every row backfilled), a backfill's `done`.
  const done = journal.phase === 'cutover' ? journal.total : journal.done;
  expect(done).toBeLessThanOrEqual(10_000);
  return { ...handle, done: done!, resume: () => gate.release() };
}

/** Holds one row: the backfill batch that reaches it waits (inside its transaction) until `release()`. */
async function holdRow(table: TestTable, rowId: string): Promise<Session> {
  const session = await open();
  await session.client.query(`SELECT 1 FROM ${rowsTableOf(table.databaseId, table.tableId)} WHERE id = $1 FOR UPDATE`, [
    rowId,
  ]);
  return session;
}

/**
 * Backfill batches are 5,000 rows, and a paused conversion has backfilled at most 10,000 (`startPaused`): with
 * 21,000 rows, every row a test holds or changes ahead of the backfill (up to the pause + 10,001) exists.
 */
const SEEDED = 21_000;
const seededId = (n: number) => `0${String(n).padStart(25, '0')}`;

/** `SEEDED` rows in one statement (ids 0…01 … 0…21000, before any API-made ULID), Code = their number as text. */
async function seededTable(): Promise<TestTable> {
  const table = await createTable(suite.server, suite.org, [
    { name: 'Name', type: 'text' },
    { name: 'Code', type: 'text', options: { maxLength: 30 } },
  ]);
  await suite.server.prisma.$executeRawUnsafe(
    `
    INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)} (id, version, created_at, updated_at, ${columnOf(table.fields.Name!)}, ${columnOf(table.fields.Code!)})
    SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), 'Seed ' || g, g::text FROM generate_series(1, $1::int) AS g`,
    SEEDED,
  );
  await suite.server.prisma.$executeRawUnsafe(
    'UPDATE public.data_tables SET row_count = $1 WHERE id = $2',
    SEEDED,
    table.tableId,
  );
  return table;
}

async function patchCode(table: TestTable, rowId: string, code: string): Promise<void> {
  const current = await suite.server.request('GET', `${table.path}/rows/${rowId}`, { token: admin() });
  expect(current.status, current.text).toBe(200);
  const response = await suite.server.request('PATCH', `${table.path}/rows/${rowId}`, {
    token: admin(),
    idempotencyKey: idempotencyKey(),
    body: { expectedVersion: current.body.version, values: { Code: code } },
  });
  expect(response.status, response.text).toBe(200);
}

async function addRow(table: TestTable, code: string): Promise<string> {
  const response = await createRow(suite.server, admin(), table, { Name: `written ${code}`, Code: code });
  expect(response.status, response.text).toBe(201);
  return response.body.row.id;
}

async function progressOf(jobId: string): Promise<{ state: string; done: number; total: number | null }> {
  const job = await suite.server.prisma.job.findUniqueOrThrow({ where: { id: jobId } });
  return {
    state: job.state,
    done: Number(job.progressDone),
    total: job.progressTotal === null ? null : Number(job.progressTotal),
  };
}

describe('writes during a backfill', () => {
  it('creates and updates made before and in the middle of the backfill all hold the converted value after the cutover', async () => {
    const table = await seededTable();
    const codeId = table.fields.Code!;
    const job = await startPaused(table, { kind: 'convert_field', fieldId: codeId, type: 'integer' });
    expect(await progressOf(job.jobId)).toEqual({ state: 'running', done: job.done, total: SEEDED });

    // Between two steps: a new row, and rows the backfill has not reached.
    const early = await addRow(table, '-1');
    await patchCode(table, seededId(job.done + 5), '500005');
    await patchCode(table, seededId(SEEDED - 1), '520999');

    // Inside a step: the second batch from here waits on a row it holds; the batch before it is committed.
    const held = await holdRow(table, seededId(job.done + 7_345));
    await job.resume();
    await waitForLockWait(`UPDATE ${rowsTableOf(table.databaseId, table.tableId)} t SET%`);
    expect(await progressOf(job.jobId)).toEqual({ state: 'running', done: job.done + 5_000, total: SEEDED });
    const late = await addRow(table, '77');
    await patchCode(table, seededId(2), '200002');
    await patchCode(table, seededId(job.done + 4_999), '525000');
    await held.release();

    const done = await finished(job.statusUrl);
    expect(done.state, JSON.stringify(done)).toBe('succeeded');
    expect(done.result).toMatchObject({ converted: SEEDED + 2, emptied: 0 });
    expect(done.progress).toEqual({ done: SEEDED + 2, total: SEEDED + 2 });

    const schema = await schemaOf(table);
    expect(schema.fields[1]).toMatchObject({ id: codeId, type: 'integer' });
    const values = await valuesById(table, codeId);
    expect(Object.keys(values)).toHaveLength(SEEDED + 2);
    expect(values[early]).toBe(-1);
    expect(values[late]).toBe(77);
    const changed = [2, job.done + 5, job.done + 4_999, SEEDED - 1];
    expect(changed.map((n) => values[seededId(n)])).toEqual([200002, 500005, 525000, 520999]);
    // Every other seeded row holds its number.
    const written = new Set(changed);
    const wrong = [];
    for (let n = 1; n <= SEEDED; n += 1) if (!written.has(n) && values[seededId(n)] !== n) wrong.push(n);
    expect(wrong).toEqual([]);
    expect(await leftovers(table)).toEqual(NONE);
  }, 120_000);

  it('fail mode: an unconvertible value written during the backfill fails the job and is reported; nothing changes', async () => {
    const table = await seededTable();
    const codeId = table.fields.Code!;
    const before = await schemaOf(table);
    const job = await startPaused(table, { kind: 'convert_field', fieldId: codeId, type: 'integer' });
    const held = await holdRow(table, seededId(job.done + 10_001));
    await job.resume();
    await waitForLockWait(`UPDATE ${rowsTableOf(table.databaseId, table.tableId)} t SET%`);
    expect((await progressOf(job.jobId)).done).toBe(job.done + 10_000);
    // A row already backfilled turns unconvertible, and a new one arrives unconvertible.
    await patchCode(table, seededId(7), 'seven');
    const fresh = await addRow(table, '8.5');
    await held.release();

    const done = await finished(job.statusUrl);
    expect(done.state).toBe('failed');
    expect(done.error).toMatchObject({ code: 'VALIDATION_FAILED', details: { unconvertible: 2 } });
    expect((await unconvertibleReport(done)).map((line) => [line.rowId, line.value])).toEqual([
      [seededId(7), 'seven'],
      [fresh, '8.5'],
    ]);
    expect(await schemaOf(table)).toEqual(before);
    const values = await valuesById(table, codeId);
    expect([values[seededId(1)], values[seededId(7)], values[fresh]]).toEqual(['1', 'seven', '8.5']);
    expect(await leftovers(table)).toEqual(NONE);
  }, 120_000);

  it('a value that became convertible again before the cutover is not reported', async () => {
    const table = await seededTable();
    const codeId = table.fields.Code!;
    const job = await startPaused(table, { kind: 'convert_field', fieldId: codeId, type: 'integer' });
    const rowId = await addRow(table, 'bad');
    await patchCode(table, rowId, '12');
    await job.resume();
    const done = await finished(job.statusUrl);
    expect(done.state, JSON.stringify(done)).toBe('succeeded');
    expect((await valuesById(table, codeId))[rowId]).toBe(12);
    expect(await unconvertibleReport(done)).toEqual([]);
  }, 120_000);
});

describe('writes that wait for the cutover', () => {
  /**
   * Holds a conversion inside its cutover transaction, after it has blocked writes: the cutover reads the job's side
   * table, which the test holds in ACCESS EXCLUSIVE mode (taken between two steps, while nothing else uses it). On a
   * table this small the step the worker may slip in before the gate holds ends the backfill: the pause then comes
   * with the cutover next, which is as good a place to take the lock.
   */
  async function holdInsideCutover(
    table: TestTable,
    change: Body,
  ): Promise<{ jobId: string; statusUrl: string; release(): Promise<void> }> {
    const job = await startPaused(table, change, ['backfill', 'cutover']);
    const side = await open();
    await side.client.query(
      `LOCK TABLE d_${table.databaseId.toLowerCase()}.y_${job.jobId.toLowerCase()} IN ACCESS EXCLUSIVE MODE`,
    );
    await job.resume();
    await waitForLockWait(`SELECT count(*)::int AS count%d_${table.databaseId.toLowerCase()}".y_%`);
    return { jobId: job.jobId, statusUrl: job.statusUrl, release: () => side.release() };
  }

  // The waiting statements are parsed after the swap, against the new column type, and fail with 42804; the row
  // write path explains that by the moved schema version, as it does an insert its guard refused.
  it('a row create or update sent with the old schema version gets 409 SCHEMA_VERSION_CONFLICT, not an error of the new column type', async () => {
    const { table, rowIds, fieldId } = await tableWith({ name: 'V', type: 'text' }, ['1', '2']);
    const job = await holdInsideCutover(table, { kind: 'convert_field', fieldId, type: 'integer' });
    const created = createRow(suite.server, admin(), table, { Label: 'late', V: '3' });
    const updated = suite.server.request('PATCH', `${table.path}/rows/${rowIds[0]}`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1', expectedSchemaVersion: table.schemaVersion, values: { V: '10' } },
    });
    await waitForLockWait(`%INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)}%`);
    await waitForLockWait(`%UPDATE ${rowsTableOf(table.databaseId, table.tableId)}%`);
    await job.release();
    expect((await finished(job.statusUrl)).state).toBe('succeeded');
    const [create, update] = await Promise.all([created, updated]);
    expect({ status: create.status, code: create.body?.error?.code }, create.text).toEqual({
      status: 409,
      code: 'SCHEMA_VERSION_CONFLICT',
    });
    expect({ status: update.status, code: update.body?.error?.code }, update.text).toEqual({
      status: 409,
      code: 'SCHEMA_VERSION_CONFLICT',
    });
    expect(await valuesById(table, fieldId)).toEqual({ [rowIds[0]!]: 1, [rowIds[1]!]: 2 });
  });
});

describe('convert_field of an autoNumber', () => {
  it('keeps the numbers as plain integers and drops the field’s sequence', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'Label', type: 'text' },
      { name: 'No', type: 'autoNumber', options: { start: 5 } },
    ]);
    for (const label of ['a', 'b'])
      expect((await createRow(suite.server, admin(), table, { Label: label })).status).toBe(201);
    const fieldId = table.fields.No!;
    const sequence = `d_${table.databaseId.toLowerCase()}.s_${fieldId.toLowerCase()}`;
    const sequenceExists = async () =>
      (
        await suite.server.prisma.$queryRaw<{ found: boolean }[]>`SELECT to_regclass(${sequence}) IS NOT NULL AS found`
      )[0]!.found;
    expect(await sequenceExists()).toBe(true);
    const job = await finished(
      accepted(await apply(table, { kind: 'convert_field', fieldId, type: 'integer' })).statusUrl,
    );
    expect(job.state, JSON.stringify(job)).toBe('succeeded');
    expect(Object.values(await valuesById(table, fieldId)).sort()).toEqual([5, 6]);
    const schema = await schemaOf(table);
    expect(schema.fields[1]).toMatchObject({ type: 'integer', required: false, options: {} });
    // An integer now: written by clients, no longer drawn from the sequence.
    const written = await createRow(
      suite.server,
      admin(),
      { ...table, schemaVersion: schema.schemaVersion },
      { Label: 'c', No: 42 },
    );
    expect(written.status, written.text).toBe(201);
    expect(written.body.row.values[fieldId]).toBe(42);
    expect(await sequenceExists()).toBe(false);
  });
});
