import { describe, expect, it } from 'vitest';
import { SavedViewResponse } from '../src/contracts/views.ts';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { addMember, idempotencyKey } from './helpers/factories.ts';
import { mappingOf, requestPreview, waitForJob } from './helpers/jobs.ts';
import type { ApiResponse } from './helpers/server.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { definitionOf, savedView, viewClient } from './helpers/views.ts';
import { createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Issue 18 §5: spec §8 limits that were tested on one endpoint or none, now on each endpoint the spec names.
 * A refused request changes nothing: no row, no job, no new version.
 */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;
const views = viewClient(suite);

const MAX_SCHEMA_VERSION = 2_147_483_647;

/** A new member's path and their Member (spec 2.5) as the org's member list shows it (there is no GET of one). */
async function newMember(name: string) {
  const user = await addMember(suite.server.prisma, suite.org.orgId, 'member', name);
  const { id } = await suite.server.prisma.member.findFirstOrThrow({
    where: { orgId: suite.org.orgId, userId: user.userId },
  });
  const read = async () => {
    const response = await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/members?limit=100`, {
      token: admin(),
    });
    expect(response.status, response.text).toBe(200);
    return (response.body.data as { id: string; name: string; version: string }[]).find((member) => member.id === id)!;
  };
  return { path: `/v1/orgs/${suite.org.orgId}/members/${id}`, read };
}

async function counts(table: TestTable) {
  const { prisma } = suite.server;
  const [counted] = await prisma.$queryRawUnsafe<{ rows: number }[]>(
    `SELECT count(*)::int AS rows FROM "d_${table.databaseId.toLowerCase()}"."t_${table.tableId.toLowerCase()}"`,
  );
  const rows = counted!.rows;
  const jobs = await prisma.job.count({ where: { orgId: suite.org.orgId } });
  const { schemaVersion } = await prisma.dataTable.findUniqueOrThrow({
    where: { id: table.tableId },
    select: { schemaVersion: true },
  });
  return { rows, jobs, schemaVersion };
}

/** Endpoints 4, 5 and 6 with `expectedSchemaVersion` set to `version` and an otherwise valid body. */
const SCHEMA_VERSIONED: [string, (table: TestTable, version: unknown) => Promise<ApiResponse>][] = [
  [
    'create row (6)',
    (table, version) =>
      suite.server.request('POST', `${table.path}/rows`, {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { expectedSchemaVersion: version, values: { Name: 'Ada' } },
      }),
  ],
  [
    'import preview (4)',
    (table, version) =>
      requestPreview(suite.server, admin(), table, {
        content: 'Name\nAda\n',
        mapping: mappingOf(table, ['Name']),
        expectedSchemaVersion: version as number,
      }),
  ],
  [
    'schema operation (5)',
    (table, version) =>
      suite.server.request('POST', `${table.path}/schema/operations`, {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { expectedSchemaVersion: version, change: { kind: 'add_field', field: { name: 'Extra', type: 'text' } } },
      }),
  ],
];

describe('expectedSchemaVersion is an integer in 1..2147483647 (spec §8) on create row, import preview and schema operations', () => {
  for (const [endpoint, send] of SCHEMA_VERSIONED) {
    it(`${endpoint}: 0, -1, 2147483648, 1.5 and "1" are 422 naming it; 2147483647 passes validation and is stale (409)`, async () => {
      const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
      const before = await counts(table);
      for (const version of [0, -1, MAX_SCHEMA_VERSION + 1, 1.5, '1']) {
        const response = await send(table, version);
        expectError(response, 422, 'VALIDATION_FAILED');
        expectProblemPaths(response, [['body', 'expectedSchemaVersion']]);
      }
      expectError(await send(table, MAX_SCHEMA_VERSION), 409, 'SCHEMA_VERSION_CONFLICT');
      expect(await counts(table)).toEqual(before);
    });
  }
});

const BAD_VERSION_STRINGS: unknown[] = ['0', '01', '1.0', ' 1', '+1', '1e3', '', '12345678901234567890', 1];
/** 19 digits: the longest version string the format allows, and one no resource has reached. */
const LONGEST_VERSION = '9'.repeat(19);

describe('expectedVersion is a version string ^[1-9][0-9]{0,18}$ (spec 1) on delete view and update member', () => {
  it('delete view: every malformed string is 422 naming it; 19 digits is well-formed but stale (409); the current one deletes', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    const view = savedView(await views.postView(table));
    const remove = (expectedVersion: unknown) =>
      suite.server.request('DELETE', `${table.path}/views/${view.id}`, {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { expectedVersion },
      });
    for (const version of BAD_VERSION_STRINGS) {
      const response = await remove(version);
      expectError(response, 422, 'VALIDATION_FAILED');
      expectProblemPaths(response, [['body', 'expectedVersion']]);
    }
    expectError(await remove(LONGEST_VERSION), 409, 'ROW_VERSION_CONFLICT');
    const read = await suite.server.request('GET', `${table.path}/views/${view.id}`, { token: admin() });
    expect(SavedViewResponse.parse(read.body).version).toBe(view.version);
    const removed = await remove(view.version);
    expect(removed.status, removed.text).toBe(200);
  });

  it('update member: every malformed string is 422 naming it; 19 digits is well-formed but stale (409); the current one renames', async () => {
    const { path, read } = await newMember('Versioned Member');
    const update = (expectedVersion: unknown) =>
      suite.server.request('PATCH', path, {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { expectedVersion, name: 'Renamed' },
      });
    const current = await read();
    for (const version of BAD_VERSION_STRINGS) {
      const response = await update(version);
      expectError(response, 422, 'VALIDATION_FAILED');
      expectProblemPaths(response, [['body', 'expectedVersion']]);
    }
    expectError(await update(LONGEST_VERSION), 409, 'ROW_VERSION_CONFLICT');
    expect(await read()).toEqual(current);
    const renamed = await update(current.version);
    expect(renamed.status, renamed.text).toBe(200);
    expect(renamed.body).toMatchObject({ name: 'Renamed', version: String(BigInt(current.version) + 1n) });
  });
});

describe('a member name is 1..120 characters (spec §8) on update member', () => {
  it('refuses 0 (and only spaces) and 121 characters with 422 naming it, and takes exactly 120', async () => {
    const { path, read } = await newMember('Named Member');
    const current = await read();
    const rename = (name: string, expectedVersion: string) =>
      suite.server.request('PATCH', path, {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { expectedVersion, name },
      });
    for (const name of ['', '   ', 'n'.repeat(121)]) {
      const response = await rename(name, current.version);
      expectError(response, 422, 'VALIDATION_FAILED');
      expectProblemPaths(response, [['body', 'name']]);
    }
    expect(await read()).toEqual(current);
    const longest = 'ñ'.repeat(120);
    const renamed = await rename(longest, current.version);
    expect(renamed.status, renamed.text).toBe(200);
    expect(renamed.body.name).toBe(longest);
  });
});

describe('an import preview takes at most 200 mapping items (spec 4.6, §8)', () => {
  it('accepts 200 items, one per field, and previews the row (201 is refused in import-preview.test.ts)', async () => {
    const names = Array.from({ length: 200 }, (_, index) => `F${index}`);
    const table = await createTable(
      suite.server,
      suite.org,
      names.map((name) => ({ name, type: 'text' })),
    );
    const content = `${JSON.stringify(Object.fromEntries(names.map((name) => [name, `v ${name}`])))}\n`;
    const accepted = await requestPreview(suite.server, admin(), table, {
      format: 'jsonl',
      fileName: 'wide.jsonl',
      content,
      mapping: mappingOf(table, names),
    });
    expect(accepted.status, accepted.text).toBe(202);
    const job = await waitForJob(suite.server, admin(), accepted.body.statusUrl);
    expect(job).toMatchObject({ state: 'succeeded', result: { totalRows: 1, validRows: 1, invalidRows: 0 } });
    expect(Object.keys(job.result.preview[0].values)).toHaveLength(200);
  });
});

describe('validationErrors lists at most 200 problems (spec 2.2, §8 "saved view response")', () => {
  it('a view with 300 conditions on a field that is then removed still loads, reporting exactly the first 200', async () => {
    const table = await createTable(suite.server, suite.org, [
      { name: 'Name', type: 'text' },
      { name: 'Gone', type: 'integer' },
    ]);
    const gone = table.fields.Gone!;
    // and/or hold at most 100 items each (spec §8): three groups of 100 conditions make 300 problems.
    const group = { or: Array.from({ length: 100 }, (_, index) => ({ field: gone, op: 'eq', value: index })) };
    const view = savedView(
      await views.postView(table, { definition: definitionOf({ where: { and: [group, group, group] } }) }),
    );
    expect(view.validationErrors).toEqual([]);
    // The field goes the way test/view-rows.test.ts removes one: its column, its catalog row, a new schema version.
    const { prisma } = suite.server;
    await prisma.$executeRawUnsafe(
      `ALTER TABLE "d_${table.databaseId.toLowerCase()}"."t_${table.tableId.toLowerCase()}" DROP COLUMN "f_${gone.toLowerCase()}"`,
    );
    await prisma.field.delete({ where: { id: gone } });
    await prisma.dataTable.update({ where: { id: table.tableId }, data: { schemaVersion: { increment: 1 } } });
    const read = await suite.server.request('GET', `${table.path}/views/${view.id}`, { token: admin() });
    expect(read.status, read.text).toBe(200);
    const { validationErrors } = SavedViewResponse.parse(read.body);
    expect(validationErrors).toHaveLength(200);
    expect(validationErrors[0]).toBe(
      `definition.query.where.and[0].or[0].field: must be the id or name of a field of this table; "${gone}" is neither`,
    );
    expect(validationErrors[199]).toBe(
      `definition.query.where.and[1].or[99].field: must be the id or name of a field of this table; "${gone}" is neither`,
    );
  });
});
