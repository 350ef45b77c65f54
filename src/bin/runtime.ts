import { loadConfig, type Config } from '../kernel/config.ts';
import { openDatabase, type Database } from '../db/database.ts';
import { migrate } from '../db/migrate.ts';
import { createPrisma, type PrismaClient } from '../db/prisma.ts';
import { connectRedis } from '../db/redis.ts';
import type { Redis } from 'ioredis';
import { createLogger, type Logger } from '../kernel/log.ts';

export interface Runtime {
  config: Config;
  logger: Logger;
  database: Database;
  prisma: PrismaClient;
  /** With REDIS_URL: where the HTTP limits are shared between processes. */
  redis?: Redis;
  close(): Promise<void>;
}

/** Config, logger, a migrated database and a Prisma client: what the server, the worker and the CLI share. */
export async function openRuntime(
  overrides: Partial<Record<keyof Config, string>> = {},
  logTo: 'stdout' | 'stderr' = 'stdout',
): Promise<Runtime> {
  const config = loadConfig(process.env, overrides);
  const logger = createLogger(config.LOG_LEVEL, logTo === 'stdout' ? 1 : 2);
  const database = await openDatabase(config, logger);
  try {
    const applied = await migrate(database.url);
    if (applied.length > 0) logger.info({ applied }, 'migrations applied');
  } catch (error) {
    await database.close();
    throw error;
  }
  const prisma = createPrisma(database.url, config.DATABASE_POOL_SIZE, config.QUERY_TIMEOUT_MS, logger);
  const redis = config.REDIS_URL ? connectRedis(config.REDIS_URL, logger) : undefined;
  return {
    config,
    logger,
    database,
    prisma,
    ...(redis ? { redis } : {}),
    close: async () => {
      await redis?.quit().catch(() => redis.disconnect());
      await prisma.$disconnect();
      await database.close();
    },
  };
}
