import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Config } from '../../../kernel/config.ts';
import { s3Destination } from './s3.ts';

/**
 * Where backup objects are kept: a local directory (BACKUP_DIR) or an S3-compatible bucket. Keys are paths
 * relative to the destination's root, made of ids and fixed names only.
 */
export interface BackupDestination {
  kind: 'local' | 's3';
  /** Stores an object; it becomes visible only when complete, so a killed writer leaves no half object behind. */
  write(key: string, source: Readable): Promise<void>;
  /** The object's bytes, or null when it does not exist. */
  read(key: string): Promise<Readable | null>;
  /** Removes every object under a prefix (a whole backup); nothing to remove is not an error. */
  removePrefix(prefix: string): Promise<void>;
}

export function backupDirOf(config: Config): string {
  return resolve(config.BACKUP_DIR ?? join(config.DATA_DIR, 'backups'));
}

/** The configured destination; `signal` (a job's JobRun.signal) ends its outbound calls when it aborts. */
export function destinationOf(config: Config, signal?: AbortSignal): BackupDestination {
  return config.BACKUP_S3_BUCKET ? s3Destination(config, signal) : localDestination(backupDirOf(config));
}

export function localDestination(root: string): BackupDestination {
  const pathOf = (key: string) => {
    const path = resolve(root, key);
    if (!path.startsWith(root + sep)) throw new Error(`Refusing a backup key outside ${root}: ${key}`);
    return path;
  };
  return {
    kind: 'local',
    async write(key, source) {
      const path = pathOf(key);
      await mkdir(dirname(path), { recursive: true });
      const partial = `${path}.partial`;
      await pipeline(source, createWriteStream(partial));
      await rename(partial, path);
    },
    async read(key) {
      const path = pathOf(key);
      const exists = await stat(path).then(
        (info) => info.isFile(),
        () => false,
      );
      return exists ? createReadStream(path) : null;
    },
    async removePrefix(prefix) {
      const path = pathOf(prefix);
      await rm(path, { recursive: true, force: true });
      // Leave no empty org/database directories behind; a directory still in use is simply not empty.
      for (let parent = dirname(path); parent.startsWith(root + sep); parent = dirname(parent)) {
        const entries = await readdir(parent).catch(() => null);
        if (entries === null || entries.length > 0) break;
        await rm(parent, { recursive: true, force: true });
      }
    },
  };
}
