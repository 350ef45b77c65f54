// `prisma generate` (run on install) never executes the schema engine, but Prisma 7's CLI downloads it first,
// and its servers are unreachable on our machines. Pointing PRISMA_SCHEMA_ENGINE_BINARY at an existing file
// skips that download. Migrations are applied by src/db/migrate.ts, not by the engine.
import { spawnSync } from 'node:child_process';

const env = {
  ...process.env,
  PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? process.execPath,
};
const result = spawnSync('prisma', ['generate'], { stdio: 'inherit', env, shell: process.platform === 'win32' });
process.exit(result.status ?? 1);
