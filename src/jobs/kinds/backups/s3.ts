import { DeleteObjectsCommand, GetObjectCommand, ListObjectsV2Command, NoSuchKey, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { HttpHandlerOptions } from '@smithy/types';
import type { Readable } from 'node:stream';
import type { Config } from '../../../kernel/config.ts';
import type { BackupDestination } from './destination.ts';

/**
 * Every request of the client honours the job's signal, also those sent by lib-storage, which sends its parts and its
 * single PUT without it (`Upload.abort()` only rejects `done()`): on abort the handler destroys the request and with
 * it the socket, which otherwise lingered until the request timeout.
 */
class SignalledHandler extends NodeHttpHandler {
  constructor(
    private readonly signal: AbortSignal | undefined,
    options: ConstructorParameters<typeof NodeHttpHandler>[0],
  ) {
    super(options);
  }

  override handle(request: Parameters<NodeHttpHandler['handle']>[0], options: HttpHandlerOptions = {}) {
    if (!this.signal) return super.handle(request, options);
    // The SDK passes a signal of its own with every request; either one aborts it.
    const own = options.abortSignal as AbortSignal | undefined;
    return super.handle(request, { ...options, abortSignal: own ? AbortSignal.any([own, this.signal]) : this.signal });
  }
}

/**
 * An S3-compatible bucket (AWS, MinIO, Ceph, R2…) through the official AWS SDK. Credentials come from the SDK's
 * own chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, profiles, instance roles), never from this service's
 * configuration. Uploads are multipart from the stream (lib-storage), so memory stays bounded by its part size;
 * S3 shows an object only when its upload completes, which gives the "no half object" rule for free.
 */
export function s3Destination(config: Config, signal?: AbortSignal): BackupDestination {
  const client = new S3Client({
    region: config.BACKUP_S3_REGION,
    // The SDK waits forever by default: an endpoint that accepts and never answers held both worker slots for
    // minutes (issue 26 §8). A request that has not connected, or not been answered, in time fails instead.
    requestHandler: new SignalledHandler(signal, {
      connectionTimeout: config.BACKUP_S3_TIMEOUT_MS,
      requestTimeout: config.BACKUP_S3_TIMEOUT_MS,
      throwOnRequestTimeout: true,
    }),
    ...(config.BACKUP_S3_ENDPOINT ? { endpoint: config.BACKUP_S3_ENDPOINT, forcePathStyle: true } : {}),
  });
  const bucket = config.BACKUP_S3_BUCKET!;
  const prefix = config.BACKUP_S3_PREFIX.replace(/\/+$/, '');
  const keyOf = (key: string) => (prefix ? `${prefix}/${key}` : key);
  // The job's cancel (or lost lease, or the worker stopping) ends the job's wait at once, not a timeout later.
  const options = signal ? { abortSignal: signal } : {};
  return {
    kind: 's3',
    async write(key, source) {
      signal?.throwIfAborted();
      const upload = new Upload({ client, params: { Bucket: bucket, Key: keyOf(key), Body: source }, queueSize: 2 });
      const abort = () => void upload.abort();
      signal?.addEventListener('abort', abort, { once: true });
      try {
        await upload.done();
      } finally {
        signal?.removeEventListener('abort', abort);
      }
    },
    async read(key) {
      try {
        const object = await client.send(new GetObjectCommand({ Bucket: bucket, Key: keyOf(key) }), options);
        return object.Body as Readable;
      } catch (error) {
        if (error instanceof NoSuchKey || (error as { name?: string }).name === 'NoSuchKey') return null;
        throw error;
      }
    },
    async removePrefix(path) {
      for (let token: string | undefined; ; ) {
        const page = await client.send(
          new ListObjectsV2Command({ Bucket: bucket, Prefix: `${keyOf(path)}/`, ContinuationToken: token }),
          options,
        );
        const keys = (page.Contents ?? []).map((object) => ({ Key: object.Key! }));
        if (keys.length > 0)
          await client.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys } }), options);
        if (!page.IsTruncated) return;
        token = page.NextContinuationToken;
      }
    },
  };
}
