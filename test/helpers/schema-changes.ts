import { expect } from 'vitest';
import { JobHandleResponse, JobResponse } from '../../src/rest/routes/jobs.ts';
import { TableSchemaResponse } from '../../src/rest/routes/tables.ts';
import { idempotencyKey } from './factories.ts';
import { waitForJob } from './jobs.ts';
import type { ApiResponse } from './server.ts';
import type { Suite } from './suite.ts';
import type { TestTable } from './workspace.ts';

export type ChangeBody = Record<string, unknown>;

/** Endpoint 5 as a test client sees it, as the suite's admin: apply, the 202 handle, the terminal job, the schema. */
export function schemaChangeApi(suite: Suite) {
  const admin = () => suite.org.adminKey;
  return {
    apply(table: TestTable, change: ChangeBody): Promise<ApiResponse> {
      return suite.server.request('POST', `${table.path}/schema/operations`, {
        token: admin(), idempotencyKey: idempotencyKey(), body: { expectedSchemaVersion: table.schemaVersion, change },
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
