import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../src/http/app.ts';
import { createLogger } from '../src/kernel/log.ts';
import { Page } from '../src/contracts/pages.ts';
import { RowDeletionResponse, RowResponse } from '../src/contracts/rows.ts';
import { expectError } from './helpers/expectations.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { send, type TestServer } from './helpers/server.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/** Capacity: the per-table row limit (also under concurrency) and the row size limit, on a server with tiny limits. */
const ROW_LIMIT = 3;
const SIZE_LIMIT = 2048;
const suite = useServerWithOrg({ TABLE_ROW_LIMIT: String(ROW_LIMIT), ROW_SIZE_LIMIT_BYTES: String(SIZE_LIMIT) });

const admin = () => suite.org.adminKey;

function notesTable(): Promise<TestTable> {
  return createTable(suite.server, suite.org, [{ name: 'Notes', type: 'longText' }]);
}

async function rowsOf(table: TestTable) {
  const response = await suite.server.request('GET', `${table.path}/rows`, { token: admin() });
  expect(response.status, response.text).toBe(200);
  return Page(RowResponse).parse(response.body).data;
}

const rowActivityCount = (table: TestTable) =>
  suite.server.prisma.activityEvent.count({ where: { tableId: table.tableId, event: 'records.changed' } });

function expectRowLimitReached(response: Awaited<ReturnType<typeof createRow>>) {
  expectError(response, 409, 'ROW_LIMIT_REACHED');
  expect(response.body.error.details).toEqual({ limit: ROW_LIMIT });
}

describe('TABLE_ROW_LIMIT', () => {
  it('refuses the row beyond the limit with 409 ROW_LIMIT_REACHED, and takes one again after a delete', async () => {
    const table = await notesTable();
    const created = [];
    for (let index = 0; index < ROW_LIMIT; index += 1) {
      const response = await createRow(suite.server, admin(), table, { Notes: `row ${index}` });
      expect(response.status, response.text).toBe(201);
      created.push(response.body.row);
    }
    expectRowLimitReached(await createRow(suite.server, admin(), table, { Notes: 'one too many' }));
    expect(await rowsOf(table)).toHaveLength(ROW_LIMIT);
    expect(await rowActivityCount(table)).toBe(ROW_LIMIT);

    const deleted = await suite.server.request('DELETE', `${table.path}/rows/${created[0].id}`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1' },
    });
    expect(deleted.status, deleted.text).toBe(200);
    const replacement = await createRow(suite.server, admin(), table, { Notes: 'fits again' });
    expect(replacement.status, replacement.text).toBe(201);
    expect((await rowsOf(table)).map((row) => row.id)).toEqual([created[1].id, created[2].id, replacement.body.row.id]);
  });

  it('never exceeds the limit under 10 concurrent creates into an empty table', async () => {
    const table = await notesTable();
    const responses = await Promise.all(
      Array.from({ length: 10 }, (_, index) => createRow(suite.server, admin(), table, { Notes: `racer ${index}` })),
    );
    const created = responses.filter((response) => response.status === 201);
    expect(created).toHaveLength(ROW_LIMIT);
    for (const response of responses.filter((candidate) => candidate.status !== 201)) expectRowLimitReached(response);
    expect((await rowsOf(table)).map((row) => row.id).sort()).toEqual(
      created.map((response) => response.body.row.id).sort(),
    );
  });
});

describe('ROW_SIZE_LIMIT_BYTES', () => {
  it('refuses a create whose values exceed the limit with 413 ROW_SIZE_LIMIT, and writes nothing', async () => {
    const table = await notesTable();
    const notes = 'x'.repeat(3000);
    const response = await createRow(suite.server, admin(), table, { Notes: notes });
    expectError(response, 413, 'ROW_SIZE_LIMIT');
    // The size is that of the values as the client would read them back: {"<field id>":"xxx…"}.
    const sizeBytes = Buffer.byteLength(JSON.stringify({ [table.fields.Notes!]: notes }));
    expect(response.body.error.details).toEqual({ sizeBytes, limitBytes: SIZE_LIMIT });
    expect(await rowsOf(table)).toHaveLength(0);
    expect(await rowActivityCount(table)).toBe(0);
  });

  it('refuses an update that would grow the row past the limit, and leaves the row as it was', async () => {
    const table = await notesTable();
    const created = await createRow(suite.server, admin(), table, { Notes: 'short' });
    expect(created.status, created.text).toBe(201);
    const grown = await suite.server.request('PATCH', `${table.path}/rows/${created.body.row.id}`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1', values: { Notes: 'y'.repeat(3000) } },
    });
    expectError(grown, 413, 'ROW_SIZE_LIMIT');
    expect(grown.body.error.details).toMatchObject({ limitBytes: SIZE_LIMIT });
    expect(await rowsOf(table)).toEqual([created.body.row]);
    expect(await rowActivityCount(table)).toBe(1);
  });
});

describe('ROW_SIZE_LIMIT_BYTES on a restore', () => {
  // A second app over the suite's database whose limit is 4× larger: a row written there no longer fits here, as
  // after an operator lowers the limit. Restore is the one write whose values the client does not send.
  let roomy: TestServer;
  let close: () => Promise<void>;
  beforeAll(async () => {
    const server = createServer(
      createApp({
        prisma: suite.server.prisma,
        config: { ...suite.server.config, ROW_SIZE_LIMIT_BYTES: SIZE_LIMIT * 4 },
        logger: createLogger('silent'),
      }),
    );
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    roomy = { ...suite.server, url, request: (method, path, options = {}) => send(url, method, path, options) };
    close = async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    };
  });
  afterAll(() => close());

  const restore = (server: TestServer, table: TestTable, rowId: string, expectedVersion: string) =>
    server.request('POST', `${table.path}/rows/${rowId}/restore`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion },
    });

  it('refuses a deleted row over today’s limit with 413 ROW_SIZE_LIMIT, as a create, and leaves it deleted', async () => {
    const table = await notesTable();
    const notes = 'x'.repeat(3000);
    const created = await createRow(roomy, admin(), table, { Notes: notes });
    expect(created.status, created.text).toBe(201);
    const deleted = await suite.server.request('DELETE', `${table.path}/rows/${created.body.row.id}`, {
      token: admin(),
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1' },
    });
    expect(deleted.status, deleted.text).toBe(200);
    const { version } = RowDeletionResponse.parse(deleted.body);

    const refused = await restore(suite.server, table, created.body.row.id, version);
    expectError(refused, 413, 'ROW_SIZE_LIMIT');
    const sizeBytes = Buffer.byteLength(JSON.stringify({ [table.fields.Notes!]: notes }));
    expect(refused.body.error.details).toEqual({ sizeBytes, limitBytes: SIZE_LIMIT });
    expect(await rowsOf(table)).toEqual([]);
    expect(await rowActivityCount(table)).toBe(2);

    const restored = await restore(roomy, table, created.body.row.id, version);
    expect(restored.status, restored.text).toBe(200);
    expect(restored.body.row.values).toEqual({ [table.fields.Notes!]: notes });
  });
});
