import { expect } from 'vitest';
import { idempotencyKey, type TestOrg } from './factories.ts';
import { waitForJob } from './jobs.ts';
import type { ApiResponse, TestServer } from './server.ts';

/** Factories for databases, tables and rows, through the public REST API (what a client would do). */
export interface TestTable {
  orgId: string;
  databaseId: string;
  tableId: string;
  schemaVersion: number;
  /** Field ids by field name. */
  fields: Record<string, string>;
  path: string;
}

export interface FieldSpec {
  name: string;
  type: string;
  required?: boolean;
  options?: Record<string, unknown>;
}

let counter = 0;
const uniqueName = (prefix: string) => `${prefix} ${Date.now().toString(36)}${(counter += 1)}`;

export async function createDatabase(server: TestServer, org: TestOrg, name = uniqueName('Database')): Promise<string> {
  const response = await server.request('POST', `/v1/orgs/${org.orgId}/databases`, {
    token: org.adminKey,
    idempotencyKey: idempotencyKey(),
    body: { name },
  });
  expect(response.status, response.text).toBe(201);
  return response.body.id;
}

export async function createTable(
  server: TestServer,
  org: TestOrg,
  fields: FieldSpec[],
  options: { databaseId?: string; name?: string } = {},
): Promise<TestTable> {
  const databaseId = options.databaseId ?? (await createDatabase(server, org));
  const response = await server.request('POST', `/v1/orgs/${org.orgId}/databases/${databaseId}/tables`, {
    token: org.adminKey,
    idempotencyKey: idempotencyKey(),
    body: { name: options.name ?? uniqueName('Table'), fields },
  });
  expect(response.status, response.text).toBe(201);
  const table = response.body;
  return {
    orgId: org.orgId,
    databaseId,
    tableId: table.id,
    schemaVersion: table.schemaVersion,
    fields: Object.fromEntries(table.fields.map((field: { name: string; id: string }) => [field.name, field.id])),
    path: `/v1/orgs/${org.orgId}/databases/${databaseId}/tables/${table.id}`,
  };
}

/** Re-reads the table's schema version (after rules or keys bumped it). */
export async function refreshSchemaVersion(server: TestServer, token: string, table: TestTable): Promise<TestTable> {
  const response = await server.request('GET', `${table.path}/schema`, { token });
  expect(response.status, response.text).toBe(200);
  return { ...table, schemaVersion: response.body.schemaVersion };
}

export function createRow(
  server: TestServer,
  token: string,
  table: TestTable,
  values: Record<string, unknown>,
  key = idempotencyKey(),
) {
  return server.request('POST', `${table.path}/rows`, {
    token,
    idempotencyKey: key,
    body: { expectedSchemaVersion: table.schemaVersion, values },
  });
}

async function finishedJob(server: TestServer, token: string, accepted: ApiResponse): Promise<any> {
  expect(accepted.status, accepted.text).toBe(202);
  return waitForJob(server, token, accepted.body.statusUrl);
}

/** Adds a unique rule (a job, 202) and waits for it: the terminal job, and when it succeeded the rule id and the table at its new version. */
export async function addUniqueRule(
  server: TestServer,
  token: string,
  table: TestTable,
  body: Record<string, unknown>,
  key = idempotencyKey(),
) {
  const accepted = await server.request('POST', `${table.path}/unique-rules`, { token, idempotencyKey: key, body });
  const job = await finishedJob(server, token, accepted);
  const ruleId: string = job.result?.ruleId;
  return {
    job,
    ruleId,
    table: job.state === 'succeeded' ? { ...table, schemaVersion: job.result.schemaVersion as number } : table,
  };
}

/** Adds a foreign key (a job, 202) and waits for it, like addUniqueRule. */
export async function addForeignKey(
  server: TestServer,
  token: string,
  table: TestTable,
  body: Record<string, unknown>,
  key = idempotencyKey(),
) {
  const accepted = await server.request('POST', `${table.path}/foreign-keys`, { token, idempotencyKey: key, body });
  const job = await finishedJob(server, token, accepted);
  const foreignKeyId: string = job.result?.foreignKeyId;
  return {
    job,
    foreignKeyId,
    table: job.state === 'succeeded' ? { ...table, schemaVersion: job.result.schemaVersion as number } : table,
  };
}
