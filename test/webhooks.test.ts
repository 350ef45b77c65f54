import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_WEBHOOKS_PER_ORG } from '../src/contracts/webhooks.ts';
import { addMember, createOrg, idempotencyKey, type TestOrg } from './helpers/factories.ts';
import { expectError, expectProblemPaths, expectTimestamp } from './helpers/expectations.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createDatabase, createTable } from './helpers/workspace.ts';

/** Issue 27: the webhook catalog over HTTP and GraphQL (deliveries are test/webhook-delivery.test.ts). */
const suite = useServerWithOrg({ WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8', WEBHOOK_ALLOW_HTTP: 'true' });
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;
let member: string;
let viewer: string;
let other: TestOrg;

beforeAll(async () => {
  member = (await addMember(suite.server.prisma, suite.org.orgId, 'member')).apiKey;
  viewer = (await addMember(suite.server.prisma, suite.org.orgId, 'viewer')).apiKey;
  other = await createOrg(suite.server.prisma);
});

const hooks = () => `/v1/orgs/${suite.org.orgId}/webhooks`;

function create(body: Record<string, unknown>, token = suite.org.adminKey, key = idempotencyKey()) {
  return suite.server.request('POST', hooks(), { token, idempotencyKey: key, body });
}

async function created(body: Record<string, unknown> = {}) {
  const response = await create({ url: 'https://hooks.example.com/in', events: ['*'], ...body });
  expect(response.status, response.text).toBe(201);
  return response.body;
}

describe('creating a webhook', () => {
  it('answers 201 with the webhook and its secret, shown once with Cache-Control: no-store', async () => {
    const response = await create({
      url: 'https://hooks.example.com/in?x=1',
      description: 'ERP',
      events: ['row.created', 'row.deleted'],
    });
    expect(response.status, response.text).toBe(201);
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(response.body).toMatchObject({
      orgId: suite.org.orgId,
      url: 'https://hooks.example.com/in?x=1',
      description: 'ERP',
      events: ['row.created', 'row.deleted'],
      databaseId: null,
      tableIds: [],
      batch: null,
      state: 'active',
      version: '1',
      disabledAt: null,
      previousSecretExpiresAt: null,
    });
    expect(response.body.secret).toMatch(SECRET);
    expect(Buffer.from(response.body.secret.slice(6), 'base64').length).toBeGreaterThanOrEqual(24);
    expectTimestamp(response.body.createdAt);
  });

  it('replays the same Idempotency-Key with the webhook and a null secret', async () => {
    const key = idempotencyKey();
    const body = { url: 'https://hooks.example.com/replayed', events: ['*'] };
    const first = await create(body, suite.org.adminKey, key);
    const again = await create(body, suite.org.adminKey, key);
    expect(again.status).toBe(201);
    expect(again.body).toEqual({ ...first.body, secret: null });
  });

  it('scopes a webhook to a database and its tables', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    const webhook = await created({ databaseId: table.databaseId, tableIds: [table.tableId] });
    expect(webhook).toMatchObject({ databaseId: table.databaseId, tableIds: [table.tableId] });
  });

  it.each([
    ['a table without a database', (table: string) => ({ tableIds: [table] }), [['tableIds']]],
    [
      'a table of another database',
      (table: string, database: string) => ({ databaseId: database, tableIds: [table] }),
      [['tableIds', 0]],
    ],
  ])('refuses %s with 422', async (_name, body, paths) => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    const database = await createDatabase(suite.server, suite.org);
    const response = await create({
      url: 'https://hooks.example.com/in',
      events: ['*'],
      ...body(table.tableId, database),
    });
    expectError(response, 422, 'VALIDATION_FAILED');
    expect(response.body.error.details.problems.map((problem: { path: unknown }) => problem.path)).toEqual(paths);
  });

  it('answers 404 for a database of another org', async () => {
    const database = await createDatabase(suite.server, other);
    expectError(
      await create({ url: 'https://hooks.example.com/in', events: ['*'], databaseId: database }),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });

  it.each([
    ['an unknown event kind', { events: ['row.moved'] }],
    ['"*" beside kinds', { events: ['*', 'row.created'] }],
    ['no events', { events: [] }],
    ['an unknown member', { secret: 'whsec_x' }],
  ])('refuses %s with 422', async (_name, body) => {
    expectError(
      await create({ url: 'https://hooks.example.com/in', events: ['*'], ...body }),
      422,
      'VALIDATION_FAILED',
    );
  });
});

describe('destinations', () => {
  it.each([
    ['RFC 1918 10/8', 'https://10.0.0.7/hook'],
    ['RFC 1918 172.16/12', 'https://172.16.5.4/hook'],
    ['RFC 1918 192.168/16', 'https://192.168.1.1/hook'],
    ['link-local (cloud metadata)', 'http://169.254.169.254/latest/meta-data'],
    ['shared 100.64/10', 'https://100.64.0.1/hook'],
    ['unspecified v4', 'https://0.0.0.0/hook'],
    ['loopback v6', 'https://[::1]/hook'],
    ['unique-local v6', 'https://[fd12:3456::1]/hook'],
    ['link-local v6', 'https://[fe80::1]/hook'],
    ['unspecified v6', 'https://[::]/hook'],
    ['IPv4-mapped private v6', 'https://[::ffff:10.0.0.1]/hook'],
    ['a private address in hex', 'https://0x0a000001/hook'],
  ])('refuses a URL naming a %s address with 422', async (_name, url) => {
    const response = await create({ url, events: ['*'] });
    expectError(response, 422, 'VALIDATION_FAILED');
    expect(response.body.error.details.problems[0]).toMatchObject({ path: ['url'] });
    expect(response.body.error.details.problems[0].message).toMatch(/must not name a .* address/);
  });

  it('accepts a loopback address inside WEBHOOK_ALLOWED_NETWORKS', async () => {
    expect((await create({ url: 'http://127.0.0.1:9/hook', events: ['*'] })).status).toBe(201);
  });

  it.each([
    ['a user and password', 'https://user:pw@hooks.example.com/in', /user name or password/],
    ['a fragment', 'https://hooks.example.com/in#part', /fragment/],
    ['another scheme', 'ftp://hooks.example.com/in', /http/],
    ['a relative URL', '/in', /absolute URL/],
  ])('refuses %s with 422', async (_name, url, message) => {
    const response = await create({ url, events: ['*'] });
    expectError(response, 422, 'VALIDATION_FAILED');
    expect(response.body.error.details.problems[0].message).toMatch(message);
  });

  it('refuses a URL over 2,048 characters with 422 and accepts one of exactly 2,048', async () => {
    const base = 'https://hooks.example.com/';
    expectError(await create({ url: base + 'a'.repeat(2049 - base.length), events: ['*'] }), 422, 'VALIDATION_FAILED');
    expect((await create({ url: base + 'a'.repeat(2048 - base.length), events: ['*'] })).status).toBe(201);
  });
});

describe('https only by default', () => {
  const strict = useServerWithOrg();

  it('refuses http: unless WEBHOOK_ALLOW_HTTP=true, and loopback without an allowed network', async () => {
    const send = (url: string) =>
      strict.server.request('POST', `/v1/orgs/${strict.org.orgId}/webhooks`, {
        token: strict.org.adminKey,
        idempotencyKey: idempotencyKey(),
        body: { url, events: ['*'] },
      });
    const http = await send('http://hooks.example.com/in');
    expectError(http, 422, 'VALIDATION_FAILED');
    expect(http.body.error.details.problems[0].message).toBe(
      'must be an https: URL (WEBHOOK_ALLOW_HTTP=true allows http:)',
    );
    const loopback = await send('https://127.0.0.1/in');
    expect(loopback.body.error.details.problems[0].message).toBe(
      'must not name a loopback address (WEBHOOK_ALLOWED_NETWORKS can allow its network)',
    );
  });
});

describe('reading, changing and deleting', () => {
  it('lists webhooks without secrets and gets one by id', async () => {
    const webhook = await created();
    const list = await suite.server.request('GET', `${hooks()}?limit=100`, { token: suite.org.adminKey });
    expect(list.status).toBe(200);
    expect(list.text).not.toContain('whsec_');
    expect(list.body.data.find((entry: { id: string }) => entry.id === webhook.id)).toEqual({
      ...webhook,
      secret: undefined,
    });
    const one = await suite.server.request('GET', `${hooks()}/${webhook.id}`, { token: suite.org.adminKey });
    expect(one.body).not.toHaveProperty('secret');
    expect(one.body.id).toBe(webhook.id);
  });

  it('changes a webhook at expectedVersion and answers 409 at another', async () => {
    const webhook = await created();
    const path = `${hooks()}/${webhook.id}`;
    const changed = await suite.server.request('PATCH', path, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1', events: ['row.updated'], description: 'CRM' },
    });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body).toMatchObject({ version: '2', events: ['row.updated'], description: 'CRM' });
    const stale = await suite.server.request('PATCH', path, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1', description: 'x' },
    });
    expectError(stale, 409, 'ROW_VERSION_CONFLICT');
  });

  it('pauses and resumes a webhook with PATCH state', async () => {
    const webhook = await created();
    const path = `${hooks()}/${webhook.id}`;
    const paused = await suite.server.request('PATCH', path, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1', state: 'disabled' },
    });
    expect(paused.body).toMatchObject({ state: 'disabled', disabledReason: 'Disabled by an administrator' });
    const resumed = await suite.server.request('PATCH', path, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: paused.body.version, state: 'active' },
    });
    expect(resumed.body).toMatchObject({ state: 'active', disabledAt: null, disabledReason: null });
  });

  it('refuses a private URL on PATCH with 422 and changes nothing', async () => {
    const webhook = await created();
    const path = `${hooks()}/${webhook.id}`;
    const response = await suite.server.request('PATCH', path, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1', url: 'https://192.168.0.1/' },
    });
    expectError(response, 422, 'VALIDATION_FAILED');
    expect((await suite.server.request('GET', path, { token: suite.org.adminKey })).body).toMatchObject({
      version: '1',
      url: webhook.url,
    });
  });

  it('deletes a webhook at expectedVersion; then it is 404', async () => {
    const webhook = await created();
    const path = `${hooks()}/${webhook.id}`;
    const deleted = await suite.server.request('DELETE', path, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1' },
    });
    expect(deleted.status, deleted.text).toBe(200);
    expect(deleted.body.deleted).toBe(true);
    expectError(await suite.server.request('GET', path, { token: suite.org.adminKey }), 404, 'RESOURCE_NOT_FOUND');
  });
});

describe('batches (opt-in: several changes per message)', () => {
  it('keeps batch.maxChanges, and PATCH batch null goes back to one change per message', async () => {
    const webhook = await created({ batch: { maxChanges: 50 } });
    expect(webhook.batch).toEqual({ maxChanges: 50 });
    const path = `${hooks()}/${webhook.id}`;
    const described = await suite.server.request('PATCH', path, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: webhook.version, description: 'batched' },
    });
    expect(described.body).toMatchObject({ batch: { maxChanges: 50 }, description: 'batched', version: '2' });
    const single = await suite.server.request('PATCH', path, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '2', batch: null },
    });
    expect(single.status, single.text).toBe(200);
    expect(single.body).toMatchObject({ batch: null, version: '3' });
    const again = await suite.server.request('PATCH', path, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '3', batch: { maxChanges: 1 } },
    });
    expect(again.body).toMatchObject({ batch: { maxChanges: 1 }, version: '4' });
  });

  it('refuses a maxChanges outside 1..1000, a fraction or another member with 422, and creates nothing', async () => {
    const before = await suite.server.request('GET', `${hooks()}?limit=100`, { token: suite.org.adminKey });
    for (const batch of [
      { maxChanges: 0 },
      { maxChanges: 1001 },
      { maxChanges: 2.5 },
      { maxChanges: 5, maxBytes: 9 },
      {},
    ]) {
      const response = await create({ url: 'https://hooks.example.com/b', events: ['*'], batch });
      expectError(response, 422, 'VALIDATION_FAILED');
      expectProblemPaths(response, [['body', 'batch', ...('maxBytes' in batch ? [] : ['maxChanges'])]]);
    }
    const webhook = await created();
    const patched = await suite.server.request('PATCH', `${hooks()}/${webhook.id}`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { expectedVersion: '1', batch: { maxChanges: -1 } },
    });
    expectError(patched, 422, 'VALIDATION_FAILED');
    const after = await suite.server.request('GET', `${hooks()}?limit=100`, { token: suite.org.adminKey });
    expect(after.body.data.length).toBe(before.body.data.length + 1);
    const unchanged = await suite.server.request('GET', `${hooks()}/${webhook.id}`, { token: suite.org.adminKey });
    expect(unchanged.body).toMatchObject({ batch: null, version: '1' });
  });
});

describe('secrets', () => {
  it('rotates the secret: the new one is in that answer only, the old one signs for 24 hours', async () => {
    const webhook = await created();
    const rotated = await suite.server.request('POST', `${hooks()}/${webhook.id}/rotate-secret`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
    });
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.headers.get('cache-control')).toBe('no-store');
    expect(rotated.body.secret).toMatch(SECRET);
    expect(rotated.body.secret).not.toBe(webhook.secret);
    expect(rotated.body.version).toBe('2');
    const grace = Date.parse(rotated.body.previousSecretExpiresAt) - Date.now();
    expect(grace).toBeGreaterThan(23.9 * 3_600_000);
    expect(grace).toBeLessThanOrEqual(24 * 3_600_000);
  });

  it('keeps secrets out of the activity feed, the stored rows and the idempotency records', async () => {
    const webhook = await created();
    const rotated = await suite.server.request('POST', `${hooks()}/${webhook.id}/rotate-secret`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
    });
    const activity = await suite.server.request(
      'GET',
      `/v1/orgs/${suite.org.orgId}/activity?category=webhooks&limit=100`,
      {
        token: suite.org.adminKey,
      },
    );
    expect(activity.status, activity.text).toBe(200);
    expect(activity.body.data.map((entry: { event: string }) => entry.event)).toEqual(
      expect.arrayContaining(['webhook.create', 'webhook.rotate_secret']),
    );
    const [stored] = await suite.server.prisma.$queryRawUnsafe<{ dump: string }[]>(
      `SELECT (SELECT string_agg(w::text, ' ') FROM webhooks w) || (SELECT string_agg(i::text, ' ') FROM idempotency_records i)
              || (SELECT string_agg(a::text, ' ') FROM activity_events a) AS dump`,
    );
    for (const secret of [webhook.secret, rotated.body.secret]) {
      expect(activity.text).not.toContain(secret);
      expect(stored!.dump).not.toContain(secret);
      expect(stored!.dump).not.toContain(secret.slice(6));
    }
  });
});

describe('authority', () => {
  it.each([
    ['member', () => member],
    ['viewer', () => viewer],
  ])('answers 403 to a %s', async (_role, token) => {
    expectError(await create({ url: 'https://hooks.example.com/in', events: ['*'] }, token()), 403, 'FORBIDDEN');
    expectError(await suite.server.request('GET', hooks(), { token: token() }), 403, 'FORBIDDEN');
  });

  it('answers 404 to another org’s admin, for the org and for a webhook id', async () => {
    const webhook = await created();
    expectError(await suite.server.request('GET', hooks(), { token: other.adminKey }), 404, 'RESOURCE_NOT_FOUND');
    const foreign = `/v1/orgs/${other.orgId}/webhooks/${webhook.id}`;
    expectError(await suite.server.request('GET', foreign, { token: other.adminKey }), 404, 'RESOURCE_NOT_FOUND');
    expectError(
      await suite.server.request('POST', `${foreign}/test`, {
        token: other.adminKey,
        idempotencyKey: idempotencyKey(),
      }),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });

  it(`allows at most ${MAX_WEBHOOKS_PER_ORG} webhooks per org`, async () => {
    const org = await createOrg(suite.server.prisma);
    const send = () =>
      suite.server.request('POST', `/v1/orgs/${org.orgId}/webhooks`, {
        token: org.adminKey,
        idempotencyKey: idempotencyKey(),
        body: { url: 'https://hooks.example.com/in', events: ['*'] },
      });
    const answers = await Promise.all(Array.from({ length: MAX_WEBHOOKS_PER_ORG + 3 }, send));
    expect(answers.filter((answer) => answer.status === 201)).toHaveLength(MAX_WEBHOOKS_PER_ORG);
    for (const refused of answers.filter((answer) => answer.status !== 201))
      expectError(refused, 409, 'CAPACITY_LIMIT');
  });
});

describe('GraphQL', () => {
  it('reads a null member of updateWebhook as "leave it", except databaseId, where null means every database', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const created = await suite.server.request('POST', `/v1/orgs/${suite.org.orgId}/webhooks`, {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { url: 'https://hooks.example.com/n', description: 'kept', events: ['*'], databaseId },
    });
    expect(created.status, created.text).toBe(201);
    const update = await suite.server.graphql(
      `mutation($orgId: ID!, $id: ID!, $key: String!, $input: UpdateWebhookInput!) {
        updateWebhook(orgId: $orgId, id: $id, idempotencyKey: $key, input: $input) { url description databaseId version } }`,
      {
        orgId: suite.org.orgId,
        id: created.body.id,
        key: idempotencyKey(),
        input: { expectedVersion: created.body.version, url: null, description: null, databaseId: null },
      },
      { token: suite.org.adminKey },
    );
    expect(update.body).toEqual({
      data: {
        updateWebhook: { url: 'https://hooks.example.com/n', description: 'kept', databaseId: null, version: '2' },
      },
    });
  });

  it('sets batch on create, leaves it when absent from updateWebhook, and turns it off with null', async () => {
    const fields = 'id version batch { maxChanges }';
    const create = await suite.server.graphql(
      `mutation($orgId: ID!, $key: String!) { createWebhook(orgId: $orgId, idempotencyKey: $key, input: { url: "https://hooks.example.com/bg", events: ["*"], batch: { maxChanges: 20 } }) { ${fields} } }`,
      { orgId: suite.org.orgId, key: idempotencyKey() },
      { token: suite.org.adminKey },
    );
    const webhook = create.body.data.createWebhook;
    expect(webhook).toMatchObject({ version: '1', batch: { maxChanges: 20 } });
    const update = (input: Record<string, unknown>) =>
      suite.server.graphql(
        `mutation($orgId: ID!, $id: ID!, $key: String!, $input: UpdateWebhookInput!) {
          updateWebhook(orgId: $orgId, id: $id, idempotencyKey: $key, input: $input) { ${fields} } }`,
        { orgId: suite.org.orgId, id: webhook.id, key: idempotencyKey(), input },
        { token: suite.org.adminKey },
      );
    expect((await update({ expectedVersion: '1', description: 'x' })).body.data.updateWebhook).toEqual({
      id: webhook.id,
      version: '2',
      batch: { maxChanges: 20 },
    });
    expect((await update({ expectedVersion: '2', batch: null })).body.data.updateWebhook).toEqual({
      id: webhook.id,
      version: '3',
      batch: null,
    });
    const refused = await update({ expectedVersion: '3', batch: { maxChanges: 0 } });
    expect(refused.body.errors[0].extensions.code).toBe('VALIDATION_FAILED');
  });

  it('offers the same fields: create, list, deliveries', async () => {
    const create = await suite.server.graphql(
      `mutation($orgId: ID!, $key: String!) { createWebhook(orgId: $orgId, idempotencyKey: $key, input: { url: "https://hooks.example.com/g", events: ["*"] }) { id secret state } }`,
      { orgId: suite.org.orgId, key: idempotencyKey() },
      { token: suite.org.adminKey },
    );
    expect(create.status, create.text).toBe(200);
    const webhook = create.body.data.createWebhook;
    expect(webhook).toMatchObject({ state: 'active', secret: expect.stringMatching(SECRET) });
    const read = await suite.server.graphql(
      `query($orgId: ID!, $id: ID!) { webhook(orgId: $orgId, id: $id) { id url } webhookDeliveries(orgId: $orgId, id: $id) { data { id } hasMore } }`,
      { orgId: suite.org.orgId, id: webhook.id },
      { token: suite.org.adminKey },
    );
    expect(read.body.data).toEqual({
      webhook: { id: webhook.id, url: 'https://hooks.example.com/g' },
      webhookDeliveries: { data: [], hasMore: false },
    });
  });
});
