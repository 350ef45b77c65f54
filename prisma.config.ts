import { defineConfig } from 'prisma/config';

// No datasource URL here on purpose: `prisma generate` must work on a machine without a database, and
// migrations are applied by src/db/migrate.ts (Prisma's schema engine cannot be downloaded offline).
export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
});
