/** Prisma's code for a unique constraint violated by a model query (https://www.prisma.io/docs/orm/reference/error-reference). */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'P2002') return true;
  const cause = (error as { meta?: { driverAdapterError?: { cause?: { originalCode?: string } } } } | null)?.meta?.driverAdapterError?.cause;
  return cause?.originalCode === '23505';
}
