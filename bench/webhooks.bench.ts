import { createBenchTable, VALUES } from './changes-table.ts';
import { startServers } from './harness.ts';
import { benchWebhookRows, webhookBenchEnv } from './webhook-rows.ts';

/**
 * The webhook rows (1) and (2) of bench/changes.bench.ts alone (bench/webhook-rows.ts), with the CPU each process
 * spends per create on each side. BENCH_CREATES (default 3000 per round and side) and BENCH_ROUNDS (default 3).
 */
const CREATES = Number(process.env.BENCH_CREATES ?? 3_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

Object.assign(process.env, webhookBenchEnv);
const servers = await startServers();
try {
  await benchWebhookRows(
    servers,
    { ...(await createBenchTable(servers)), values: VALUES },
    { creates: CREATES, rounds: ROUNDS },
  );
} finally {
  await servers.stop();
}
