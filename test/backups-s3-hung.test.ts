import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, idempotencyKey, type TestOrg } from './helpers/factories.ts';
import { waitForJob } from './helpers/jobs.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';

/**
 * Issue 26 §8: an S3 endpoint that accepts connections and never answers. Every request to it times out after
 * BACKUP_S3_TIMEOUT_MS (300 ms here), so a destination test fails with DEPENDENCY_UNAVAILABLE instead of holding a
 * worker slot for minutes.
 */
let hung: Server;
const sockets: Socket[] = [];
let server: TestServer;
let org: TestOrg;

beforeAll(async () => {
  process.env.AWS_ACCESS_KEY_ID = 'HUNG';
  process.env.AWS_SECRET_ACCESS_KEY = 'HUNG';
  hung = createServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => undefined);
  });
  hung.listen(0, '127.0.0.1');
  await once(hung, 'listening');
  const endpoint = `http://127.0.0.1:${(hung.address() as AddressInfo).port}`;
  server = await startTestServer({
    BACKUP_S3_BUCKET: 'never',
    BACKUP_S3_ENDPOINT: endpoint,
    BACKUP_S3_TIMEOUT_MS: '300',
  });
  org = await createOrg(server.prisma);
});

afterAll(async () => {
  await server?.close();
  for (const socket of sockets) socket.destroy();
  hung?.close();
});

describe('a destination that never answers', () => {
  it('fails the destination test with DEPENDENCY_UNAVAILABLE once its requests time out', async () => {
    const accepted = await server.request('POST', `/v1/orgs/${org.orgId}/backup-destination/test`, {
      token: org.adminKey,
      idempotencyKey: idempotencyKey(),
    });
    expect(accepted.status, accepted.text).toBe(202);
    const job = await waitForJob(server, org.adminKey, accepted.body.statusUrl, undefined, 60_000);
    expect(job).toMatchObject({
      state: 'failed',
      error: { code: 'DEPENDENCY_UNAVAILABLE', details: { destination: 's3' } },
    });
    expect(sockets.length).toBeGreaterThan(0);
  }, 90_000);
});
