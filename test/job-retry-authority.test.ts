import { describe, expect, it } from 'vitest';
import { newId } from '../src/kernel/ids.ts';
import { expectError } from './helpers/expectations.ts';
import { addMember, idempotencyKey } from './helpers/factories.ts';
import { controlJob } from './helpers/jobs.ts';
import { oauthTokens } from './helpers/oauth.ts';
import { signIn, withPassword } from './helpers/sessions.ts';
import { useServerWithOrg } from './helpers/suite.ts';

/**
 * Issue 26 §1: a retry is a new start. It passes the capability, OAuth scope and step-up checks of starting a job
 * of its kind, with the caller's role as it is now. The jobs are written as failed rows (no worker runs here): the
 * checks come before anything the job does, and a failed row is what any of them leaves behind.
 */
const suite = useServerWithOrg({ RUN_WORKER: 'false' });
const orgId = () => suite.org.orgId;

async function failedJob(kind: string, userId: string): Promise<string> {
  const id = newId();
  await suite.server.prisma.job.create({
    data: {
      id,
      orgId: orgId(),
      kind,
      state: 'failed',
      payload: {},
      actorId: userId,
      actorKind: 'user',
      actorKey: null,
      actorName: 'Creator',
      error: { code: 'INTERNAL_ERROR', message: 'failed for the test' },
      finishedAt: new Date(),
    },
  });
  return id;
}

const setRole = (userId: string, role: 'admin' | 'member' | 'viewer') =>
  suite.server.prisma.member.updateMany({ where: { orgId: orgId(), userId }, data: { role } });

async function personalKey(token: string, access: 'read' | 'write', includeAdmin: boolean): Promise<string> {
  const created = await suite.server.request('POST', '/v1/me/keys', {
    token,
    idempotencyKey: idempotencyKey(),
    body: { orgId: orgId(), name: 'Narrow key', access, includeAdmin },
  });
  expect(created.status, created.text).toBe(201);
  return created.body.secret;
}

describe('POST …/jobs/{jobId}/retry passes the checks of starting its kind', () => {
  it('a demoted admin cannot retry their own restore: 403 FORBIDDEN naming admin; an admin still can', async () => {
    const former = await addMember(suite.server.prisma, orgId(), 'admin');
    const restore = await failedJob('restoreDatabaseBackup', former.userId);
    await setRole(former.userId, 'member');
    const refused = await controlJob(suite.server, former.apiKey, orgId(), restore, 'retry');
    expectError(refused, 403, 'FORBIDDEN');
    expect(refused.body.error.details).toEqual({ requiredCapability: 'admin' });
    const job = await suite.server.prisma.job.findUniqueOrThrow({ where: { id: restore } });
    expect(job.state).toBe('failed');
    const byAdmin = await controlJob(suite.server, suite.org.adminKey, orgId(), restore, 'retry');
    expect(byAdmin.status, byAdmin.text).toBe(200);
    expect(byAdmin.body).toMatchObject({ jobId: restore, kind: 'restoreDatabaseBackup', state: 'queued' });
  });

  it('the creator’s own key without includeAdmin cannot retry a restore preview, a schedule save or a destination test', async () => {
    const narrow = await personalKey(suite.org.adminKey, 'write', false);
    for (const kind of [
      'previewDatabaseRestore',
      'saveBackupSchedule',
      'testBackupDestination',
      'restoreDatabaseBackup',
    ]) {
      const job = await failedJob(kind, suite.org.adminUserId);
      const refused = await controlJob(suite.server, narrow, orgId(), job, 'retry');
      expectError(refused, 403, 'FORBIDDEN');
      expect(refused.body.error.details).toEqual({ requiredCapability: 'admin' });
    }
  });

  it('the creator’s read-only key cannot retry their import or schema change, but may retry their export', async () => {
    const readOnly = await personalKey(suite.org.adminKey, 'read', true);
    for (const [kind, capability] of [
      ['importRows', 'write'],
      ['applySchemaChange', 'manage'],
      ['runDatabaseBackup', 'write'],
    ] as const) {
      const refused = await controlJob(
        suite.server,
        readOnly,
        orgId(),
        await failedJob(kind, suite.org.adminUserId),
        'retry',
      );
      expectError(refused, 403, 'FORBIDDEN');
      expect(refused.body.error.details).toEqual({ requiredCapability: capability });
    }
    const exportJob = await failedJob('exportRows', suite.org.adminUserId);
    expect((await controlJob(suite.server, readOnly, orgId(), exportJob, 'retry')).body).toMatchObject({
      state: 'queued',
    });
  });

  it('an OAuth token holding only jobs:retry is refused 403 INSUFFICIENT_SCOPE naming the start’s scope', async () => {
    const email = await withPassword(suite.server, suite.org.adminUserId);
    const session = await signIn(suite.server, email);
    const retryOnly = await oauthTokens(suite.server, session, 'jobs:retry');
    const expectations = [
      ['restoreDatabaseBackup', 'backups:manage'],
      ['runDatabaseBackup', 'backups:manage'],
      ['importRows', 'rows:write'],
      ['createUniqueRule', 'schema:manage'],
      ['exportDatabase', 'exports:read'],
    ] as const;
    for (const [kind, scope] of expectations) {
      const job = await failedJob(kind, suite.org.adminUserId);
      const refused = await controlJob(suite.server, retryOnly.access_token, orgId(), job, 'retry');
      expectError(refused, 403, 'INSUFFICIENT_SCOPE');
      expect(refused.body.error.details).toEqual({ requiredScope: scope });
    }
    const both = await oauthTokens(suite.server, session, 'jobs:retry backups:manage');
    const restore = await failedJob('restoreDatabaseBackup', suite.org.adminUserId);
    expect((await controlJob(suite.server, both.access_token, orgId(), restore, 'retry')).body).toMatchObject({
      state: 'queued',
    });
  });

  it('a member may retry their own backup run (write) but not once demoted to viewer', async () => {
    const member = await addMember(suite.server.prisma, orgId(), 'member');
    const first = await failedJob('runDatabaseBackup', member.userId);
    expect((await controlJob(suite.server, member.apiKey, orgId(), first, 'retry')).body).toMatchObject({
      state: 'queued',
    });
    const second = await failedJob('runDatabaseBackup', member.userId);
    await setRole(member.userId, 'viewer');
    const refused = await controlJob(suite.server, member.apiKey, orgId(), second, 'retry');
    expectError(refused, 403, 'FORBIDDEN');
    expect(refused.body.error.details).toEqual({ requiredCapability: 'write' });
  });
});
