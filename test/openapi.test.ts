import { describe, expect, it } from 'vitest';
import { currentTotp } from '../src/identity/totp.ts';
import { routes } from '../src/http/rest/routes.ts';
import { addMember, idempotencyKey } from './helpers/factories.ts';
import { openEventStream } from './helpers/event-stream.ts';
import { waitForJob } from './helpers/jobs.ts';
import { oauthTokens } from './helpers/oauth.ts';
import { browser, signIn, withPassword } from './helpers/sessions.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import {
  addForeignKey,
  addUniqueRule,
  createDatabase,
  createRow,
  createTable,
  refreshSchemaVersion,
  type TestTable,
} from './helpers/workspace.ts';

const suite = useServerWithOrg();

describe('GET /v1/openapi.json', () => {
  it('is an OpenAPI 3.1 document listing every declared route with its parameters and schemas', async () => {
    const response = await suite.server.request('GET', '/v1/openapi.json');
    expect(response.status).toBe(200);
    const document = response.body;
    expect(document.openapi).toMatch(/^3\.1\./);
    for (const route of routes) {
      const operation = document.paths[route.path]?.[route.method.toLowerCase()];
      expect(operation, `${route.method} ${route.path}`).toBeDefined();
      expect(Object.keys(operation.responses)).toContain(String(route.successStatus));
      const headerNames = operation.parameters
        .filter((p: { in: string }) => p.in === 'header')
        .map((p: { name: string }) => p.name);
      expect(headerNames.includes('Idempotency-Key')).toBe(route.idempotent);
    }
    expect(document.paths['/v1/orgs/{orgId}'].get.parameters[0]).toMatchObject({
      name: 'orgId',
      in: 'path',
      required: true,
    });
    expect(
      document.paths['/v1/me/preferences'].patch.requestBody.content['application/json'].schema.properties.theme.enum,
    ).toEqual(['system', 'light', 'dark']);
    expect(Object.keys(document.components.securitySchemes.oauth.flows.authorizationCode.scopes)).toHaveLength(23);
  });
});

interface Workspace {
  parent: TestTable;
  child: TestTable;
  ruleId: string;
  rowId: string;
}

let workspace: Promise<Workspace> | undefined;

/** Two linked tables and a row, made once through the API for the samples that need them. */
async function sampleDatabasePath(): Promise<string> {
  return `/v1/orgs/${suite.org.orgId}/databases/${(await sampleWorkspace()).parent.databaseId}`;
}

let backupId: Promise<string> | undefined;
/** One backup of the sample database, taken once. */
function sampleBackup(): Promise<string> {
  backupId ??= (async () => {
    const accepted = await suite.server.request('POST', `${await sampleDatabasePath()}/backups`, write());
    return (await waitForJob(suite.server, suite.org.adminKey, accepted.body.statusUrl)).jobId as string;
  })();
  return backupId;
}

function sampleWorkspace(): Promise<Workspace> {
  workspace ??= (async () => {
    const { server, org } = suite;
    const parent = await createTable(server, org, [{ name: 'Code', type: 'text', options: { maxLength: 20 } }]);
    const child = await createTable(server, org, [{ name: 'Parent code', type: 'text', options: { maxLength: 20 } }], {
      databaseId: parent.databaseId,
    });
    const rule = await addUniqueRule(server, org.adminKey, parent, { fieldIds: ['Code'] });
    expect(rule.job.state, JSON.stringify(rule.job)).toBe('succeeded');
    const refreshed = await refreshSchemaVersion(server, org.adminKey, parent);
    const row = await createRow(server, org.adminKey, refreshed, { Code: 'A-1' });
    return { parent: refreshed, child, ruleId: rule.ruleId, rowId: row.body.row.id };
  })();
  return workspace;
}

const admin = () => ({ token: suite.org.adminKey });
const write = (body?: unknown) => ({
  token: suite.org.adminKey,
  idempotencyKey: idempotencyKey(),
  ...(body === undefined ? {} : { body }),
});

/**
 * A rule or key request answers 202 with a job handle; the sample waits for the job to succeed (so that the table
 * is free for the next schema change) and returns the 202 answer itself.
 */
async function settled(accepted: { status: number; body: any }): Promise<{ status: number; body: any }> {
  if (accepted.status === 202) {
    const job = await waitForJob(suite.server, suite.org.adminKey, accepted.body.statusUrl);
    expect(job.state, JSON.stringify(job)).toBe('succeeded');
  }
  return accepted;
}

async function requestForeignKey(): Promise<{ status: number; body: any }> {
  const { parent, child, ruleId } = await sampleWorkspace();
  return settled(
    await suite.server.request(
      'POST',
      `${child.path}/foreign-keys`,
      write({ fieldIds: ['Parent code'], referencedTableId: parent.tableId, referencedRuleId: ruleId }),
    ),
  );
}

/** A foreign key of the child table, its job finished: the key's id. */
async function linkedForeignKey(): Promise<string> {
  const { parent, child, ruleId } = await sampleWorkspace();
  const key = await addForeignKey(suite.server, suite.org.adminKey, child, {
    fieldIds: ['Parent code'],
    referencedTableId: parent.tableId,
    referencedRuleId: ruleId,
  });
  expect(key.job.state, JSON.stringify(key.job)).toBe('succeeded');
  return key.foreignKeyId;
}

async function addView(): Promise<{ status: number; body: any }> {
  const { parent } = await sampleWorkspace();
  const code = parent.fields.Code!;
  return suite.server.request(
    'POST',
    `${parent.path}/views`,
    write({
      expectedSchemaVersion: parent.schemaVersion,
      name: 'Codes A',
      visibility: 'shared',
      definition: {
        columnOrder: [code],
        columnWidths: { [code]: 240 },
        frozenColumns: 1,
        hiddenColumns: [],
        query: { where: { field: 'Code', op: 'prefix', value: 'A' }, orderBy: [{ field: 'Code', direction: 'asc' }] },
      },
    }),
  );
}

let previewJob: Promise<any> | undefined;

/** One finished import preview (with an error report artifact), for the job samples. */
function finishedPreview(): Promise<any> {
  previewJob ??= (async () => {
    const { parent } = await sampleWorkspace();
    const accepted = await suite.server.request(
      'POST',
      `${parent.path}/imports/preview`,
      write({
        expectedSchemaVersion: parent.schemaVersion,
        format: 'csv',
        content: 'Code\nA-1\nB-1\n',
        fileName: 'codes.csv',
        mapping: [{ source: 'Code', fieldId: 'Code' }],
      }),
    );
    return waitForJob(suite.server, suite.org.adminKey, accepted.body.statusUrl);
  })();
  return previewJob;
}

/** A fresh webhook (to a name no test resolves: its deliveries just fail), for the webhook samples. */
async function sampleWebhook(): Promise<{ id: string; version: string }> {
  const response = await suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/webhooks`, {
    token: suite.org.adminKey,
    idempotencyKey: idempotencyKey(),
    body: { url: 'https://hooks.invalid/in', events: ['*'] },
  });
  expect(response.status, response.text).toBe(201);
  return response.body;
}

describe('real responses match the documented schemas', () => {
  const viewerSession = async () => {
    const user = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    return signIn(suite.server, await withPassword(suite.server, user.userId));
  };
  const samples: Record<string, () => Promise<{ status: number; body: unknown }>> = {
    'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/imports/preview': async () => {
      const { parent } = await sampleWorkspace();
      return suite.server.request(
        'POST',
        `${parent.path}/imports/preview`,
        write({
          expectedSchemaVersion: parent.schemaVersion,
          format: 'jsonl',
          content: '{"Code":"Z-1"}\n',
          fileName: 'codes.jsonl',
          mapping: [{ source: 'Code', fieldId: 'Code' }],
        }),
      );
    },
    'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/imports': async () => {
      const { parent } = await sampleWorkspace();
      const preview = await finishedPreview();
      return suite.server.request(
        'POST',
        `${parent.path}/imports`,
        write({ previewJobId: preview.jobId, expectedSchemaVersion: parent.schemaVersion, mode: 'valid-rows-only' }),
      );
    },
    'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/schema/operations': async () => {
      const child = await refreshSchemaVersion(suite.server, suite.org.adminKey, (await sampleWorkspace()).child);
      return suite.server.request(
        'POST',
        `${child.path}/schema/operations`,
        write({
          expectedSchemaVersion: child.schemaVersion,
          change: { kind: 'rename_field', fieldId: child.fields['Parent code'], name: 'Parent' },
        }),
      );
    },
    'GET /v1/orgs/{orgId}/jobs': async () => {
      await finishedPreview();
      return suite.server.request(
        'GET',
        `/v1/orgs/${suite.org.orgId}/jobs?state=succeeded&kind=previewImportRows&limit=5`,
        admin(),
      );
    },
    'GET /v1/orgs/{orgId}/jobs/{jobId}': async () =>
      suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/jobs/${(await finishedPreview()).jobId}`, admin()),
    // An ended job's stream is its one final event; the sample checks that event's data.
    'GET /v1/orgs/{orgId}/jobs/{jobId}/events': async () => {
      const events = await openEventStream(
        `${suite.server.url}/v1/orgs/${suite.org.orgId}/jobs/${(await finishedPreview()).jobId}/events`,
        {
          headers: { authorization: `Bearer ${suite.org.adminKey}` },
        },
      );
      const [event, ...more] = await events.rest();
      expect(more).toEqual([]);
      return { status: events.status, body: event?.data };
    },
    'POST /v1/orgs/{orgId}/jobs/{jobId}/cancel': async () => {
      const { parent } = await sampleWorkspace();
      // Cancelling races the worker: whichever state the job is in, the answer is the job record (or 409 once it finished).
      const accepted = await suite.server.request(
        'POST',
        `${parent.path}/imports/preview`,
        write({
          expectedSchemaVersion: parent.schemaVersion,
          format: 'csv',
          content: 'Code\nC-1\n',
          fileName: 'cancel.csv',
          mapping: [{ source: 'Code', fieldId: 'Code' }],
        }),
      );
      return suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/jobs/${accepted.body.jobId}/cancel`, write());
    },
    'POST /v1/orgs/{orgId}/jobs/{jobId}/retry': async () => {
      const { parent } = await sampleWorkspace();
      const failed = await suite.server.request(
        'POST',
        `${parent.path}/imports/preview`,
        write({
          expectedSchemaVersion: parent.schemaVersion,
          format: 'csv',
          content: 'Code\n"unclosed\n',
          fileName: 'broken.csv',
          mapping: [{ source: 'Code', fieldId: 'Code' }],
        }),
      );
      await waitForJob(suite.server, suite.org.adminKey, failed.body.statusUrl);
      return suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/jobs/${failed.body.jobId}/retry`, write());
    },
    'GET /v1/orgs/{orgId}/jobs/{jobId}/artifacts/{name}': async () => {
      const preview = await finishedPreview();
      const response = await suite.server.request('GET', preview.artifacts[0].url, admin());
      return { status: response.status, body: response.text };
    },
    'GET /v1/me/preferences': () => suite.server.request('GET', '/v1/me/preferences', { token: suite.org.adminKey }),
    'PATCH /v1/me/preferences': () =>
      suite.server.request('PATCH', '/v1/me/preferences', {
        token: suite.org.adminKey,
        idempotencyKey: idempotencyKey(),
        body: { theme: 'dark' },
      }),
    'GET /v1/preferences/options': () =>
      suite.server.request('GET', '/v1/preferences/options', { token: suite.org.adminKey }),
    'GET /v1/me': () => suite.server.request('GET', '/v1/me', { token: suite.org.adminKey }),
    'GET /v1/orgs': () => suite.server.request('GET', '/v1/orgs', { token: suite.org.adminKey }),
    'GET /v1/orgs/{orgId}': () =>
      suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: suite.org.adminKey }),
    'PATCH /v1/orgs/{orgId}': async () => {
      const version = (await suite.server.request('GET', `/v1/orgs/${suite.org.orgId}`, { token: suite.org.adminKey }))
        .body.version;
      return suite.server.request('PATCH', `/v1/orgs/${suite.org.orgId}`, {
        token: suite.org.adminKey,
        idempotencyKey: idempotencyKey(),
        body: { expectedVersion: version, name: 'Checked' },
      });
    },
    'POST /v1/orgs/{orgId}/databases': () =>
      suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/databases`, write({ name: 'Sample' })),
    'GET /v1/orgs/{orgId}/databases': () =>
      suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/databases`, admin()),
    'GET /v1/orgs/{orgId}/databases/{databaseId}': async () =>
      suite.server.request(
        'GET',
        `/v1/orgs/${suite.org.orgId}/databases/${(await sampleWorkspace()).parent.databaseId}`,
        admin(),
      ),
    'PATCH /v1/orgs/{orgId}/databases/{databaseId}': async () =>
      suite.server.request(
        'PATCH',
        `/v1/orgs/${suite.org.orgId}/databases/${await createDatabase(suite.server, suite.org)}`,
        write({ expectedVersion: '1', name: 'Renamed sample' }),
      ),
    'DELETE /v1/orgs/{orgId}/databases/{databaseId}': async () =>
      suite.server.request(
        'DELETE',
        `/v1/orgs/${suite.org.orgId}/databases/${await createDatabase(suite.server, suite.org)}`,
        write({ expectedVersion: '1' }),
      ),
    'PATCH /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}': async () =>
      suite.server.request(
        'PATCH',
        (await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }])).path,
        write({ expectedVersion: '1', name: 'Renamed table' }),
      ),
    'DELETE /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}': async () =>
      suite.server.request(
        'DELETE',
        (await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }])).path,
        write({ expectedVersion: '1' }),
      ),
    'GET /v1/orgs/{orgId}/trash': () => suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/trash`, admin()),
    'POST /v1/orgs/{orgId}/trash/{id}/restore': async () => {
      const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
      expect((await suite.server.request('DELETE', table.path, write({ expectedVersion: '1' }))).status).toBe(200);
      return suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/trash/${table.tableId}/restore`, write());
    },
    'POST /v1/orgs/{orgId}/databases/{databaseId}/tables': async () =>
      suite.server.request(
        'POST',
        `/v1/orgs/${suite.org.orgId}/databases/${(await sampleWorkspace()).parent.databaseId}/tables`,
        write({
          name: 'Sample table',
          fields: [
            { name: 'Name', type: 'text' },
            { name: 'Tags', type: 'multiSelect', options: { choices: ['a'] } },
          ],
        }),
      ),
    'GET /v1/orgs/{orgId}/databases/{databaseId}/tables': async () =>
      suite.server.request(
        'GET',
        `/v1/orgs/${suite.org.orgId}/databases/${(await sampleWorkspace()).parent.databaseId}/tables`,
        admin(),
      ),
    'GET /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}': async () =>
      suite.server.request('GET', (await sampleWorkspace()).parent.path, admin()),
    'GET /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/schema': async () => {
      await linkedForeignKey();
      return suite.server.request('GET', `${(await sampleWorkspace()).child.path}/schema`, admin());
    },
    'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/unique-rules': async () =>
      settled(
        await suite.server.request(
          'POST',
          `${(await sampleWorkspace()).child.path}/unique-rules`,
          write({ fieldIds: ['Parent code'], where: { field: 'Parent code', op: 'prefix', value: 'X' } }),
        ),
      ),
    'DELETE /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/unique-rules/{ruleId}': async () => {
      const table = await createTable(suite.server, suite.org, [
        { name: 'Code', type: 'text', options: { maxLength: 20 } },
      ]);
      const rule = await addUniqueRule(suite.server, suite.org.adminKey, table, { fieldIds: ['Code'] });
      return settled(await suite.server.request('DELETE', `${table.path}/unique-rules/${rule.ruleId}`, write()));
    },
    'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/foreign-keys': requestForeignKey,
    'GET /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/foreign-keys': async () => {
      await linkedForeignKey();
      return suite.server.request('GET', `${(await sampleWorkspace()).child.path}/foreign-keys`, admin());
    },
    'DELETE /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/foreign-keys/{foreignKeyId}': async () => {
      const foreignKeyId = await linkedForeignKey();
      return suite.server.request(
        'DELETE',
        `${(await sampleWorkspace()).child.path}/foreign-keys/${foreignKeyId}`,
        write(),
      );
    },
    'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows': async () =>
      createRow(suite.server, suite.org.adminKey, (await sampleWorkspace()).parent, { Code: 'A-2' }),
    'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/exports': async () => {
      const { parent } = await sampleWorkspace();
      return suite.server.request('POST', `${parent.path}/exports`, write({ format: 'csv' }));
    },
    'POST /v1/orgs/{orgId}/databases/{databaseId}/exports': async () =>
      suite.server.request('POST', `${await sampleDatabasePath()}/exports`, write({ format: 'jsonl' })),
    'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows/batch': async () => {
      const { parent } = await sampleWorkspace();
      return suite.server.request(
        'POST',
        `${parent.path}/rows/batch`,
        write({ expectedSchemaVersion: parent.schemaVersion, operations: [{ op: 'create', values: { Code: 'B-1' } }] }),
      );
    },
    'GET /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows': async () =>
      suite.server.request(
        'GET',
        `${(await sampleWorkspace()).parent.path}/rows?limit=1&orderBy=${encodeURIComponent('[{"field":"Code","direction":"desc"}]')}`,
        admin(),
      ),
    'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows/query': async () =>
      suite.server.request('POST', `${(await sampleWorkspace()).parent.path}/rows/query`, {
        ...admin(),
        body: { limit: 1, orderBy: [{ field: 'Code', direction: 'desc' }] },
      }),
    'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows/aggregate': async () =>
      suite.server.request('POST', `${(await sampleWorkspace()).parent.path}/rows/aggregate`, {
        ...admin(),
        body: { groupBy: ['Code'], aggregates: [{ fn: 'count', as: 'n' }] },
      }),
    'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows/similar': async () =>
      suite.server.request('POST', `${(await sampleWorkspace()).parent.path}/rows/similar`, {
        ...admin(),
        body: { fieldId: 'Code', value: 'A-1' },
      }),
    'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows/lookup': async () => {
      const { parent, ruleId } = await sampleWorkspace();
      return suite.server.request('POST', `${parent.path}/rows/lookup`, {
        ...admin(),
        body: { ruleId, keys: [['A-1'], ['none']] },
      });
    },
    'GET /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows/{rowId}/history': async () => {
      const { parent, rowId } = await sampleWorkspace();
      return suite.server.request('GET', `${parent.path}/rows/${rowId}/history`, admin());
    },
    'GET /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows/{rowId}': async () => {
      const { parent, rowId } = await sampleWorkspace();
      return suite.server.request('GET', `${parent.path}/rows/${rowId}`, admin());
    },
    'PATCH /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows/{rowId}': async () => {
      const { parent } = await sampleWorkspace();
      const row = await createRow(suite.server, suite.org.adminKey, parent, { Code: 'P-1' });
      return suite.server.request(
        'PATCH',
        `${parent.path}/rows/${row.body.row.id}`,
        write({ expectedVersion: '1', values: { Code: 'P-2' } }),
      );
    },
    'GET /v1/orgs/{orgId}/activity': async () => {
      const { parent } = await sampleWorkspace();
      return suite.server.request(
        'GET',
        `/v1/orgs/${suite.org.orgId}/activity?limit=2&tableId=${parent.tableId}`,
        admin(),
      );
    },
    'GET /v1/orgs/{orgId}/databases/{databaseId}/changes': async () =>
      suite.server.request('GET', `${await sampleDatabasePath()}/changes?limit=3`, admin()),
    'GET /v1/orgs/{orgId}/databases/{databaseId}/changes/head': async () =>
      suite.server.request('GET', `${await sampleDatabasePath()}/changes/head`, admin()),
    'GET /v1/orgs/{orgId}/activity/filters': async () => {
      await sampleWorkspace();
      return suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/activity/filters?type=resources`, admin());
    },
    'POST /v1/orgs/{orgId}/databases/{databaseId}/backup-schedule/preview': async () =>
      suite.server.request(
        'POST',
        `/v1/orgs/${suite.org.orgId}/databases/${(await sampleWorkspace()).parent.databaseId}/backup-schedule/preview`,
        { ...admin(), body: { cron: '30 2 * * *', timezone: 'Europe/Berlin' } },
      ),
    'POST /v1/orgs/{orgId}/backup-destination/test': async () =>
      suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/backup-destination/test`, write()),
    'GET /v1/orgs/{orgId}/databases/{databaseId}/backup-schedule': async () =>
      suite.server.request('GET', `${await sampleDatabasePath()}/backup-schedule`, admin()),
    'PUT /v1/orgs/{orgId}/databases/{databaseId}/backup-schedule': async () =>
      suite.server.request(
        'PUT',
        `${await sampleDatabasePath()}/backup-schedule`,
        write({ cron: '0 3 * * *', timezone: 'UTC' }),
      ),
    'DELETE /v1/orgs/{orgId}/databases/{databaseId}/backup-schedule': async () => {
      const path = `${await sampleDatabasePath()}/backup-schedule`;
      await waitForJob(
        suite.server,
        suite.org.adminKey,
        (await suite.server.request('PUT', path, write({ cron: '0 4 * * *', timezone: 'UTC' }))).body.statusUrl,
      );
      return suite.server.request('DELETE', path, write());
    },
    'PUT /v1/orgs/{orgId}/databases/{databaseId}/backup-policy': async () =>
      suite.server.request(
        'PUT',
        `${await sampleDatabasePath()}/backup-policy`,
        write({ keepLast: 5, keepDays: null }),
      ),
    'POST /v1/orgs/{orgId}/databases/{databaseId}/backups': async () =>
      suite.server.request('POST', `${await sampleDatabasePath()}/backups`, write()),
    'GET /v1/orgs/{orgId}/databases/{databaseId}/backups': async () => {
      await sampleBackup();
      return suite.server.request('GET', `${await sampleDatabasePath()}/backups`, admin());
    },
    'POST /v1/orgs/{orgId}/databases/{databaseId}/backups/{backupId}/restore-preview': async () =>
      suite.server.request(
        'POST',
        `${await sampleDatabasePath()}/backups/${await sampleBackup()}/restore-preview`,
        write(),
      ),
    'POST /v1/orgs/{orgId}/databases/{databaseId}/backups/{backupId}/restore': async () =>
      suite.server.request(
        'POST',
        `${await sampleDatabasePath()}/backups/${await sampleBackup()}/restore`,
        write({ target: 'new-database', name: `Restored ${idempotencyKey()}` }),
      ),
    'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/views': async () => addView(),
    'GET /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/views': async () => {
      await addView();
      return suite.server.request('GET', `${(await sampleWorkspace()).parent.path}/views`, admin());
    },
    'GET /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/views/{viewId}': async () =>
      suite.server.request(
        'GET',
        `${(await sampleWorkspace()).parent.path}/views/${(await addView()).body.id}`,
        admin(),
      ),
    'PATCH /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/views/{viewId}': async () =>
      suite.server.request(
        'PATCH',
        `${(await sampleWorkspace()).parent.path}/views/${(await addView()).body.id}`,
        write({ expectedVersion: '1', name: 'Renamed' }),
      ),
    'DELETE /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/views/{viewId}': async () =>
      suite.server.request(
        'DELETE',
        `${(await sampleWorkspace()).parent.path}/views/${(await addView()).body.id}`,
        write({ expectedVersion: '1' }),
      ),
    'DELETE /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows/{rowId}': async () => {
      const { parent } = await sampleWorkspace();
      const row = await createRow(suite.server, suite.org.adminKey, parent, { Code: 'D-1' });
      return suite.server.request('DELETE', `${parent.path}/rows/${row.body.row.id}`, write({ expectedVersion: '1' }));
    },
    'POST /v1/orgs/{orgId}/databases/{databaseId}/tables/{tableId}/rows/{rowId}/restore': async () => {
      const { parent } = await sampleWorkspace();
      const row = await createRow(suite.server, suite.org.adminKey, parent, { Code: 'R-1' });
      const deleted = await suite.server.request(
        'DELETE',
        `${parent.path}/rows/${row.body.row.id}`,
        write({ expectedVersion: '1' }),
      );
      return suite.server.request(
        'POST',
        `${parent.path}/rows/${row.body.row.id}/restore`,
        write({ expectedVersion: deleted.body.version }),
      );
    },
    'GET /v1/orgs/{orgId}/members': () => suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/members`, admin()),
    'PATCH /v1/orgs/{orgId}/members/{id}': async () => {
      const member = await addMember(suite.server.prisma, suite.org.orgId, 'member');
      return suite.server.request(
        'PATCH',
        `/v1/orgs/${suite.org.orgId}/members/${member.memberId}`,
        write({ expectedVersion: '1', role: 'viewer' }),
      );
    },
    'DELETE /v1/orgs/{orgId}/members/{id}': async () => {
      const member = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
      return suite.server.request(
        'DELETE',
        `/v1/orgs/${suite.org.orgId}/members/${member.memberId}`,
        write({ expectedVersion: '1' }),
      );
    },
    'POST /v1/me/keys': () =>
      suite.server.request('POST', '/v1/me/keys', write({ name: 'Sample', orgId: suite.org.orgId, access: 'read' })),
    'GET /v1/me/keys': () => suite.server.request('GET', '/v1/me/keys', admin()),
    'DELETE /v1/me/keys/{id}': async () => {
      const created = await suite.server.request(
        'POST',
        '/v1/me/keys',
        write({ name: 'Doomed', orgId: suite.org.orgId, access: 'read' }),
      );
      return suite.server.request('DELETE', `/v1/me/keys/${created.body.key.id}`, write());
    },
    'POST /v1/orgs/{orgId}/keys': () =>
      suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/keys`, write({ name: 'Team', access: 'read' })),
    'GET /v1/orgs/{orgId}/keys': () => suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/keys`, admin()),
    'DELETE /v1/orgs/{orgId}/keys/{id}': async () => {
      const created = await suite.server.request(
        'POST',
        `/v1/orgs/${suite.org.orgId}/keys`,
        write({ name: 'Doomed team key', access: 'read' }),
      );
      return suite.server.request('DELETE', `/v1/orgs/${suite.org.orgId}/keys/${created.body.key.id}`, write());
    },
    'POST /v1/orgs/{orgId}/invitations': () =>
      suite.server.request(
        'POST',
        `/v1/orgs/${suite.org.orgId}/invitations`,
        write({ email: `sample-${idempotencyKey()}@example.com`, role: 'member' }),
      ),
    'GET /v1/orgs/{orgId}/invitations': () =>
      suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/invitations`, admin()),
    'DELETE /v1/orgs/{orgId}/invitations/{id}': async () => {
      const created = await suite.server.request(
        'POST',
        `/v1/orgs/${suite.org.orgId}/invitations`,
        write({ email: `cancel-${idempotencyKey()}@example.com`, role: 'viewer' }),
      );
      return suite.server.request(
        'DELETE',
        `/v1/orgs/${suite.org.orgId}/invitations/${created.body.invitation.id}`,
        write(),
      );
    },
    'POST /v1/invitations/accept': async () => {
      const created = await suite.server.request(
        'POST',
        `/v1/orgs/${suite.org.orgId}/invitations`,
        write({ email: `accept-${idempotencyKey()}@example.com`, role: 'viewer' }),
      );
      return suite.server.request('POST', '/v1/invitations/accept', {
        idempotencyKey: idempotencyKey(),
        body: { token: created.body.token, name: 'Sample', password: 'sample password 1' },
      });
    },
    'GET /v1/me/sessions': () => suite.server.request('GET', '/v1/me/sessions', admin()),
    'DELETE /v1/me/sessions/{id}': async () => {
      const email = await withPassword(suite.server, suite.org.adminUserId);
      const session = await signIn(suite.server, email);
      return suite.server.request('DELETE', `/v1/me/sessions/${session.id}`, {
        headers: browser(session),
        idempotencyKey: idempotencyKey(),
      });
    },
    'GET /v1/me/oauth-grants': () => suite.server.request('GET', '/v1/me/oauth-grants', admin()),
    'DELETE /v1/me/oauth-grants/{id}': async () => {
      const session = await viewerSession();
      await oauthTokens(suite.server, session, 'org:read');
      const grants = await suite.server.request('GET', '/v1/me/oauth-grants', { headers: browser(session) });
      return suite.server.request('DELETE', `/v1/me/oauth-grants/${grants.body.data[0].id}`, {
        headers: browser(session),
        idempotencyKey: idempotencyKey(),
      });
    },
    'POST /v1/me/two-factor': async () => {
      const session = await viewerSession();
      return suite.server.request('POST', '/v1/me/two-factor', {
        headers: browser(session),
        idempotencyKey: idempotencyKey(),
      });
    },
    'POST /v1/me/two-factor/confirm': async () => {
      const session = await viewerSession();
      const enrolled = await suite.server.request('POST', '/v1/me/two-factor', {
        headers: browser(session),
        idempotencyKey: idempotencyKey(),
      });
      return suite.server.request('POST', '/v1/me/two-factor/confirm', {
        headers: browser(session),
        idempotencyKey: idempotencyKey(),
        body: { code: currentTotp(enrolled.body.secret) },
      });
    },
    'POST /v1/me/two-factor/disable': async () => {
      const session = await viewerSession();
      const enrolled = await suite.server.request('POST', '/v1/me/two-factor', {
        headers: browser(session),
        idempotencyKey: idempotencyKey(),
      });
      await suite.server.request('POST', '/v1/me/two-factor/confirm', {
        headers: browser(session),
        idempotencyKey: idempotencyKey(),
        body: { code: currentTotp(enrolled.body.secret, -1) },
      });
      return suite.server.request('POST', '/v1/me/two-factor/disable', {
        headers: browser(session),
        idempotencyKey: idempotencyKey(),
        body: { code: currentTotp(enrolled.body.secret) },
      });
    },
    // The suite has no delivery hook: an already verified account answers without sending anything.
    'POST /v1/me/email-verification': async () => {
      const { userId, apiKey } = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
      await suite.server.prisma.user.update({ where: { id: userId }, data: { verified: true } });
      return suite.server.request('POST', '/v1/me/email-verification', {
        token: apiKey,
        idempotencyKey: idempotencyKey(),
      });
    },
    'POST /v1/orgs/{orgId}/webhooks': () =>
      suite.server.request(
        'POST',
        `/v1/orgs/${suite.org.orgId}/webhooks`,
        write({ url: 'https://hooks.example.com/a', events: ['*'] }),
      ),
    'GET /v1/orgs/{orgId}/webhooks': async () => {
      await sampleWebhook();
      return suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/webhooks`, admin());
    },
    'GET /v1/orgs/{orgId}/webhooks/{id}': async () =>
      suite.server.request('GET', `/v1/orgs/${suite.org.orgId}/webhooks/${(await sampleWebhook()).id}`, admin()),
    'PATCH /v1/orgs/{orgId}/webhooks/{id}': async () => {
      const webhook = await sampleWebhook();
      return suite.server.request(
        'PATCH',
        `/v1/orgs/${suite.org.orgId}/webhooks/${webhook.id}`,
        write({ expectedVersion: webhook.version, state: 'disabled' }),
      );
    },
    'DELETE /v1/orgs/{orgId}/webhooks/{id}': async () => {
      const webhook = await sampleWebhook();
      return suite.server.request(
        'DELETE',
        `/v1/orgs/${suite.org.orgId}/webhooks/${webhook.id}`,
        write({ expectedVersion: webhook.version }),
      );
    },
    'POST /v1/orgs/{orgId}/webhooks/{id}/rotate-secret': async () =>
      suite.server.request(
        'POST',
        `/v1/orgs/${suite.org.orgId}/webhooks/${(await sampleWebhook()).id}/rotate-secret`,
        write(),
      ),
    'POST /v1/orgs/{orgId}/webhooks/{id}/test': async () =>
      suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/webhooks/${(await sampleWebhook()).id}/test`, write()),
    'GET /v1/orgs/{orgId}/webhooks/{id}/deliveries': async () =>
      suite.server.request(
        'GET',
        `/v1/orgs/${suite.org.orgId}/webhooks/${(await sampleWebhook()).id}/deliveries`,
        admin(),
      ),
    'POST /v1/orgs/{orgId}/webhooks/{id}/replay': async () =>
      suite.server.request(
        'POST',
        `/v1/orgs/${suite.org.orgId}/webhooks/${(await sampleWebhook()).id}/replay`,
        write({}),
      ),
  };

  it('has a sample for every route', () => {
    expect(Object.keys(samples).sort()).toEqual(routes.map((route) => `${route.method} ${route.path}`).sort());
  });

  it.each(routes.map((route) => [`${route.method} ${route.path}`, route] as const))('%s', async (name, route) => {
    const response = await samples[name]!();
    expect(response.status, JSON.stringify(response.body)).toBe(route.successStatus);
    const parsed = route.response.safeParse(response.body);
    expect(parsed.success, JSON.stringify(parsed.error?.issues)).toBe(true);
  });
});
