import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { z } from 'zod';
import { DomainError } from '../../../kernel/errors.ts';
import { TestBackupDestinationResult } from './results.ts';
import type { JobHandler } from '../../engine/handler.ts';
import { succeededEvent } from '../../engine/handler.ts';
import { destinationOf } from './destination.ts';

/**
 * testBackupDestination: writes a probe object of random bytes to the configured destination, reads it back,
 * compares the digests and deletes it. An unreachable or misconfigured destination fails the job with
 * DEPENDENCY_UNAVAILABLE and the destination's own message (never credentials: the SDK's errors carry none).
 */
export const TestDestinationPayload = z.strictObject({});
const PROBE_BYTES = 64 * 1024;

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export const testBackupDestination: JobHandler<
  z.infer<typeof TestDestinationPayload>,
  Record<string, never>,
  TestBackupDestinationResult
> = {
  kind: 'testBackupDestination',
  payload: TestDestinationPayload,
  result: TestBackupDestinationResult,
  successEvent: () => succeededEvent('testBackupDestination'),
  describe: () => 'Backup destination test',
  async run(run) {
    const destination = destinationOf(run.config, run.signal);
    const prefix = `probes/${run.job.id}`;
    const probe = randomBytes(PROBE_BYTES);
    try {
      await destination.write(`${prefix}/probe`, Readable.from([probe]));
      const stream = await destination.read(`${prefix}/probe`);
      const back = stream ? await readAll(stream) : null;
      if (!back || sha256(back) !== sha256(probe)) {
        throw new DomainError(
          'ARTIFACT_UNVERIFIED',
          'The probe read back from the backup destination differs from what was written.',
          {
            details: { destination: destination.kind, bytesWritten: probe.length, bytesRead: back?.length ?? null },
          },
        );
      }
      await destination.removePrefix(prefix);
      if (await destination.read(`${prefix}/probe`)) {
        throw new DomainError('DEPENDENCY_UNAVAILABLE', 'The backup destination kept the probe after it was deleted.', {
          details: { destination: destination.kind },
        });
      }
    } catch (error) {
      if (error instanceof DomainError) throw error;
      throw new DomainError(
        'DEPENDENCY_UNAVAILABLE',
        `The backup destination failed: ${(error as Error).message}`.slice(0, 500),
        {
          details: { destination: destination.kind },
        },
      );
    }
    return {
      state: 'succeeded',
      summary: 'Backup destination test',
      result: { destination: destination.kind, probeBytes: probe.length, wrote: true, readBack: true, deleted: true },
    };
  },
};
