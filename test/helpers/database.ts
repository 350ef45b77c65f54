import { inject } from 'vitest';
import { newId } from '../../src/kernel/ids.ts';
import { cloneOnNodes, dropOnNodes } from './citus.ts';

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

/** A fresh, migrated database for one test file, cloned from the run's template on each node (≈ 100 ms a node). */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `wds_test_${newId().toLowerCase()}`;
  const nodes = inject('databaseNodes');
  await cloneOnNodes(nodes, inject('templateDatabase'), name);
  const url = new URL(inject('serverUrl'));
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: () => dropOnNodes(nodes, name),
  };
}
