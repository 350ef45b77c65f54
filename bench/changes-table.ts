import { api, type Servers } from './harness.ts';

/** The table the change-feed benches write: one of its own database, six fields of the common kinds. */
export const FIELDS = [
  { name: 'Name', type: 'text', required: true },
  { name: 'Quantity', type: 'integer' },
  { name: 'Price', type: 'number' },
  { name: 'Active', type: 'boolean' },
  { name: 'Due', type: 'date' },
  { name: 'Status', type: 'select', options: { choices: ['open', 'closed'] } },
];
export const VALUES = { Name: 'Widget', Quantity: 3, Price: 19.99, Active: true, Due: '2026-12-01', Status: 'open' };

export interface BenchTable {
  databaseId: string;
  tableId: string;
  path: string;
  schemaVersion: number;
}

export async function createBenchTable(servers: Servers): Promise<BenchTable> {
  const { orgId } = servers;
  const database = await api(servers, 'POST', `/v1/orgs/${orgId}/databases`, { name: `Changes bench ${Date.now()}` });
  const table = await api(servers, 'POST', `/v1/orgs/${orgId}/databases/${database.id}/tables`, {
    name: 'Orders',
    fields: FIELDS,
  });
  return {
    databaseId: database.id,
    tableId: table.id,
    schemaVersion: table.schemaVersion,
    path: `/v1/orgs/${orgId}/databases/${database.id}/tables/${table.id}`,
  };
}
