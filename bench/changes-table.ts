import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
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

/**
 * Creates/s of `amount` row creates into the table over `connections` connections, each with its own
 * Idempotency-Key, timed to the last answer: autocannon reports its end on its once-a-second tick, which quantised
 * a rate of ~400/s to 3000/7, 3000/8, … (±7 %).
 */
export async function createRows(
  servers: Servers,
  table: { path: string; schemaVersion: number },
  values: Record<string, unknown>,
  amount: number,
  connections: number,
): Promise<number> {
  const started = performance.now();
  let lastResponse = started;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: `http://127.0.0.1:${servers.servicePort}${table.path}/rows`,
        connections,
        amount,
        method: 'POST',
        headers: { authorization: `Bearer ${servers.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ expectedSchemaVersion: table.schemaVersion, values }),
        requests: [
          {
            setupRequest: (request) => ({
              ...request,
              headers: { ...request.headers, 'idempotency-key': randomUUID() },
            }),
          },
        ],
      },
      (error, finished) => (error ? reject(error) : resolve(finished)),
    );
    instance.on('response', () => {
      lastResponse = performance.now();
    });
  });
  if (result.errors + result.non2xx > 0)
    throw new Error(`row creates failed: ${result.errors} errors, ${result.non2xx} non-2xx`);
  return amount / ((lastResponse - started) / 1000);
}
