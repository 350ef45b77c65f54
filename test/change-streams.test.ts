import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPrisma, type PrismaClient } from '../src/db/prisma.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { openEventStream } from './helpers/event-stream.ts';
import { createOrg, type TestOrg } from './helpers/factories.ts';
import { startApiProcess, type ApiProcess } from './helpers/processes.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Issue 27: a change stream whose client leaves while it waits on an armed feed ends. It used to spin: its signal,
 * closed, resolved every wait at once while the arm still held for the database's other readers, and the loop never
 * yielded — the process answered nothing more and burnt a core until it was killed. The service runs as its own
 * process here (`npm start`), so that a process starved that way fails this test instead of hanging the test run.
 */
let database: TestDatabase;
let prisma: PrismaClient;
let api: ApiProcess;
let org: TestOrg;
let table: TestTable;

beforeAll(async () => {
  database = await createTestDatabase();
  prisma = createPrisma(database.url, 2);
  api = await startApiProcess(database, prisma);
  org = await createOrg(prisma);
  table = await createTable(api, org, [{ name: 'Code', type: 'text' }]);
});
afterAll(async () => {
  await api?.stop();
  await prisma?.$disconnect();
  await database?.drop();
});

const streamOf = () =>
  openEventStream(`${api.url}/v1/orgs/${org.orgId}/databases/${table.databaseId}/changes`, {
    headers: { authorization: `Bearer ${org.adminKey}`, accept: 'text/event-stream' },
  });

describe('a stream whose client leaves', () => {
  it('ends while it waits on an armed feed; the process goes on answering and the other reader still follows', async () => {
    const leaving = await streamOf();
    const staying = await streamOf();
    // Both read the quiet feed to its end, one arms it, both wait for its NOTIFY.
    await new Promise((resolve) => setTimeout(resolve, 500));
    leaving.close();
    await new Promise((resolve) => setTimeout(resolve, 200));

    const health = await fetch(`${api.url}/healthz`, { signal: AbortSignal.timeout(5_000) });
    expect(health.status).toBe(200);
    const created = await createRow(api, org.adminKey, table, { Code: 'after' });
    expect(created.status, created.text).toBe(201);
    const event = await staying.next();
    staying.close();
    expect(event).toMatchObject({ event: 'message', data: { kind: 'row.created', rowId: created.body.row.id } });
  });
});
