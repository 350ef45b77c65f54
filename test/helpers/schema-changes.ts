import { expect } from 'vitest';
import { JobHandleResponse } from '../../src/contracts/jobs.ts';
import { JobResponse } from '../../src/contracts/job-results.ts';
import { rowsTableOf } from '../../src/data/identifiers.ts';
import { TableSchemaResponse } from '../../src/contracts/tables.ts';
import { idempotencyKey } from './factories.ts';
import { waitForJob } from './jobs.ts';
import type { ApiResponse, TestServer } from './server.ts';
import type { Suite } from './suite.ts';
import type { TestTable } from './workspace.ts';

export type ChangeBody = Record<string, unknown>;

/** Endpoint 5 as a test client sees it, as the suite's admin: apply, the 202 handle, the terminal job, the schema. */
export function schemaChangeApi(suite: Suite) {
  const admin = () => suite.org.adminKey;
  return {
    apply(table: TestTable, change: ChangeBody): Promise<ApiResponse> {
      return suite.server.request('POST', `${table.path}/schema/operations`, {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { expectedSchemaVersion: table.schemaVersion, change },
      });
    },
    accepted(response: ApiResponse): { jobId: string; statusUrl: string } {
      expect(response.status, response.text).toBe(202);
      return JobHandleResponse.parse(response.body);
    },
    async finished(statusUrl: string) {
      return JobResponse.parse(await waitForJob(suite.server, admin(), statusUrl, undefined, 60_000));
    },
    async schemaOf(table: TestTable) {
      const response = await suite.server.request('GET', `${table.path}/schema`, { token: admin() });
      expect(response.status, response.text).toBe(200);
      return TableSchemaResponse.parse(response.body);
    },
  };
}

/** Applies a change, waits for it to succeed, and answers the table at its new schema version with its fields. */
export async function appliedChange(suite: Suite, table: TestTable, change: ChangeBody): Promise<TestTable> {
  const api = schemaChangeApi(suite);
  const job = await api.finished(api.accepted(await api.apply(table, change)).statusUrl);
  expect(job.state, JSON.stringify(job)).toBe('succeeded');
  const schema = await api.schemaOf(table);
  return {
    ...table,
    schemaVersion: schema.schemaVersion,
    fields: Object.fromEntries(schema.fields.map((field) => [field.name, field.id])),
  };
}

export interface ConversionLeftovers {
  columns: string[];
  triggers: string[];
  functions: string[];
  sideTables: string[];
}

export const NO_LEFTOVERS: ConversionLeftovers = { columns: [], triggers: [], functions: [], sideTables: [] };

/** Shadow columns, conversion triggers, their functions and side tables (none outside a running conversion). */
export async function conversionLeftovers(server: TestServer, table: TestTable): Promise<ConversionLeftovers> {
  const [row] = await server.prisma.$queryRaw<ConversionLeftovers[]>`
    SELECT
      ARRAY(SELECT column_name::text FROM information_schema.columns
             WHERE table_schema = ${`d_${table.databaseId.toLowerCase()}`} AND table_name = ${`t_${table.tableId.toLowerCase()}`}
               AND column_name LIKE 'x\\_%') AS columns,
      ARRAY(SELECT tgname::text FROM pg_trigger WHERE tgrelid = to_regclass(${rowsTableOf(table.databaseId, table.tableId)}) AND NOT tgisinternal) AS triggers,
      ARRAY(SELECT proname::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = ${`d_${table.databaseId.toLowerCase()}`} AND proname LIKE 'c\\_%') AS functions,
      ARRAY(SELECT tablename::text FROM pg_tables
             WHERE schemaname = ${`d_${table.databaseId.toLowerCase()}`} AND tablename LIKE 'y\\_%') AS "sideTables"`;
  return row!;
}
