import { afterAll, beforeAll } from 'vitest';
import type { Config } from '../../src/kernel/config.ts';
import { createOrg, type TestOrg } from './factories.ts';
import { startTestServer, type TestServer } from './server.ts';

export interface Suite {
  server: TestServer;
  org: TestOrg;
}

/** For one test file: the service on its own fresh database, and an org whose admin holds a full-access key. */
export function useServerWithOrg(overrides: Partial<Record<keyof Config, string>> = {}): Suite {
  const suite = {} as Suite;
  beforeAll(async () => {
    suite.server = await startTestServer(overrides);
    suite.org = await createOrg(suite.server.prisma);
  });
  afterAll(() => suite.server.close());
  return suite;
}
