import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import autocannon from 'autocannon';
const child = spawn(process.execPath, ['--cpu-prof', '--cpu-prof-dir=/tmp/prof', '--import', 'tsx', 'bench/servers.ts'], { stdio: ['ignore', 'pipe', 'inherit'], env: process.env });
const line = await new Promise<string>((resolve) => createInterface({ input: child.stdout! }).once('line', resolve));
const s = JSON.parse(line);
const api = async (path: string, body: unknown) => (await fetch(`http://127.0.0.1:${s.servicePort}${path}`, { method: 'POST', headers: { authorization: `Bearer ${s.apiKey}`, 'content-type': 'application/json', 'idempotency-key': randomUUID() }, body: JSON.stringify(body) })).json() as any;
const db = await api(`/v1/orgs/${s.orgId}/databases`, { name: `P ${Date.now()}` });
const t = await api(`/v1/orgs/${s.orgId}/databases/${db.id}/tables`, { name: 'T', fields: [{ name: 'Name', type: 'text', required: true }, { name: 'Quantity', type: 'integer' }, { name: 'Price', type: 'number' }, { name: 'Active', type: 'boolean' }, { name: 'Due', type: 'date' }, { name: 'Status', type: 'select', options: { choices: ['open', 'closed'] } }] });
const run = (amount: number) => autocannon({ url: `http://127.0.0.1:${s.servicePort}/v1/orgs/${s.orgId}/databases/${db.id}/tables/${t.id}/rows`, connections: 16, amount, method: 'POST',
  headers: { authorization: `Bearer ${s.apiKey}`, 'content-type': 'application/json' },
  body: JSON.stringify({ expectedSchemaVersion: 1, values: { Name: 'Widget', Quantity: 3, Price: 19.99, Active: true, Due: '2026-12-01', Status: 'open' } }),
  requests: [{ setupRequest: (r: any) => ({ ...r, headers: { ...r.headers, 'idempotency-key': randomUUID() } }) }] });
await run(500);
const started = performance.now();
const r = await run(4000);
console.log('rps', 4000 / ((performance.now() - started) / 1000), 'non2xx', r.non2xx);
child.kill('SIGTERM');
