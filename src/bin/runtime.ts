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

/** The log message of the start-up warning below; tests look for it. */
export const UNSEALED_SECRETS_WARNING =
  'WEBHOOK_SECRET_KEY is not set: webhook signing secrets are sealed with a key kept in the same database';

/**
 * Settings a production deployment should not run without, logged at start where the operator reads the service's
 * log (issue 46). Without WEBHOOK_SECRET_KEY a copy of the database holds both the sealed secrets and their key
 * (docs/decisions/webhooks.md, "Secrets"). The CLI (logs on stderr) stays quiet: its runs are not deployments.
 */
function warnOfUnsafeSettings(config: Config, logger: Logger): void {
  if (process.env.NODE_ENV === 'production' && !config.WEBHOOK_SECRET_KEY) {
    logger.warn({ setting: 'WEBHOOK_SECRET_KEY' }, UNSEALED_SECRETS_WARNING);
  }
}

/** Config, logger, a migrated database and a Prisma client: what the server, the worker and the CLI share. */
export async function openRuntime(
  overrides: Partial<Record<keyof Config, string>> = {},
  logTo: 'stdout' | 'stderr' = 'stdout',
): Promise<Runtime> {
  const config = loadConfig(process.env, overrides);
  const logger = createLogger(config.LOG_LEVEL, logTo === 'stdout' ? 1 : 2);
  if (logTo === 'stdout') warnOfUnsafeSettings(config, logger);
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
