import { describe, expect, it } from 'vitest';
import { sweepExpiredArtifacts } from '../src/jobs/engine/artifact-sweep.ts';
import { sweepEmailVerifications } from '../src/jobs/engine/email-verification-sweep.ts';
import { sweepIdempotencyRecords } from '../src/jobs/engine/idempotency-sweep.ts';
import { newId } from '../src/kernel/ids.ts';
import { expectError } from './helpers/expectations.ts';
import { preview } from './helpers/jobs.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createTable } from './helpers/workspace.ts';

describe('the worker’s catalog sweeps', () => {
  // No worker beside this server: its own sweeps (one at start) would race the ones these tests run and count.
  const suite = useServerWithOrg({ RUN_WORKER: 'false' });

  it('removes expired idempotency records in batches and keeps live ones', async () => {
    const { prisma } = suite.server;
    const expired = Array.from({ length: 5 }, (_, index) => ({
      actorKey: 'user:sweep',
      key: `expired-${index}`,
      slot: BigInt(index),
      operation: 'op',
      fingerprint: 'a'.repeat(64),
      outcome: {},
      expiresAt: new Date(Date.now() - 1_000),
    }));
    await prisma.idempotencyRecord.createMany({
      data: [...expired, { ...expired[0]!, key: 'live', expiresAt: new Date(Date.now() + 60_000) }],
    });
    expect(await sweepIdempotencyRecords(prisma, 2)).toBe(5);
    expect(
      await prisma.idempotencyRecord.findMany({ where: { actorKey: 'user:sweep' }, select: { key: true } }),
    ).toEqual([{ key: 'live' }]);
  });

  it('removes spent and expired email verification tokens and keeps the live one', async () => {
    const { prisma } = suite.server;
    const { adminUserId: userId } = suite.org;
    const later = new Date(Date.now() + 60_000);
    const token = (name: string, expiresAt: Date, usedAt: Date | null) => ({
      id: newId(),
      userId,
      email: `${name}@example.com`,
      tokenHash: name.padEnd(64, '0'),
      expiresAt,
      usedAt,
    });
    await prisma.emailVerification.createMany({
      data: [
        token('spent', later, new Date()),
        token('expired', new Date(Date.now() - 1_000), null),
        token('live', later, null),
      ],
    });
    expect(await sweepEmailVerifications(prisma, 1)).toBe(2);
    expect(await prisma.emailVerification.findMany({ where: { userId }, select: { email: true } })).toEqual([
      { email: 'live@example.com' },
    ]);
  });
});

describe('the artifact sweep', () => {
  // The preview job needs the worker.
  const suite = useServerWithOrg();

  it('frees the content of expired artifacts, which then answer 410 ARTIFACT_EXPIRED', async () => {
    const { server, org } = suite;
    const table = await createTable(server, org, [{ name: 'Count', type: 'integer' }]);
    const job = await preview(server, org.adminKey, table, {
      content: 'Count\nnot a number\n',
      mapping: [{ source: 'Count', fieldId: table.fields.Count! }],
    });
    const url = job.artifacts[0].url;
    expect((await server.request('GET', url, { token: org.adminKey })).status).toBe(200);
    await server.prisma.jobArtifact.updateMany({
      where: { jobId: job.jobId },
      data: { expiresAt: new Date(Date.now() - 1_000) },
    });
    expect(await sweepExpiredArtifacts(server.prisma)).toBe(2); // the report and the upload
    const freed = await server.prisma.jobArtifact.findMany({ where: { jobId: job.jobId } });
    expect(freed.map((artifact) => artifact.content.length)).toEqual([0, 0]);
    expectError(await server.request('GET', url, { token: org.adminKey }), 410, 'ARTIFACT_EXPIRED');
    expect(await sweepExpiredArtifacts(server.prisma)).toBe(0);
  });
});
