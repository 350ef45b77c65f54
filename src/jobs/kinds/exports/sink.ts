import { createHash } from 'node:crypto';
import { Writable } from 'node:stream';

/**
 * The end of every export pipeline: hashes the bytes as they pass and hands them on in chunks of CHUNK_BYTES, each
 * stored by `store` (a checkpointed job step). One chunk is stored while the next one fills (the COPY keeps
 * streaming instead of waiting for each commit); backpressure holds the producer when both are busy, so memory
 * stays at about two chunks whatever the size of the export.
 */
export const CHUNK_BYTES = 4 * 1024 * 1024;

export class ChunkSink extends Writable {
  private readonly hash = createHash('sha256');
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private storing: Promise<void> = Promise.resolve();
  size = 0;
  chunks = 0;

  constructor(
    private readonly store: (seq: number, data: Buffer) => Promise<void>,
    private readonly chunkBytes = CHUNK_BYTES,
  ) {
    super();
  }

  get sha256(): string {
    return this.hash.copy().digest('hex');
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.hash.update(chunk);
    this.size += chunk.length;
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    if (this.pendingBytes < this.chunkBytes) callback();
    else this.flush().then(() => callback(), callback);
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.flush()
      .then(() => this.storing)
      .then(() => callback(), callback);
  }

  /** Resolves once no chunk is being stored (whatever its outcome): nothing is written after a failed export stops. */
  settled(): Promise<void> {
    return this.storing.catch(() => undefined);
  }

  private async flush(): Promise<void> {
    if (this.pendingBytes === 0) return;
    const data = Buffer.concat(this.pending, this.pendingBytes);
    this.pending = [];
    this.pendingBytes = 0;
    const seq = this.chunks;
    this.chunks += 1;
    await this.storing;
    this.storing = this.store(seq, data);
    // A failure surfaces at the next flush or at the end (awaited there), not as an unhandled rejection.
    this.storing.catch(() => undefined);
  }
}
