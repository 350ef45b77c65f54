import autocannon from 'autocannon';
import { startServers, type Figures } from './harness.ts';

/**
 * GET preferences three ways, same run, 16 connections: the REST facade, the same operation POSTed to /graphql,
 * and the same Prisma read in a bare Express handler. Target: REST ≥ 85% of direct GraphQL req/s.
 */
const CONNECTIONS = 16;
const DURATION_S = Number(process.env.BENCH_SECONDS ?? 10);

async function measure(name: string, options: autocannon.Options): Promise<Figures> {
  await autocannon({ ...options, connections: CONNECTIONS, duration: 2 }); // warm-up: JIT, pools, caches
  const result = await autocannon({ ...options, connections: CONNECTIONS, duration: DURATION_S });
  return {
    name,
    requests: result.requests.total,
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.non2xx,
  };
}

const servers = await startServers();
try {
  const auth = { authorization: `Bearer ${servers.apiKey}` };
  const rest = await measure('REST GET /v1/me/preferences', {
    url: `http://127.0.0.1:${servers.servicePort}/v1/me/preferences`,
    headers: auth,
  });
  const graphql = await measure('POST /graphql myPreferences', {
    url: `http://127.0.0.1:${servers.servicePort}/graphql`,
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({
      query: 'query GetMyPreferences { myPreferences { timezone locale dateFormat timeFormat theme } }',
    }),
  });
  const bare = await measure('bare Express + Prisma read', { url: `http://127.0.0.1:${servers.barePort}/preferences` });

  const rows = [rest, graphql, bare].map(
    (f) =>
      `${f.name.padEnd(32)} ${f.rps.toFixed(0).padStart(7)} req/s   p50 ${f.p50} ms   p99 ${f.p99} ms   errors ${f.errors}`,
  );
  process.stdout.write(`${rows.join('\n')}\n\n`);
  process.stdout.write(`REST / GraphQL : ${((rest.rps / graphql.rps) * 100).toFixed(1)}%  (target ≥ 85%)\n`);
  process.stdout.write(`REST / bare    : ${((rest.rps / bare.rps) * 100).toFixed(1)}%\n`);
  process.stdout.write(`GraphQL / bare : ${((graphql.rps / bare.rps) * 100).toFixed(1)}%\n`);
} finally {
  await servers.stop();
}
