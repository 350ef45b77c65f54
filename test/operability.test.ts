import { Writable } from 'node:stream';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exported } from './helpers/exports.ts';
import { createOrg, type TestOrg } from './helpers/factories.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { createTable } from './helpers/workspace.ts';

/** What an operator looks for first (issue 25): /metrics, who each access-log line is about, compression, no banner. */
const METRICS_TOKEN = 'metrics-token-for-tests-0123456789';
const lines: string[] = [];
const capture = new Writable({
  write(chunk, _encoding, done) {
    lines.push(...String(chunk).split('\n').filter(Boolean));
    done();
  },
});

let server: TestServer;
let plain: TestServer;
let org: TestOrg;

beforeAll(async () => {
  [server, plain] = await Promise.all([
    startTestServer({ METRICS_TOKEN, LOG_LEVEL: 'info' }, pino({ level: 'info' }, capture)),
    startTestServer({ RUN_WORKER: 'false' }),
  ]);
  org = await createOrg(server.prisma);
});
afterAll(() => Promise.all([server.close(), plain.close()]));

const scrape = (target: TestServer, authorization?: string) =>
  fetch(`${target.url}/metrics`, { headers: authorization ? { authorization } : {} });

/** The value of one sample line `name{labels} value`, or undefined. */
function sample(text: string, name: string, labels: string): number | undefined {
  const line = text
    .split('\n')
    .find(
      (candidate) => candidate.startsWith(`${name}{`) && labels.split(',').every((label) => candidate.includes(label)),
    );
  return line === undefined ? undefined : Number(line.split(' ').at(-1));
}

describe('/metrics', () => {
  it('is 404 when METRICS_TOKEN is unset', async () => {
    const answer = await scrape(plain, `Bearer ${METRICS_TOKEN}`);
    expect(answer.status).toBe(404);
    expect((await answer.json()).error.code).toBe('RESOURCE_NOT_FOUND');
  });

  it('answers 401 with the error envelope and a challenge without the token, or with a wrong one', async () => {
    for (const authorization of [undefined, 'Bearer wrong', `Bearer ${METRICS_TOKEN}x`, `Basic ${METRICS_TOKEN}`]) {
      const answer = await scrape(server, authorization);
      const body = await answer.json();
      expect([answer.status, body.error.code], String(authorization)).toEqual([401, 'UNAUTHENTICATED']);
      expect(body.error.requestId).toBe(answer.headers.get('x-request-id'));
      expect(answer.headers.get('www-authenticate')).toMatch(/^Bearer /);
    }
  });

  it('serves the Prometheus text format: requests by route template and status, durations, pool, jobs by kind, process', async () => {
    await server.request('GET', `/v1/orgs/${org.orgId}`, { token: org.adminKey });
    await server.request('GET', '/v1/orgs/01ARZ3NDEKTSV4RRFFQ69G5FAV', { token: org.adminKey });
    const table = await createTable(server, org, [{ name: 'Name', type: 'text' }]);
    await exported(server, org.adminKey, table, { format: 'csv' });
    const answer = await scrape(server, `Bearer ${METRICS_TOKEN}`);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await answer.text();
    expect(text).toContain('# TYPE http_requests_total counter');
    expect(
      sample(text, 'http_requests_total', 'method="GET",route="/v1/orgs/:orgId",status="200"'),
    ).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'http_requests_total', 'route="/v1/orgs/:orgId",status="404"')).toBeGreaterThanOrEqual(1);
    // No raw ids in labels: one series per template, whatever the URLs.
    expect(text).not.toContain(org.orgId);
    expect(text).toContain('# TYPE http_request_duration_seconds histogram');
    expect(
      sample(text, 'http_request_duration_seconds_count', 'route="/v1/orgs/:orgId",status="200"'),
    ).toBeGreaterThanOrEqual(1);
    for (const state of ['in_use', 'idle', 'waiting'])
      expect(sample(text, 'db_pool_connections', `state="${state}"`), state).toBeGreaterThanOrEqual(0);
    expect(text).toContain('# TYPE jobs gauge');
    expect(text).toContain('process_resident_memory_bytes');
    expect(text).toContain('nodejs_eventloop_lag_seconds');
  });

  it('counts requests refused before routing under the template their path fits; unknown paths stay unmatched', async () => {
    const refused = await server.request('GET', `/v1/orgs/${org.orgId}/databases`);
    expect(refused.status).toBe(401);
    const unknown = await server.request('GET', `/v1/no-such-route/${org.orgId}`, {
      token: org.adminKey,
      outsideContract: true,
    });
    expect(unknown.status).toBe(404);
    const text = await (await scrape(server, `Bearer ${METRICS_TOKEN}`)).text();
    expect(
      sample(text, 'http_requests_total', 'method="GET",route="/v1/orgs/:orgId/databases",status="401"'),
    ).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'http_requests_total', 'method="GET",route="unmatched",status="404"')).toBeGreaterThanOrEqual(
      1,
    );
    expect(text).not.toContain('no-such-route');
  });

  it('reports queued, running and recently failed jobs by kind', async () => {
    const rows = await server.prisma.$queryRawUnsafe<{ id: string }[]>(`SELECT id FROM jobs LIMIT 1`);
    const [job] = rows;
    expect(job).toBeDefined();
    await server.prisma.$executeRawUnsafe(
      `INSERT INTO jobs (id, org_id, kind, state, payload, actor_id, actor_kind, actor_name, finished_at)
       SELECT '01ARZ3NDEKTSV4RRFFQ69G5FB' || c, org_id, 'metricsProbe', s::"JobState", '{}', actor_id, actor_kind, actor_name, now()
         FROM jobs, (VALUES ('0', 'failed'), ('1', 'failed')) AS v(c, s) WHERE id = $1`,
      job!.id,
    );
    const text = await (await scrape(server, `Bearer ${METRICS_TOKEN}`)).text();
    expect(sample(text, 'jobs', 'kind="metricsProbe",state="failed"')).toBe(2);
  });
});

describe('access log', () => {
  it('names the credential and the org of each request', async () => {
    const answer = await server.request('GET', `/v1/orgs/${org.orgId}`, { token: org.adminKey });
    const requestId = answer.headers.get('x-request-id');
    await expect
      .poll(() => lines.some((line) => line.includes(requestId!) && line.includes('"msg":"request"')))
      .toBe(true);
    const entry = JSON.parse(lines.find((line) => line.includes(requestId!) && line.includes('"msg":"request"'))!);
    const key = await server.prisma.apiKey.findFirstOrThrow({ where: { orgId: org.orgId, userId: org.adminUserId } });
    expect(entry).toMatchObject({ requestId, status: 200, credential: `api-key:${key.id}`, orgId: org.orgId });
  });
});

describe('HTTP plumbing', () => {
  it('sends no X-Powered-By, on routes, health checks and errors', async () => {
    for (const path of ['/healthz', `/v1/orgs/${org.orgId}`, '/nowhere']) {
      const answer = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${org.adminKey}` } });
      expect(answer.headers.get('x-powered-by'), path).toBeNull();
    }
  });

  it('compresses JSON and the GraphiQL page with gzip or br, as the client asks', async () => {
    const page = await fetch(`${server.url}/graphql`, { headers: { accept: 'text/html', 'accept-encoding': 'br' } });
    expect(page.headers.get('content-encoding')).toBe('br');
    const openapi = await fetch(`${server.url}/v1/openapi.json`, { headers: { 'accept-encoding': 'gzip' } });
    expect(openapi.headers.get('content-encoding')).toBe('gzip');
    expect(openapi.headers.get('vary')).toMatch(/Accept-Encoding/i);
    // undici's fetch decodes it; the document is still the JSON it was.
    expect((await openapi.json()).openapi).toBe('3.1.0');
    const asset = await fetch(`${server.url}/graphql/assets/graphiql.js`, { headers: { 'accept-encoding': 'gzip' } });
    expect(asset.headers.get('content-encoding')).toBe('gzip');
  });

  it('leaves an artifact download alone: its Content-Digest is the stored bytes’ digest', async () => {
    const table = await createTable(server, org, [{ name: 'Name', type: 'text' }]);
    const job = await exported(server, org.adminKey, table, { format: 'csv' });
    const answer = await fetch(`${server.url}${job.artifacts[0].url}`, {
      headers: { authorization: `Bearer ${org.adminKey}`, 'accept-encoding': 'gzip, br' },
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-encoding')).toBeNull();
    expect(answer.headers.get('content-digest')).toMatch(/^sha-256=/);
  });

  it('sends real brotli bytes, as Content-Encoding says, to a client that does not decode them itself', async () => {
    const { request } = await import('node:http');
    const url = new URL(`${server.url}/v1/openapi.json`);
    const raw = await new Promise<{ encoding: string | undefined; body: Buffer }>((resolve, reject) => {
      request(url, { headers: { 'accept-encoding': 'br' } }, (res) => {
        const chunks: Buffer[] = [];
        res
          .on('data', (chunk: Buffer) => chunks.push(chunk))
          .on('end', () => resolve({ encoding: res.headers['content-encoding'], body: Buffer.concat(chunks) }));
      })
        .on('error', reject)
        .end();
    });
    expect(raw.encoding).toBe('br');
    expect(JSON.parse(brotliDecompressSync(raw.body).toString('utf8')).openapi).toBe('3.1.0');
    expect(() => gunzipSync(raw.body)).toThrow();
  });
});
