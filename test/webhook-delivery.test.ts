import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { MAX_BATCH_BYTES } from '../src/catalog/webhook-deliveries.ts';
import { WebhookBatchMessage, WebhookChangeMessage, WebhookTestMessage } from '../src/contracts/webhooks.ts';
import { idempotencyKey } from './helpers/factories.ts';
import { countFeedArms } from './helpers/feed-arms.ts';
import { startReceiver, verify, type Receiver } from './helpers/receiver.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Issue 27: deliveries to a real receiver on loopback, through the worker that runs beside the test server. The
 * retry schedule is short (two retries 300 ms apart) and the timeout 1 s, so that a test sees the whole life of a
 * message in seconds.
 */
const suite = useServerWithOrg({
  WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
  WEBHOOK_ALLOW_HTTP: 'true',
  WEBHOOK_RETRY_SCHEDULE: '300ms,300ms',
  WEBHOOK_TIMEOUT_MS: '1000',
});
let receiver: Receiver;
const onCitus = inject('databaseNodes').length > 1;

beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(() => receiver.close());

const hooks = () => `/v1/orgs/${suite.org.orgId}/webhooks`;
const UNTIL = { timeout: 15_000, interval: 50 };

async function webhookFor(url: string, body: Record<string, unknown> = {}) {
  const response = await suite.server.request('POST', hooks(), {
    token: suite.org.adminKey,
    idempotencyKey: idempotencyKey(),
    body: { url, events: ['*'], ...body },
  });
  expect(response.status, response.text).toBe(201);
  return response.body as { id: string; secret: string; version: string };
}

async function freshEndpoint(table: TestTable, body: Record<string, unknown> = {}) {
  const endpoint = await startReceiver();
  const webhook = await webhookFor(endpoint.url, { databaseId: table.databaseId, ...body });
  return { endpoint, webhook };
}

async function deliveries(webhookId: string) {
  const response = await suite.server.request('GET', `${hooks()}/${webhookId}/deliveries?limit=100`, {
    token: suite.org.adminKey,
  });
  expect(response.status, response.text).toBe(200);
  return response.body.data as any[];
}

const people = () => createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);

/**
 * When this process hears `wds_webhooks` name the webhook (a change of its settings). The worker runs in this process,
 * so it hears each notification when this listener does, or a turn of the event loop later.
 */
async function hearChangesOf(webhookId: string) {
  const listener = new pg.Client({ connectionString: suite.server.database.url });
  await listener.connect();
  const heard: number[] = [];
  listener.on('notification', (message) => {
    if (message.payload === webhookId) heard.push(Date.now());
  });
  await listener.query('LISTEN wds_webhooks');
  return { heard, close: () => listener.end() };
}

/**
 * A new webhook with a backlog of `count` changes (rows created in one batch) being delivered, each answer held 10 ms
 * so that a claim's 100 messages take a second or more; `heard` as hearChangesOf gives it.
 */
async function backlogBeingDelivered(count: number) {
  const table = await people();
  const { endpoint, webhook } = await freshEndpoint(table);
  endpoint.script(...Array.from({ length: count }, () => ({ holdMs: 10 })));
  const notifications = await hearChangesOf(webhook.id);
  const close = async () => {
    await notifications.close();
    await endpoint.close();
  };
  const created = await suite.server.request('POST', `${table.path}/rows/batch`, {
    token: suite.org.adminKey,
    idempotencyKey: idempotencyKey(),
    body: {
      expectedSchemaVersion: table.schemaVersion,
      operations: Array.from({ length: count }, (_, index) => ({ op: 'create', values: { Name: `row ${index}` } })),
    },
  });
  if (created.status !== 200) await close();
  expect(created.status, created.text).toBe(200);
  return { endpoint, webhook, heard: notifications.heard, close };
}

describe('a delivery', () => {
  it('is a signed Standard Webhooks POST of the change, verified with the standardwebhooks library', async () => {
    const table = await people();
    const webhook = await webhookFor(receiver.url, { databaseId: table.databaseId });
    const row = await createRow(suite.server, suite.org.adminKey, table, { Name: 'Ada' });
    await expect.poll(() => receiver.messages().length, UNTIL).toBeGreaterThanOrEqual(1);
    const [message] = receiver.messages();
    expect(message!.headers['content-type']).toBe('application/json');
    expect(message!.id).toMatch(/^msg_[0-9A-Z]{26}$/);
    expect(Math.abs(Number(message!.timestamp) - Date.now() / 1000)).toBeLessThan(30);
    const body = verify(webhook.secret, message!);
    // Exactly the message the OpenAPI document's `webhooks` describe.
    expect(WebhookChangeMessage.safeParse(body).error).toBeUndefined();
    expect(body).toMatchObject({
      type: 'row.created',
      data: {
        kind: 'row.created',
        tableId: table.tableId,
        rowId: row.body.row.id,
        version: '1',
        values: { [table.fields.Name!]: 'Ada' },
      },
    });
    // When the change happened, as Standard Webhooks defines it: the same on every attempt and after a crash.
    expect(body.timestamp).toBe(body.data.committedAt);
    expect(body.data.cursor).toEqual(expect.any(String));
    await expect.poll(async () => (await deliveries(webhook.id))[0]?.succeeded, UNTIL).toBe(true);
    expect((await deliveries(webhook.id))[0]).toMatchObject({
      messageId: message!.id,
      changes: 1,
      attempt: 1,
      statusCode: 204,
      error: null,
      nextAttemptAt: null,
    });
  });

  it('delivers only the kinds and tables the webhook names', async () => {
    const table = await people();
    const other = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }], {
      databaseId: table.databaseId,
    });
    const { endpoint } = await freshEndpoint(table, { events: ['row.updated'], tableIds: [table.tableId] });
    const row = await createRow(suite.server, suite.org.adminKey, table, { Name: 'Ada' });
    await createRow(suite.server, suite.org.adminKey, other, { Name: 'Bob' });
    const update = await suite.server.request('PATCH', `${table.path}/rows/${row.body.row.id}`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1', values: { Name: 'Ada L.' } },
    });
    expect(update.status, update.text).toBe(200);
    await expect.poll(() => endpoint.messages().length, UNTIL).toBe(1);
    expect(endpoint.messages()[0]!.json).toMatchObject({
      type: 'row.updated',
      data: { rowId: row.body.row.id, previous: { [table.fields.Name!]: 'Ada' } },
    });
    await endpoint.close();
  });

  it('sends a webhook.test message on POST …/test', async () => {
    const table = await people();
    const { endpoint, webhook } = await freshEndpoint(table);
    const queued = await suite.server.request('POST', `${hooks()}/${webhook.id}/test`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
    });
    expect(queued.status, queued.text).toBe(202);
    await expect.poll(() => endpoint.received.length, UNTIL).toBe(1);
    expect(endpoint.received[0]!.id).toBe(queued.body.messageId);
    await expect.poll(async () => (await deliveries(webhook.id))[0]?.changes, UNTIL).toBe(0);
    expect(WebhookTestMessage.safeParse(verify(webhook.secret, endpoint.received[0]!)).error).toBeUndefined();
    expect(verify(webhook.secret, endpoint.received[0]!)).toMatchObject({
      type: 'webhook.test',
      data: { webhookId: webhook.id },
    });
    await endpoint.close();
  });

  it('signs with the old and the new secret after a rotation, space-separated', async () => {
    const table = await people();
    const { endpoint, webhook } = await freshEndpoint(table);
    const rotated = await suite.server.request('POST', `${hooks()}/${webhook.id}/rotate-secret`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
    });
    await createRow(suite.server, suite.org.adminKey, table, { Name: 'Ada' });
    await expect.poll(() => endpoint.messages().length, UNTIL).toBe(1);
    const [message] = endpoint.messages();
    expect(message!.signature.split(' ')).toHaveLength(2);
    expect(message!.signature).toMatch(/^v1,[A-Za-z0-9+/=]+ v1,[A-Za-z0-9+/=]+$/);
    expect(verify(rotated.body.secret, message!).type).toBe('row.created');
    expect(verify(webhook.secret, message!).type).toBe('row.created');
    await endpoint.close();
  });

  it('signs with a rotated secret from the next message on, while a backlog is being delivered', async () => {
    const { endpoint, webhook, heard, close } = await backlogBeingDelivered(200);
    try {
      // Four rotations, each in the middle of a claim (claims end after 100 messages or 1 s).
      const rotations: { secret: string; heardAt: number }[] = [];
      for (const after of [20, 60, 110, 150]) {
        await expect.poll(() => endpoint.messages().length, UNTIL).toBeGreaterThanOrEqual(after);
        const rotated = await suite.server.request('POST', `${hooks()}/${webhook.id}/rotate-secret`, {
          token: suite.org.adminKey,
          idempotencyKey: idempotencyKey(),
        });
        expect(rotated.status, rotated.text).toBe(200);
        await expect.poll(() => heard.length, UNTIL).toBe(rotations.length + 1);
        rotations.push({ secret: rotated.body.secret, heardAt: heard.at(-1)! });
      }
      await expect.poll(() => endpoint.messages().length, { timeout: 30_000, interval: 100 }).toBe(200);
      // What arrived after the worker heard of a rotation was sent after it, signed with the new secret too. Allowed:
      // the message in flight at that moment, and one sent as the notification was being read. Before, a claim
      // signed with the secrets it started with until its next save (up to 20 messages).
      const signedWith = (secret: string, message: (typeof endpoint.received)[number]) => {
        try {
          return verify(secret, message) !== null;
        } catch {
          return false;
        }
      };
      for (const [index, rotation] of rotations.entries()) {
        const until = rotations[index + 1]?.heardAt ?? Number.POSITIVE_INFINITY;
        const after = endpoint.messages().filter((message) => message.at > rotation.heardAt && message.at <= until);
        expect(after.length).toBeGreaterThan(0);
        expect(after.filter((message) => !signedWith(rotation.secret, message)).length).toBeLessThanOrEqual(2);
      }
    } finally {
      await close();
    }
  });

  it('stops before its next message when disabled while a backlog is being delivered', async () => {
    const { endpoint, webhook, heard, close } = await backlogBeingDelivered(200);
    try {
      await expect.poll(() => endpoint.messages().length, UNTIL).toBeGreaterThanOrEqual(30);
      const disabled = await suite.server.request('PATCH', `${hooks()}/${webhook.id}`, {
        token: suite.org.adminKey,
        idempotencyKey: idempotencyKey(),
        body: { expectedVersion: webhook.version, state: 'disabled' },
      });
      expect(disabled.status, disabled.text).toBe(200);
      await expect.poll(() => heard.length, UNTIL).toBe(1);
      // Long enough for a claim that did not stop to send several more (it noticed at its next save, before).
      await new Promise((resolve) => setTimeout(resolve, 500));
      const after = endpoint.received.filter((message) => message.at > heard[0]!);
      // Allowed: the message in flight when the worker heard of it, and one sent as the notification was being read.
      expect(after.length).toBeLessThanOrEqual(2);
      expect(endpoint.messages().length).toBeLessThan(200);
    } finally {
      await close();
    }
  });
});

describe('failures', () => {
  it('retries after 500s with the same webhook-id and keeps at most 4 KiB of the answer', async () => {
    const table = await people();
    const { endpoint, webhook } = await freshEndpoint(table);
    endpoint.script({ status: 500, body: 'x'.repeat(10_000) }, { status: 503 });
    await createRow(suite.server, suite.org.adminKey, table, { Name: 'Ada' });
    await expect.poll(() => endpoint.received.length, UNTIL).toBe(3);
    expect(new Set(endpoint.received.map((entry) => entry.id)).size).toBe(1);
    // The same body byte for byte: the kept message is stored as the text it was sent as.
    expect(new Set(endpoint.received.map((entry) => entry.body)).size).toBe(1);
    await expect.poll(async () => (await deliveries(webhook.id)).length, UNTIL).toBe(3);
    const [third, second, first] = await deliveries(webhook.id);
    expect(first).toMatchObject({ attempt: 1, statusCode: 500, succeeded: false, error: 'the endpoint answered 500' });
    expect(first.responseBody).toHaveLength(4096);
    expect(first.nextAttemptAt).toEqual(expect.any(String));
    expect(second).toMatchObject({ attempt: 2, statusCode: 503, succeeded: false });
    expect(third).toMatchObject({ attempt: 3, statusCode: 204, succeeded: true, nextAttemptAt: null });
    await endpoint.close();
  });

  it('retries after a timeout, and does not follow a redirect', async () => {
    const table = await people();
    const { endpoint, webhook } = await freshEndpoint(table);
    endpoint.script({ holdMs: 2_500 }, { status: 302 });
    await createRow(suite.server, suite.org.adminKey, table, { Name: 'Ada' });
    await expect.poll(async () => (await deliveries(webhook.id)).length, UNTIL).toBe(3);
    const [third, second, first] = await deliveries(webhook.id);
    expect(first).toMatchObject({ statusCode: null, succeeded: false, error: 'no complete answer within 1000 ms' });
    expect(second).toMatchObject({ statusCode: 302, succeeded: false });
    expect(third).toMatchObject({ succeeded: true });
    expect(new Set([first.messageId, second.messageId, third.messageId]).size).toBe(1);
    await endpoint.close();
  });

  it('disables the endpoint after the last retry, keeps its place, and resumes from it when re-enabled', async () => {
    const table = await people();
    const { endpoint, webhook } = await freshEndpoint(table);
    endpoint.script({ status: 500 }, { status: 500 }, { status: 500 });
    await createRow(suite.server, suite.org.adminKey, table, { Name: 'first' });
    await expect
      .poll(
        async () =>
          (await suite.server.request('GET', `${hooks()}/${webhook.id}`, { token: suite.org.adminKey })).body.state,
        UNTIL,
      )
      .toBe('disabled');
    await createRow(suite.server, suite.org.adminKey, table, { Name: 'second' });
    const disabled = (await suite.server.request('GET', `${hooks()}/${webhook.id}`, { token: suite.org.adminKey }))
      .body;
    expect(disabled.disabledReason).toMatch(/after 3 failed attempts/);
    const activity = await suite.server.request(
      'GET',
      `/v1/orgs/${suite.org.orgId}/activity?event=webhook.disable&limit=100`,
      { token: suite.org.adminKey },
    );
    expect(
      activity.body.data.some(
        (entry: any) => entry.actor.kind === 'system' && /after 3 failed attempts/.test(entry.summary),
      ),
    ).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(endpoint.received).toHaveLength(3);
    const resumed = await suite.server.request('PATCH', `${hooks()}/${webhook.id}`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: disabled.version, state: 'active' },
    });
    expect(resumed.status, resumed.text).toBe(200);
    await expect.poll(() => endpoint.received.length, UNTIL).toBe(5);
    const names = endpoint.received.map((entry) => entry.json.data.values[table.fields.Name!]);
    expect(names).toEqual(['first', 'first', 'first', 'first', 'second']);
    expect(new Set(endpoint.received.slice(0, 4).map((entry) => entry.id)).size).toBe(1);
    await endpoint.close();
  });
});

describe('order and replay', () => {
  it('delivers every change once, in feed order, while 8 writers commit at once', async () => {
    const table = await people();
    const { endpoint } = await freshEndpoint(table);
    await Promise.all(
      Array.from({ length: 8 }, async (_, writer) => {
        for (let index = 0; index < 10; index += 1) {
          const response = await createRow(suite.server, suite.org.adminKey, table, { Name: `${writer}-${index}` });
          expect(response.status, response.text).toBe(201);
        }
      }),
    );
    await expect.poll(() => endpoint.messages().length, { timeout: 30_000, interval: 100 }).toBe(80);
    const feed = await suite.server.request(
      'GET',
      `/v1/orgs/${suite.org.orgId}/databases/${table.databaseId}/changes?limit=1000`,
      {
        token: suite.org.adminKey,
      },
    );
    expect(feed.status, feed.text).toBe(200);
    // Exactly the feed's changes, in the feed's (commit) order, each once.
    const expected = feed.body.data.filter((change: any) => change.kind === 'row.created');
    expect(expected).toHaveLength(80);
    expect(endpoint.messages().map((entry) => entry.json.data)).toEqual(expected);
    expect(endpoint.received).toHaveLength(80);
    await endpoint.close();
  });

  // Not on Citus: there the deliverer polls, nobody arms (docs/decisions/citus.md).
  it.skipIf(onCitus)(
    'delivers from a feed being written without arming it, and arms it once the writes stop',
    async () => {
      const table = await people();
      const control = new pg.Client({ connectionString: suite.server.database.url });
      await control.connect();
      try {
        const arms = await countFeedArms(control, table.databaseId);
        const { endpoint } = await freshEndpoint(table);
        const create = async (name: string) => {
          const response = await createRow(suite.server, suite.org.adminKey, table, { Name: name });
          expect(response.status, response.text).toBe(201);
        };
        await create('first');
        await expect.poll(() => endpoint.messages().length, UNTIL).toBe(1);
        const armedBefore = await arms();
        // Three writers commit for 1.5 s, a commit every few milliseconds: each of the deliverer's looks (200 ms
        // apart) finds new changes.
        let written = 1;
        const until = Date.now() + 1_500;
        await Promise.all(
          [1, 2, 3].map(async (writer) => {
            for (let index = 0; Date.now() < until; index += 1) {
              await create(`${writer}-${index}`);
              written += 1;
            }
          }),
        );
        await expect.poll(() => endpoint.messages().length, { timeout: 30_000, interval: 100 }).toBe(written);
        expect((await arms()) - armedBefore).toBeLessThanOrEqual(2);
        // Quiet again: the deliverer arms the feed, and the next commit is delivered.
        await expect.poll(arms, UNTIL).toBeGreaterThan(armedBefore);
        await create('last');
        await expect.poll(() => endpoint.messages().length, UNTIL).toBe(written + 1);
        expect(new Set(endpoint.messages().map((message) => message.id)).size).toBe(written + 1);
        await endpoint.close();
      } finally {
        await control.end();
      }
    },
  );

  it('replays every change after a cursor, and every retained one without it, with new message ids', async () => {
    const table = await people();
    const { endpoint, webhook } = await freshEndpoint(table);
    for (const name of ['a', 'b', 'c']) await createRow(suite.server, suite.org.adminKey, table, { Name: name });
    await expect.poll(() => endpoint.messages().length, UNTIL).toBe(3);
    const first = endpoint.messages()[0]!;
    const replay = await suite.server.request('POST', `${hooks()}/${webhook.id}/replay`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { after: first.json.data.cursor },
    });
    expect(replay.status, replay.text).toBe(202);
    expect(replay.body).toEqual({ webhookId: webhook.id, after: first.json.data.cursor });
    await expect.poll(() => endpoint.messages().length, UNTIL).toBe(5);
    const replayed = endpoint
      .messages()
      .slice(3)
      .map((entry) => entry.json.data.values[table.fields.Name!]);
    expect(replayed).toEqual(['b', 'c']);
    // Ids are derived from the change and the endpoint's generation, which a replay moves: a receiver that dedupes
    // by id does not drop what was asked for.
    const ids = endpoint.messages().map((entry) => entry.id);
    expect(new Set(ids).size).toBe(5);
    const all = await suite.server.request('POST', `${hooks()}/${webhook.id}/replay`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: {},
    });
    expect(all.status).toBe(202);
    // Every retained change of the database: the table's creation too.
    await expect.poll(() => endpoint.messages().length, UNTIL).toBe(9);
    expect(
      endpoint
        .messages()
        .slice(5)
        .map((entry) => entry.json.type),
    ).toEqual(['table.created', 'row.created', 'row.created', 'row.created']);
    await endpoint.close();
  });

  it('refuses a malformed cursor with 400 and one of another database with 400', async () => {
    const table = await people();
    const { endpoint, webhook } = await freshEndpoint(table);
    const send = (after: string) =>
      suite.server.request('POST', `${hooks()}/${webhook.id}/replay`, {
        token: suite.org.adminKey,
        idempotencyKey: idempotencyKey(),
        body: { after },
      });
    const malformed = await send('not-a-cursor');
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.code).toBe('CURSOR_INVALID');
    const elsewhere = Buffer.from(`c1.${'0'.repeat(25)}1.1.1`).toString('base64url');
    expect((await send(elsewhere)).status).toBe(400);
    await endpoint.close();
  });
});

describe('batches', () => {
  /** The changes of every batch received, first arrival of each webhook-id, each message verified as a receiver would. */
  const batchesOf = (endpoint: Receiver, secret: string) =>
    endpoint.messages().map((message) => verify(secret, message) as { type: string; timestamp: string; data: any });

  it('delivers up to maxChanges changes of one feed per message, in feed order, while 8 writers commit at once', async () => {
    const table = await people();
    const { endpoint, webhook } = await freshEndpoint(table, { batch: { maxChanges: 7 } });
    // The first message is held, so that the changes committed meanwhile are sent several to a message.
    endpoint.script({ holdMs: 500 });
    await Promise.all(
      Array.from({ length: 8 }, async (_, writer) => {
        for (let index = 0; index < 10; index += 1) {
          const response = await createRow(suite.server, suite.org.adminKey, table, { Name: `${writer}-${index}` });
          expect(response.status, response.text).toBe(201);
        }
      }),
    );
    const delivered = () => batchesOf(endpoint, webhook.secret).flatMap((body) => body.data.changes);
    await expect.poll(() => delivered().length, { timeout: 30_000, interval: 100 }).toBe(80);
    const feed = await suite.server.request(
      'GET',
      `/v1/orgs/${suite.org.orgId}/databases/${table.databaseId}/changes?limit=1000`,
      { token: suite.org.adminKey },
    );
    expect(feed.status, feed.text).toBe(200);
    expect(delivered()).toEqual(feed.body.data.filter((change: any) => change.kind === 'row.created'));
    const batches = batchesOf(endpoint, webhook.secret);
    for (const body of batches) {
      expect(WebhookBatchMessage.safeParse(body).error).toBeUndefined();
      expect(body.type).toBe('changes');
      expect(body.data.changes.length).toBeGreaterThanOrEqual(1);
      expect(body.data.changes.length).toBeLessThanOrEqual(7);
      expect(body.timestamp).toBe(body.data.changes.at(-1).committedAt);
    }
    expect(batches.length).toBeLessThan(80);
    expect(endpoint.received).toHaveLength(batches.length);
    // Each attempt is logged once per message, at its last change's cursor.
    await expect.poll(async () => (await deliveries(webhook.id)).length, UNTIL).toBe(batches.length);
    const logged = await deliveries(webhook.id);
    expect(logged.map((attempt) => attempt.cursor).reverse()).toEqual(
      batches.map((body) => body.data.changes.at(-1).cursor),
    );
    expect(logged.every((attempt) => attempt.type === 'changes' && attempt.succeeded)).toBe(true);
    expect(logged.map((attempt) => attempt.changes).reverse()).toEqual(batches.map((body) => body.data.changes.length));
    await endpoint.close();
  });

  it('holds changes of one database per message for an org-wide webhook, each database in its feed order', async () => {
    const [first, second] = [await people(), await people()];
    const endpoint = await startReceiver();
    const webhook = await webhookFor(endpoint.url, { events: ['row.created'], batch: { maxChanges: 50 } });
    endpoint.script({ holdMs: 500 });
    await Promise.all(
      [first, first, second, second].map(async (table, writer) => {
        for (let index = 0; index < 10; index += 1) {
          const response = await createRow(suite.server, suite.org.adminKey, table, { Name: `${writer}-${index}` });
          expect(response.status, response.text).toBe(201);
        }
      }),
    );
    const delivered = () => batchesOf(endpoint, webhook.secret).flatMap((body) => body.data.changes);
    await expect.poll(() => delivered().length, { timeout: 30_000, interval: 100 }).toBe(40);
    const batches = batchesOf(endpoint, webhook.secret);
    for (const body of batches) expect(new Set(body.data.changes.map((change: any) => change.tableId)).size).toBe(1);
    expect(batches.some((body) => body.data.changes.length > 1)).toBe(true);
    for (const table of [first, second]) {
      const feed = await suite.server.request(
        'GET',
        `/v1/orgs/${suite.org.orgId}/databases/${table.databaseId}/changes?limit=1000`,
        { token: suite.org.adminKey },
      );
      expect(delivered().filter((change: any) => change.tableId === table.tableId)).toEqual(
        feed.body.data.filter((change: any) => change.kind === 'row.created'),
      );
    }
    // It follows every database of the org: the tests after this one must not feed it.
    const deleted = await suite.server.request('DELETE', `${hooks()}/${webhook.id}`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: webhook.version },
    });
    expect(deleted.status, deleted.text).toBe(200);
    await endpoint.close();
  });

  it(`keeps every batch within ${MAX_BATCH_BYTES} bytes of body, whatever maxChanges allows`, async () => {
    const fields = Array.from({ length: 10 }, (_, index) => ({
      name: `Text ${index}`,
      type: 'text',
      options: { maxLength: 10_000 },
    }));
    const table = await createTable(suite.server, suite.org, fields);
    const { endpoint, webhook } = await freshEndpoint(table, { batch: { maxChanges: 1000 } });
    endpoint.script({ holdMs: 500 });
    // ~200 kB of JSON a change ('é' is two bytes in UTF-8): 8 changes are ~1.6 MB, more than one message holds.
    const values = Object.fromEntries(fields.map((field) => [field.name, 'é'.repeat(10_000)]));
    for (let index = 0; index < 8; index += 1) {
      const response = await createRow(suite.server, suite.org.adminKey, table, values);
      expect(response.status, response.text).toBe(201);
    }
    const delivered = () => batchesOf(endpoint, webhook.secret).flatMap((body) => body.data.changes);
    await expect.poll(() => delivered().length, { timeout: 30_000, interval: 100 }).toBe(8);
    const sizes = endpoint.messages().map((message) => Buffer.byteLength(message.body));
    expect(Math.max(...sizes)).toBeLessThanOrEqual(MAX_BATCH_BYTES);
    expect(Math.max(...sizes)).toBeGreaterThan(MAX_BATCH_BYTES / 2);
    expect(batchesOf(endpoint, webhook.secret).some((body) => body.data.changes.length > 1)).toBe(true);
    await endpoint.close();
  });

  it('retries a batch with the same webhook-id and the same changes, whatever committed meanwhile', async () => {
    const table = await people();
    const { endpoint, webhook } = await freshEndpoint(table, { batch: { maxChanges: 10 } });
    endpoint.script({ status: 500 }, { status: 503 });
    await createRow(suite.server, suite.org.adminKey, table, { Name: 'a' });
    await expect.poll(() => endpoint.received.length, UNTIL).toBeGreaterThanOrEqual(1);
    for (const name of ['b', 'c']) await createRow(suite.server, suite.org.adminKey, table, { Name: name });
    const names = () =>
      batchesOf(endpoint, webhook.secret).flatMap((body) =>
        body.data.changes.map((change: any) => change.values[table.fields.Name!]),
      );
    await expect.poll(names, UNTIL).toEqual(['a', 'b', 'c']);
    const [first, second, third] = endpoint.received;
    expect([second!.id, third!.id]).toEqual([first!.id, first!.id]);
    expect([second!.body, third!.body]).toEqual([first!.body, first!.body]);
    expect(JSON.parse(first!.body).data.changes).toHaveLength(1);
    await endpoint.close();
  });

  it('goes back to one change per message after PATCH batch null', async () => {
    const table = await people();
    const { endpoint, webhook } = await freshEndpoint(table, { batch: { maxChanges: 5 } });
    await createRow(suite.server, suite.org.adminKey, table, { Name: 'a' });
    await expect.poll(() => endpoint.messages().length, UNTIL).toBe(1);
    expect(endpoint.messages()[0]!.json.type).toBe('changes');
    const single = await suite.server.request('PATCH', `${hooks()}/${webhook.id}`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: webhook.version, batch: null },
    });
    expect(single.status, single.text).toBe(200);
    await createRow(suite.server, suite.org.adminKey, table, { Name: 'b' });
    await expect.poll(() => endpoint.messages().length, UNTIL).toBe(2);
    expect(verify(webhook.secret, endpoint.messages()[1]!)).toMatchObject({
      type: 'row.created',
      data: { values: { [table.fields.Name!]: 'b' } },
    });
    await endpoint.close();
  });
});

describe('a host name that resolves to loopback', () => {
  const strict = useServerWithOrg({
    WEBHOOK_ALLOW_HTTP: 'true',
    WEBHOOK_RETRY_SCHEDULE: '100ms',
    WEBHOOK_TIMEOUT_MS: '1000',
  });

  it('is refused when the worker connects, without the allowed network', async () => {
    const endpoint = await startReceiver();
    const created = await strict.server.request('POST', `/v1/orgs/${strict.org.orgId}/webhooks`, {
      token: strict.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { url: 'http://hooks.example.com/hook', events: ['*'] },
    });
    expect(created.status, created.text).toBe(201);
    // Creation refuses a name that resolves to loopback (test/webhook-rules.test.ts); a name can resolve elsewhere
    // then and to loopback later (DNS rebinding), which this URL, set behind the API's back, stands for.
    await strict.server.prisma.$executeRawUnsafe(
      'UPDATE webhooks SET url = $1 WHERE id = $2::bpchar',
      `http://localhost:${endpoint.port}/hook`,
      created.body.id,
    );
    const test = await strict.server.request('POST', `/v1/orgs/${strict.org.orgId}/webhooks/${created.body.id}/test`, {
      token: strict.org.adminKey,
      idempotencyKey: idempotencyKey(),
    });
    expect(test.status).toBe(202);
    const attempts = async () =>
      (
        await strict.server.request('GET', `/v1/orgs/${strict.org.orgId}/webhooks/${created.body.id}/deliveries`, {
          token: strict.org.adminKey,
        })
      ).body.data;
    await expect.poll(async () => (await attempts()).length, UNTIL).toBe(1);
    expect((await attempts())[0]).toMatchObject({ succeeded: false, statusCode: null });
    expect((await attempts())[0].error).toMatch(
      /^localhost resolves to (127\.0\.0\.1|::1), a loopback address webhooks may not reach$/,
    );
    expect(endpoint.received).toHaveLength(0);
    await endpoint.close();
  });
});
