import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { columnOf, historyTableOf, rowsTableOf } from '../../src/data/identifiers.ts';
import { idempotencyKey } from './factories.ts';
import type { Suite } from './suite.ts';
import { addForeignKey, addUniqueRule, createDatabase, createRow, createTable, type TestTable } from './workspace.ts';
import { waitForJob } from './jobs.ts';
import type { TestServer } from './server.ts';

/** Backup calls and a field-by-field picture of a database, for comparing a restore with its snapshot. */

export const backupDir = () => mkdtempSync(join(tmpdir(), 'wds-backups-'));

export const databasePath = (orgId: string, databaseId: string) => `/v1/orgs/${orgId}/databases/${databaseId}`;

export async function finished(
  server: TestServer,
  token: string,
  response: { status: number; text: string; body: any },
): Promise<any> {
  expect(response.status, response.text).toBe(202);
  return waitForJob(server, token, response.body.statusUrl, undefined, 60_000);
}

export async function runBackup(server: TestServer, token: string, orgId: string, databaseId: string): Promise<any> {
  const response = await server.request('POST', `${databasePath(orgId, databaseId)}/backups`, {
    token,
    idempotencyKey: idempotencyKey(),
  });
  return finished(server, token, response);
}

export function requestRestore(
  server: TestServer,
  token: string,
  orgId: string,
  databaseId: string,
  backupId: string,
  body: Record<string, unknown>,
) {
  return server.request('POST', `${databasePath(orgId, databaseId)}/backups/${backupId}/restore`, {
    token,
    idempotencyKey: idempotencyKey(),
    body,
  });
}

export function requestPreview(server: TestServer, token: string, orgId: string, databaseId: string, backupId: string) {
  return server.request('POST', `${databasePath(orgId, databaseId)}/backups/${backupId}/restore-preview`, {
    token,
    idempotencyKey: idempotencyKey(),
  });
}

export async function databaseVersion(
  server: TestServer,
  token: string,
  orgId: string,
  databaseId: string,
): Promise<string> {
  const response = await server.request('GET', databasePath(orgId, databaseId), { token });
  expect(response.status, response.text).toBe(200);
  return response.body.version;
}

type Row = Record<string, unknown>;
const plain = (rows: Row[]) =>
  JSON.parse(JSON.stringify(rows, (_key, value) => (typeof value === 'bigint' ? value.toString() : value))) as Row[];

/**
 * Everything a restore must bring back, read straight from the catalog and the data plane. Ids are translated
 * through `rename` (a new-database copy has new ids) and columns are keyed by field name, so a copy and its
 * original compare equal exactly when they hold the same content. Schema versions are left out: a replace moves
 * them past every number the tables had (tested on its own in backups.test.ts).
 */
export async function pictureOf(server: TestServer, databaseId: string): Promise<Record<string, unknown>> {
  // The test's own reading of 400,000 rows is not held to the service's 5 s statement budget (it timed out under load).
  const sql = (text: string, ...params: unknown[]) =>
    server.prisma
      .$transaction([
        server.prisma.$executeRawUnsafe('SET LOCAL statement_timeout = 0'),
        server.prisma.$queryRawUnsafe<Row[]>(text, ...params),
      ])
      .then(([, rows]) => plain(rows as Row[]));
  const tables = await sql(
    `SELECT id, name, state, version, row_count, created_at, updated_at FROM data_tables WHERE database_id = $1::bpchar ORDER BY name`,
    databaseId,
  );
  const ids = new Map<string, string>();
  const picture: Record<string, unknown> = {};
  for (const table of tables) {
    const tableId = String(table.id).trim();
    ids.set(tableId, `table:${table.name}`);
    const fields = await sql(
      'SELECT id, name, type, required, options, position, created_at FROM fields WHERE table_id = $1::bpchar ORDER BY position',
      tableId,
    );
    for (const field of fields) ids.set(String(field.id).trim(), `field:${table.name}.${field.name}`);
  }
  const name = (id: unknown) => ids.get(String(id).trim()) ?? String(id).trim();
  const rename = (value: unknown) =>
    JSON.parse(JSON.stringify(value).replace(/[0-9A-HJKMNP-TV-Z]{26}/g, (id) => ids.get(id) ?? id));
  for (const table of tables) {
    const tableId = String(table.id).trim();
    const fields = await sql(
      'SELECT id, name, type, required, options, position, created_at FROM fields WHERE table_id = $1::bpchar ORDER BY position',
      tableId,
    );
    const columns = fields
      .map((field) => `${columnOf(String(field.id).trim())}::text AS "${String(field.name)}"`)
      .join(', ');
    const rows = await sql(
      `SELECT id, version::text, created_at, updated_at${columns ? `, ${columns}` : ''} FROM ${rowsTableOf(databaseId, tableId)} ORDER BY id`,
    );
    const history = await sql(
      `SELECT row_id, version::text, field_id, operation, value, mutation_id, actor_id, changed_at FROM ${historyTableOf(databaseId, tableId)} ORDER BY row_id, version, field_id`,
    );
    const rules = await sql(
      'SELECT field_ids, "where", state, created_at FROM unique_rules WHERE table_id = $1::bpchar ORDER BY created_at',
      tableId,
    );
    const keys = await sql(
      'SELECT field_ids, referenced_table_id, state, created_at FROM foreign_keys WHERE table_id = $1::bpchar ORDER BY created_at',
      tableId,
    );
    const views = await sql(
      'SELECT name, visibility, owner_user_id, version, definition, created_at, updated_at FROM saved_views WHERE table_id = $1::bpchar ORDER BY name',
      tableId,
    );
    picture[String(table.name)] = rename({
      table: { ...table, id: undefined },
      fields: fields.map((field) => ({ ...field, id: name(field.id) })),
      rows,
      history: history
        .map((entry) => ({ ...entry, field_id: name(entry.field_id) }))
        .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
      rules,
      keys,
      views,
    });
  }
  return picture;
}

export async function rowOf(
  server: TestServer,
  token: string,
  table: TestTable,
  values: Record<string, unknown>,
): Promise<any> {
  const response = await createRow(server, token, table, values);
  expect(response.status, response.text).toBe(201);
  return response.body.row;
}

/** A database with two tables, a unique rule, a foreign key, an autoNumber, a shared view and some history. */
export async function backupWorkspace(suite: Suite) {
  const server = suite.server;
  const admin = suite.org.adminKey;
  const row = (table: TestTable, values: Record<string, unknown>) => rowOf(server, admin, table, values);
  const databaseId = await createDatabase(server, suite.org);
  let customers = await createTable(
    server,
    suite.org,
    [
      { name: 'Name', type: 'text', required: true, options: { maxLength: 100 } },
      { name: 'Age', type: 'integer' },
      { name: 'Number', type: 'autoNumber' },
      { name: 'Meta', type: 'json' },
    ],
    { databaseId, name: 'Customers' },
  );
  customers = (await addUniqueRule(server, admin, customers, { fieldIds: ['Name'] })).table;
  const ruleId = (await server.prisma.uniqueRule.findFirstOrThrow({ where: { tableId: customers.tableId } })).id;
  let orders = await createTable(
    server,
    suite.org,
    [
      { name: 'Customer', type: 'text', options: { maxLength: 100 } },
      { name: 'Total', type: 'number', options: { precision: 10, scale: 2 } },
    ],
    { databaseId, name: 'Orders' },
  );
  orders = (
    await addForeignKey(server, admin, orders, {
      fieldIds: ['Customer'],
      referencedTableId: customers.tableId,
      referencedRuleId: ruleId,
    })
  ).table;
  const ada = await row(customers, {
    Name: 'Ada',
    Age: 36,
    Meta: { tags: ['a', 'b'], note: 'tab\there\nnewline \\ backslash' },
  });
  const grace = await row(customers, { Name: 'Grace', Age: 45 });
  await row(orders, { Customer: 'Ada', Total: 12.5 });
  const patched = await server.request('PATCH', `${customers.path}/rows/${ada.id}`, {
    token: admin,
    idempotencyKey: idempotencyKey(),
    body: { expectedVersion: ada.version, values: { Age: 37 } },
  });
  expect(patched.status, patched.text).toBe(200);
  const view = await server.request('POST', `${customers.path}/views`, {
    token: admin,
    idempotencyKey: idempotencyKey(),
    body: {
      expectedSchemaVersion: customers.schemaVersion,
      name: 'Adults',
      visibility: 'shared',
      definition: {
        columnOrder: [customers.fields.Name],
        columnWidths: {},
        frozenColumns: 0,
        hiddenColumns: [],
        query: { where: { field: customers.fields.Age, op: 'gte', value: 18 } },
      },
    },
  });
  expect(view.status, view.text).toBe(201);
  return { databaseId, customers, orders, ada, grace };
}

/** Unique-rule indexes plus foreign keys in a database's schema. */
export async function constraintCount(server: TestServer, databaseId: string): Promise<number> {
  const [row] = await server.prisma.$queryRawUnsafe<{ count: number }[]>(
    `SELECT (SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname LIKE 'u\\_%') + (SELECT count(*) FROM pg_constraint WHERE connamespace = to_regnamespace($1) AND contype = 'f') AS count`,
    `d_${databaseId.toLowerCase()}`,
  );
  return Number(row!.count);
}

/** Schemas named like a database's (`d_…`) that no database owns: staging or retired schemas a restore left behind. */
export async function strayStagingSchemas(server: TestServer): Promise<string[]> {
  const rows = await server.prisma.$queryRawUnsafe<{ nspname: string }[]>(
    `SELECT nspname FROM pg_namespace n WHERE nspname LIKE 'd\\_%' AND NOT EXISTS (SELECT 1 FROM databases d WHERE 'd_' || lower(trim(d.id)) = n.nspname)`,
  );
  return rows.map((row) => row.nspname);
}
