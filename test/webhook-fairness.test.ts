import { describe, expect, it } from 'vitest';
import { slotsPerOrg } from '../src/jobs/webhooks/org-slots.ts';
import { createOrg, idempotencyKey, type TestOrg } from './helpers/factories.ts';
import { startReceiver, verify, type Receiver } from './helpers/receiver.ts';
import { useServerWithOrg, type Suite } from './helpers/suite.ts';
import { createRow, createTable } from './helpers/workspace.ts';

/**
 * Issue 48: one org's slow webhook receivers must not hold every delivery slot of a worker. The worker runs beside the
 * test server. Receivers hang until the test releases them, and attempts time out only after 60 s, so an endpoint of
 * another org is delivered while they hang only because a slot was left to it.
 */
const WEBHOOK_ENV = {
  WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
  WEBHOOK_ALLOW_HTTP: 'true',
  WEBHOOK_TIMEOUT_MS: '60000',
};
const UNTIL = { timeout: 20_000, interval: 50 };
const fields = [{ name: 'Name', type: 'text' }];

async function webhookFor(suite: Suite, org: TestOrg, url: string, databaseId: string) {
  const response = await suite.server.request('POST', `/v1/orgs/${org.orgId}/webhooks`, {
    token: org.adminKey,
    idempotencyKey: idempotencyKey(),
    body: { url, events: ['*'], databaseId },
  });
  expect(response.status, response.text).toBe(201);
  return response.body as { id: string; secret: string };
}

/**
 * A webhook.test message through the endpoint, waited for: the worker has claimed it once and read its feeds to their
 * end (arming them), so that its next change is announced to the worker at once.
 */
async function testedOnce(suite: Suite, org: TestOrg, webhookId: string, receiver: Receiver) {
  const before = receiver.received.length;
  const queued = await suite.server.request('POST', `/v1/orgs/${org.orgId}/webhooks/${webhookId}/test`, {
    token: org.adminKey,
    idempotencyKey: idempotencyKey(),
  });
  expect(queued.status, queued.text).toBe(202);
  await expect.poll(() => receiver.received.length, UNTIL).toBe(before + 1);
}

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

describe('one org with many hanging receivers', () => {
  const suite = useServerWithOrg(WEBHOOK_ENV);
  // The worker's default WEBHOOK_CONCURRENCY.
  const share = slotsPerOrg(16);

  it(`holds ${share} of the worker's 16 slots, and another org's endpoint is delivered while they hang`, async () => {
    const other = await createOrg(suite.server.prisma);
    const [slowTable, otherTable] = [
      await createTable(suite.server, suite.org, fields),
      await createTable(suite.server, other, fields),
    ];
    const [slow, fast] = [await startReceiver(), await startReceiver()];
    const release = gate();
    slow.script(...Array.from({ length: 16 }, () => ({ until: release.opened })));
    try {
      for (let index = 0; index < 16; index += 1)
        await webhookFor(suite, suite.org, `${slow.url}?endpoint=${index}`, slowTable.databaseId);
      const webhook = await webhookFor(suite, other, fast.url, otherTable.databaseId);
      await testedOnce(suite, other, webhook.id, fast);

      // One change: each of the 16 endpoints has a message, and every request hangs.
      await createRow(suite.server, suite.org.adminKey, slowTable, { Name: 'slow' });
      await expect.poll(() => slow.received.length, UNTIL).toBe(share);

      const row = await createRow(suite.server, other.adminKey, otherTable, { Name: 'other org' });
      await expect.poll(() => fast.messages().length, UNTIL).toBe(1);
      expect(verify(webhook.secret, fast.messages()[0]!)).toMatchObject({
        type: 'row.created',
        data: { rowId: row.body.row.id },
      });
      // Still hanging, and no more of them: the org holds its share only (before: all 16 slots, and the other org's
      // message waited for an attempt to time out).
      expect(slow.received).toHaveLength(share);

      release.open();
      await expect.poll(() => slow.messages().length, UNTIL).toBe(16);
      // One message per endpoint: ids are derived from the endpoint and the change.
      expect(new Set(slow.messages().map((message) => message.id)).size).toBe(16);
    } finally {
      release.open();
      await slow.close();
      await fast.close();
    }
  });
});

describe('a claim of a slow endpoint', () => {
  // One slot: the only way another endpoint gets it is that the claim holding it ends.
  const suite = useServerWithOrg({ ...WEBHOOK_ENV, WEBHOOK_CONCURRENCY: '1' });

  it("yields its slot after its time share, before the endpoint's backlog is delivered", async () => {
    const other = await createOrg(suite.server.prisma);
    const [slowTable, otherTable] = [
      await createTable(suite.server, suite.org, fields),
      await createTable(suite.server, other, fields),
    ];
    const [slow, fast] = [await startReceiver(), await startReceiver()];
    try {
      const slowHook = await webhookFor(suite, suite.org, slow.url, slowTable.databaseId);
      const webhook = await webhookFor(suite, other, fast.url, otherTable.databaseId);
      await testedOnce(suite, suite.org, slowHook.id, slow);
      await testedOnce(suite, other, webhook.id, fast);

      // 20 changes, each answered after 300 ms: 6 s of deliveries, where a claim's share is 1 s.
      slow.script(...Array.from({ length: 20 }, () => ({ holdMs: 300 })));
      const created = await suite.server.request('POST', `${slowTable.path}/rows/batch`, {
        token: suite.org.adminKey,
        idempotencyKey: idempotencyKey(),
        body: {
          expectedSchemaVersion: slowTable.schemaVersion,
          operations: Array.from({ length: 20 }, (_, index) => ({ op: 'create', values: { Name: `row ${index}` } })),
        },
      });
      expect(created.status, created.text).toBe(200);
      await expect.poll(() => slow.messages().length, UNTIL).toBeGreaterThanOrEqual(1);

      await createRow(suite.server, other.adminKey, otherTable, { Name: 'other org' });
      await expect.poll(() => fast.messages().length, UNTIL).toBe(1);
      // Before, a claim sent up to 100 messages whatever they took: the other org's waited for all 20.
      expect(slow.messages().length).toBeLessThan(20);
      await expect.poll(() => slow.messages().length, UNTIL).toBe(20);
      expect(slow.messages().map((message) => message.json.data.values[slowTable.fields.Name!])).toEqual(
        Array.from({ length: 20 }, (_, index) => `row ${index}`),
      );
    } finally {
      await slow.close();
      await fast.close();
    }
  });
});
