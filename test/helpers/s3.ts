import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';

/**
 * An S3-compatible server in this process (s3rver), on an ephemeral port over a temporary directory, with one
 * bucket. s3rver accepts the access key S3RVER / secret S3RVER; the service's AWS SDK reads them from the
 * environment as it would real credentials.
 */
export interface LocalS3 {
  endpoint: string;
  bucket: string;
  client: S3Client;
  close(): Promise<void>;
}

export async function startLocalS3(bucket = 'wds-backups'): Promise<LocalS3> {
  process.env.AWS_ACCESS_KEY_ID = 'S3RVER';
  process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
  const directory = mkdtempSync(join(tmpdir(), 'wds-s3rver-'));
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory,
    configureBuckets: [{ name: bucket }],
  });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new S3Client({
    region: 'us-east-1',
    endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
  });
  return {
    endpoint,
    bucket,
    client,
    close: async () => {
      client.destroy();
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
