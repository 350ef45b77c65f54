import { createHash } from 'node:crypto';
import http from 'node:http';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { columnOf, rowsTableOf } from '../src/data/identifiers.ts';
import { GRAPHQL_CONTENT_LIMIT } from '../src/graph/jobs/artifacts.ts';
import { expectError } from './helpers/expectations.ts';
import { download, exported } from './helpers/exports.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createRow, createTable, type TestTable } from './helpers/workspace.ts';

/**
 * Streamed artifact downloads (issue 15 follow-up): a multi-chunk export is served piece by piece, each piece
 * checked before it is sent; GraphQL returns the content of small artifacts only.
 */
const suite = useServerWithOrg();
const admin = () => suite.org.adminKey;

const ARTIFACT_QUERY = `query ($orgId: ID!, $jobId: ID!, $name: String!) {
  jobArtifact(orgId: $orgId, jobId: $jobId, name: $name) { jobId name size sha256 chunks encoding content }
}`;
const METADATA_QUERY = `query ($orgId: ID!, $jobId: ID!, $name: String!) {
  jobArtifact(orgId: $orgId, jobId: $jobId, name: $name) { jobId name size sha256 chunks encoding }
}`;

/** A table whose CSV export is about 9.4 MB: three 4 MiB chunks, beyond GraphQL's content limit. */
async function largeTable(): Promise<TestTable> {
  const table = await createTable(suite.server, suite.org, [{ name: 'Body', type: 'longText' }]);
  const client = new pg.Client({ connectionString: suite.server.database.url });
  await client.connect();
  await client.query(`INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)} (id, version, created_at, updated_at, ${columnOf(table.fields.Body!)})
    SELECT '0' || lpad(g::text, 25, '0'), 1, now(), now(), repeat(chr(65 + g % 26), 4000) FROM generate_series(1, 2350) AS g`);
  await client.end();
  return table;
}

interface RawDownload {
  status: number;
  headers: http.IncomingHttpHeaders;
  received: number;
  complete: boolean;
  body: string;
}

/** A download read with node:http, which reports a body cut short instead of throwing. */
function rawDownload(path: string, token: string): Promise<RawDownload> {
  return new Promise((resolve, reject) => {
    const request = http.get(
      `${suite.server.url}${path}`,
      { headers: { authorization: `Bearer ${token}` } },
      (response) => {
        const parts: Buffer[] = [];
        response.on('data', (part: Buffer) => parts.push(part));
        response.on('close', () => {
          const bytes = Buffer.concat(parts);
          resolve({
            status: response.statusCode!,
            headers: response.headers,
            received: bytes.length,
            complete: response.complete,
            body: bytes.toString('utf8'),
          });
        });
      },
    );
    request.on('error', reject);
  });
}

async function chunkOf(jobId: string, seq: number): Promise<Buffer> {
  const [chunk] = await suite.server.prisma.$queryRaw<{ data: Uint8Array }[]>`
    SELECT data FROM public.job_artifact_chunks WHERE job_id = ${jobId}::bpchar AND seq = ${seq}`;
  return Buffer.from(chunk!.data);
}

async function setChunk(jobId: string, seq: number, data: Buffer): Promise<void> {
  expect(
    await suite.server.prisma
      .$executeRaw`UPDATE public.job_artifact_chunks SET data = ${data} WHERE job_id = ${jobId}::bpchar AND seq = ${seq}`,
  ).toBe(1);
}

function flipped(data: Buffer): Buffer {
  const copy = Buffer.from(data);
  copy[100] = copy[100]! ^ 1;
  return copy;
}

describe('GET …/jobs/{jobId}/artifacts/{name} of a multi-chunk export', () => {
  it('streams every chunk with Content-Length and Content-Digest; GraphQL answers its metadata but not its content', async () => {
    const table = await largeTable();
    const job = await exported(suite.server, admin(), table, { format: 'csv', fileName: 'large.csv' });
    const [artifact] = job.artifacts;
    const chunks = await suite.server.prisma.jobArtifactChunk.findMany({
      where: { jobId: job.jobId },
      select: { seq: true, sha256: true },
      orderBy: { seq: 'asc' },
    });
    expect(chunks.map((chunk) => chunk.seq)).toEqual([0, 1, 2]);
    for (const chunk of chunks)
      expect(chunk.sha256).toBe(
        createHash('sha256')
          .update(await chunkOf(job.jobId, chunk.seq))
          .digest('hex'),
      );
    expect(artifact.size).toBeGreaterThan(GRAPHQL_CONTENT_LIMIT);

    const file = await download(suite.server, admin(), job);
    expect(file.status).toBe(200);
    expect(file.headers.get('content-length')).toBe(String(artifact.size));
    const digest = createHash('sha256').update(file.bytes).digest();
    expect(digest.toString('hex')).toBe(artifact.sha256);
    expect(file.headers.get('content-digest')).toBe(`sha-256=:${digest.toString('base64')}:`);
    const lines = file.text.split('\n');
    expect(lines).toHaveLength(2352);
    expect([lines[0], lines[1], lines[2350], lines[2351]]).toEqual(['Body', 'B'.repeat(4000), 'K'.repeat(4000), '']);

    const head = await fetch(`${suite.server.url}${artifact.url}`, {
      method: 'HEAD',
      headers: { authorization: `Bearer ${admin()}` },
    });
    expect([
      head.status,
      head.headers.get('content-length'),
      head.headers.get('content-digest'),
      (await head.arrayBuffer()).byteLength,
    ]).toEqual([200, String(artifact.size), file.headers.get('content-digest'), 0]);

    const variables = { orgId: table.orgId, jobId: job.jobId, name: 'large.csv' };
    const metadata = await suite.server.graphql(METADATA_QUERY, variables, { token: admin() });
    expect(metadata.body).toEqual({
      data: {
        jobArtifact: {
          jobId: job.jobId,
          name: 'large.csv',
          size: artifact.size,
          sha256: artifact.sha256,
          chunks: 3,
          encoding: 'utf8',
        },
      },
    });
    const content = await suite.server.graphql(ARTIFACT_QUERY, variables, { token: admin() });
    expect(content.body.data).toBeNull();
    expect(content.body.errors[0]).toMatchObject({
      path: ['jobArtifact', 'content'],
      extensions: {
        code: 'PAYLOAD_TOO_LARGE',
        details: { size: artifact.size, limit: GRAPHQL_CONTENT_LIMIT, url: artifact.url },
      },
    });
  });

  it('checks each chunk before sending it: 409 before any byte, or a connection cut short of Content-Length', async () => {
    const table = await largeTable();
    const job = await exported(suite.server, admin(), table, { format: 'csv', fileName: 'checked.csv' });
    const [artifact] = job.artifacts;
    const [first, second] = [await chunkOf(job.jobId, 0), await chunkOf(job.jobId, 1)];

    await setChunk(job.jobId, 0, flipped(first));
    expectError(await suite.server.request('GET', artifact.url, { token: admin() }), 409, 'ARTIFACT_UNVERIFIED');
    await setChunk(job.jobId, 0, first);

    await setChunk(job.jobId, 1, flipped(second));
    const cut = await rawDownload(artifact.url, admin());
    expect(cut).toMatchObject({ status: 200, complete: false });
    expect(cut.headers['content-length']).toBe(String(artifact.size));
    expect(cut.received).toBeLessThanOrEqual(first.length);
    expect(first.subarray(0, cut.received).toString('utf8')).toBe(cut.body);
    await setChunk(job.jobId, 1, second);

    // Every chunk matches its own digest, but the file is not the one recorded: the last chunk is withheld.
    await suite.server.prisma.jobArtifact.updateMany({ where: { jobId: job.jobId }, data: { sha256: '0'.repeat(64) } });
    const wrongFile = await rawDownload(artifact.url, admin());
    expect(wrongFile).toMatchObject({ status: 200, complete: false });
    expect(wrongFile.received).toBeLessThan(artifact.size);
    await suite.server.prisma.jobArtifact.updateMany({
      where: { jobId: job.jobId },
      data: { sha256: artifact.sha256 },
    });

    await suite.server.prisma.jobArtifactChunk.deleteMany({ where: { jobId: job.jobId, seq: 2 } });
    expectError(await suite.server.request('GET', artifact.url, { token: admin() }), 409, 'ARTIFACT_UNVERIFIED');
  });
});

describe('Query.jobArtifact content', () => {
  it('returns a small artifact’s verified content, the same bytes the REST download streams', async () => {
    const table = await createTable(suite.server, suite.org, [{ name: 'Name', type: 'text' }]);
    expect((await createRow(suite.server, admin(), table, { [table.fields.Name!]: 'Zoë' })).status).toBe(201);
    for (const format of ['csv', 'xlsx'] as const) {
      const job = await exported(suite.server, admin(), table, { format });
      const file = await download(suite.server, admin(), job);
      const answer = await suite.server.graphql(
        ARTIFACT_QUERY,
        { orgId: table.orgId, jobId: job.jobId, name: job.artifacts[0].name },
        { token: admin() },
      );
      expect(answer.body.errors, answer.text).toBeUndefined();
      const { encoding, content, chunks } = answer.body.data.jobArtifact;
      expect({ encoding, chunks }).toEqual({ encoding: format === 'csv' ? 'utf8' : 'base64', chunks: 1 });
      expect(Buffer.from(content, encoding)).toEqual(file.bytes);
    }
  });
});
