/**
 * The "Items" table of the PostGraphile comparison (bench/peers.bench.ts) and of the create breakdown
 * (bench/create-breakdown.ts), which replays the peers bench's create: one definition, so the two measure the same
 * write. Short column names (`Qty`) because PostGraphile serves the same physical table under them.
 */
export const FIELDS = [
  { name: 'Name', type: 'text', required: true },
  { name: 'Qty', type: 'integer' },
  { name: 'Price', type: 'number' },
  { name: 'Active', type: 'boolean' },
  { name: 'Due', type: 'date' },
  { name: 'Status', type: 'select', options: { choices: ['open', 'closed'] } },
];

/** One created row's values. */
export const VALUES = { Name: 'Widget', Qty: 3, Price: 19.99, Active: true, Due: '2026-12-01', Status: 'open' };
