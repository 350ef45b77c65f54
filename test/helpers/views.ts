import { expect } from 'vitest';
import { Page } from '../../src/contracts/pages.ts';
import { RowResponse } from '../../src/contracts/rows.ts';
import { SavedViewResponse, ViewDeletionResponse } from '../../src/contracts/views.ts';
import { expectError } from './expectations.ts';
import { idempotencyKey } from './factories.ts';
import type { ApiResponse } from './server.ts';
import type { Suite } from './suite.ts';
import type { TestTable } from './workspace.ts';

/** Saved-view calls shared by the view test files; each uses the suite's admin key unless told otherwise. */
export type Path = (string | number)[];
export type Body = Record<string, unknown>;
export type View = ReturnType<typeof SavedViewResponse.parse>;

const RowPage = Page(RowResponse);

export const definitionOf = (query: Body = {}, layout: Body = {}): Body => ({
  columnOrder: [],
  columnWidths: {},
  frozenColumns: 0,
  hiddenColumns: [],
  query,
  ...layout,
});
export const repeat = <T>(length: number, item: T): T[] => Array.from({ length }, () => item);

/** 422 VALIDATION_FAILED naming exactly these problem paths. */
export function expectProblems(response: ApiResponse, paths: Path[]): void {
  expectError(response, 422, 'VALIDATION_FAILED');
  expect((response.body.error.details.problems as { path: Path }[]).map((problem) => problem.path)).toEqual(paths);
}

export function savedView(response: ApiResponse): View {
  expect(response.status, response.text).toBe(201);
  return SavedViewResponse.parse(response.body);
}

export function viewClient(suite: Suite) {
  const admin = () => suite.org.adminKey;
  return {
    postView(table: TestTable, body: Body = {}, token = admin()): Promise<ApiResponse> {
      return suite.server.request('POST', `${table.path}/views`, {
        token,
        idempotencyKey: idempotencyKey(),
        body: {
          expectedSchemaVersion: table.schemaVersion,
          name: 'View',
          visibility: 'personal',
          definition: definitionOf(),
          ...body,
        },
      });
    },
    async deleteView(table: TestTable, view: View): Promise<void> {
      const response = await suite.server.request('DELETE', `${table.path}/views/${view.id}`, {
        token: admin(),
        idempotencyKey: idempotencyKey(),
        body: { expectedVersion: view.version },
      });
      expect(response.status, response.text).toBe(200);
      expect(ViewDeletionResponse.parse(response.body)).toEqual({
        id: view.id,
        deleted: true,
        version: String(BigInt(view.version) + 1n),
      });
    },
    /** The ids of every row the view selects (one page of up to 100). */
    async rowIdsThrough(table: TestTable, view: View): Promise<string[]> {
      const response = await suite.server.request('GET', `${table.path}/rows?viewId=${view.id}&limit=100`, {
        token: admin(),
      });
      expect(response.status, response.text).toBe(200);
      return RowPage.parse(response.body).data.map((row) => row.id);
    },
  };
}
