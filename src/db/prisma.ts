import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from '../generated/prisma/client.ts';

export type { PrismaClient };
export type TransactionClient = Parameters<Parameters<PrismaClient['$transaction']>[0]>[0];

export function createPrisma(connectionString: string, poolSize = 10): PrismaClient {
  return new PrismaClient({ adapter: new PrismaPg({ connectionString, max: poolSize }) });
}
