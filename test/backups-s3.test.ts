import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackupResponse } from '../src/contracts/backups.ts';
import { Page } from '../src/contracts/pages.ts';
import { columnOf, rowsTableOf } from '../src/data/identifiers.ts';
import {
  backupWorkspace,
  constraintCount,
  databasePath,
  databaseVersion,
  finished,
  pictureOf,
  requestPreview,
  requestRestore,
  runBackup,
} from './helpers/backups.ts';
import { createOrg, idempotencyKey } from './helpers/factories.ts';
import { startLocalS3, type LocalS3 } from './helpers/s3.ts';
import { startTestServer } from './helpers/server.ts';
import type { Suite } from './helpers/suite.ts';
import { createTable } from './helpers/workspace.ts';

/**
 * Issue 16 over the S3 destination: the service's own @aws-sdk/client-s3 + lib-storage code against s3rver, an
 * S3-compatible server started in this process. Same checks as test/backups.test.ts, objects instead of files.
 */
const PREFIX = 'wds/backups';
const suite = {} as Suite;
let s3: LocalS3;
beforeAll(async () => {
  s3 = await startLocalS3();
  suite.server = await startTestServer({
    BACKUP_S3_BUCKET: s3.bucket,
    BACKUP_S3_ENDPOINT: s3.endpoint,
    BACKUP_S3_REGION: 'us-east-1',
    BACKUP_S3_PREFIX: `${PREFIX}/`,
  });
  suite.org = await createOrg(suite.server.prisma);
});
afterAll(async () => {
  await suite.server?.close();
  await s3?.close();
});
const admin = () => suite.org.adminKey;
const server = () => suite.server;
const orgId = () => suite.org.orgId;

async function keysUnder(prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for (let token: string | undefined; ; ) {
    const page = await s3.client.send(
      new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix, ContinuationToken: token }),
    );
    keys.push(...(page.Contents ?? []).map((object) => object.Key!));
    if (!page.IsTruncated) return keys.sort();
    token = page.NextContinuationToken;
  }
}

async function objectBytes(key: string): Promise<Buffer> {
  const object = await s3.client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: key }));
  return Buffer.from(await object.Body!.transformToByteArray());
}

describe('the S3 destination', () => {
  it('passes the destination test: writes, reads back and deletes a probe', async () => {
    const job = await finished(
      server(),
      admin(),
      await server().request('POST', `/v1/orgs/${orgId()}/backup-destination/test`, {
        token: admin(),
        idempotencyKey: idempotencyKey(),
      }),
    );
    expect(job.state, JSON.stringify(job)).toBe('succeeded');
    expect(job.result).toEqual({ destination: 's3', probeBytes: 65536, wrote: true, readBack: true, deleted: true });
    expect(await keysUnder(`${PREFIX}/probes/`)).toEqual([]);
  });

  it('backs up into the bucket, previews, and restores to a copy equal to the original', async () => {
    const { databaseId } = await backupWorkspace(suite);
    const before = await pictureOf(server(), databaseId);
    const backup = await runBackup(server(), admin(), orgId(), databaseId);
    expect(backup.state, JSON.stringify(backup)).toBe('succeeded');
    const list = await server().request('GET', `${databasePath(orgId(), databaseId)}/backups`, { token: admin() });
    expect(list.status, list.text).toBe(200);
    expect(Page(BackupResponse).parse(list.body).data).toEqual([
      expect.objectContaining({ id: backup.jobId, destination: 's3', tables: 2, rows: 3 }),
    ]);

    const root = `${PREFIX}/${orgId()}/${databaseId}/${backup.jobId}/`;
    const keys = await keysUnder(root);
    const manifest = JSON.parse((await objectBytes(`${root}manifest.json`)).toString('utf8'));
    expect(manifest).toMatchObject({ format: 'wds-backup', formatVersion: 1, backupId: backup.jobId, databaseId });
    expect(manifest.files).toHaveLength(5);
    expect(keys).toEqual(
      [...manifest.files.map((file: { path: string }) => `${root}${file.path}`), `${root}manifest.json`].sort(),
    );

    const preview = await finished(
      server(),
      admin(),
      await requestPreview(server(), admin(), orgId(), databaseId, backup.jobId),
    );
    expect(preview.state, JSON.stringify(preview)).toBe('succeeded');
    expect(preview.result).toMatchObject({
      backupId: backup.jobId,
      verified: true,
      tablesAdded: [],
      tablesAltered: [],
      tablesRemoved: [],
    });

    const copy = await finished(
      server(),
      admin(),
      await requestRestore(server(), admin(), orgId(), databaseId, backup.jobId, {
        target: 'new-database',
        name: `S3 copy ${databaseId}`,
      }),
    );
    expect(copy.state, JSON.stringify(copy)).toBe('succeeded');
    expect(await pictureOf(server(), copy.result.databaseId)).toEqual(before);
    expect(await constraintCount(server(), copy.result.databaseId)).toBe(2);
  });

  it('refuses a corrupted object with ARTIFACT_UNVERIFIED before anything changes', async () => {
    const { databaseId, customers } = await backupWorkspace(suite);
    const backup = await runBackup(server(), admin(), orgId(), databaseId);
    expect(backup.state, JSON.stringify(backup)).toBe('succeeded');
    const key = `${PREFIX}/${orgId()}/${databaseId}/${backup.jobId}/tables/${customers.tableId}/rows.copy.gz`;
    const bytes = await objectBytes(key);
    bytes[Math.floor(bytes.length / 2)]! ^= 0xff;
    await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: key, Body: bytes }));
    const before = await pictureOf(server(), databaseId);
    const version = await databaseVersion(server(), admin(), orgId(), databaseId);
    const databases = await server().prisma.database.count();

    const preview = await finished(
      server(),
      admin(),
      await requestPreview(server(), admin(), orgId(), databaseId, backup.jobId),
    );
    expect(preview.state).toBe('failed');
    expect(preview.error.code).toBe('ARTIFACT_UNVERIFIED');
    for (const body of [{ target: 'replace', expectedVersion: version }, { target: 'new-database' }]) {
      const restore = await finished(
        server(),
        admin(),
        await requestRestore(server(), admin(), orgId(), databaseId, backup.jobId, body),
      );
      expect(restore.state).toBe('failed');
      expect(restore.error.code).toBe('ARTIFACT_UNVERIFIED');
    }
    expect(await pictureOf(server(), databaseId)).toEqual(before);
    expect(await databaseVersion(server(), admin(), orgId(), databaseId)).toBe(version);
    expect(await server().prisma.database.count()).toBe(databases);
  });

  it('stores a table larger than one upload part as a multipart upload, and restores it', async () => {
    // lib-storage sends a body under 5 MiB as one PutObject; a larger one goes as a multipart upload. Rows of
    // hex digests compress only about 2:1, so 120,000 of them make a rows object of several parts.
    const table = await createTable(server(), suite.org, [{ name: 'Name', type: 'text' }]);
    const count = 120_000;
    // The test's own insert of 120,000 rows is not held to the service's 5 s statement budget (it timed out under load).
    await server().prisma.$transaction(
      async (tx) => {
        await tx.$executeRawUnsafe('SET LOCAL statement_timeout = 0');
        await tx.$executeRawUnsafe(
          `INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)} (id, version, created_at, updated_at, ${columnOf(table.fields.Name!)})
         SELECT lpad(n::text, 26, '0'), 1, now(), now(), md5(n::text) || md5((n * 7)::text) || md5((n * 13)::text) || md5((n * 31)::text)
         FROM generate_series(1, ${count}) AS n`,
        );
      },
      { timeout: 300_000, maxWait: 60_000 },
    );
    await server().prisma.dataTable.update({ where: { id: table.tableId }, data: { rowCount: count } });
    const backup = await runBackup(server(), admin(), orgId(), table.databaseId);
    expect(backup.state, JSON.stringify(backup)).toBe('succeeded');
    const root = `${PREFIX}/${orgId()}/${table.databaseId}/${backup.jobId}/`;
    const manifest = JSON.parse((await objectBytes(`${root}manifest.json`)).toString('utf8'));
    const rows = manifest.files.find((file: { path: string }) => file.path === `tables/${table.tableId}/rows.copy.gz`);
    expect(rows.bytes).toBeGreaterThan(5 * 1024 * 1024);
    expect((await objectBytes(`${root}${rows.path}`)).length).toBe(rows.bytes);
    const copy = await finished(
      server(),
      admin(),
      await requestRestore(server(), admin(), orgId(), table.databaseId, backup.jobId, { target: 'new-database' }),
    );
    expect(copy.state, JSON.stringify(copy)).toBe('succeeded');
    expect(await pictureOf(server(), copy.result.databaseId)).toEqual(await pictureOf(server(), table.databaseId));
  }, 120_000);
});
