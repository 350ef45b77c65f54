import './promise-with-resolvers.ts';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import jwt from 'jsonwebtoken';
import { postgraphile } from 'postgraphile';
import { makePgService } from 'postgraphile/adaptors/pg';
import { grafserv } from 'postgraphile/grafserv/node';
import { PostGraphileAmberPreset } from 'postgraphile/presets/amber';
import { PostGraphileConnectionFilterPreset } from 'postgraphile-plugin-connection-filter';

/**
 * The peer of bench/peers.bench.ts: PostGraphile 5 (amber preset, connection-filter plugin) serving one schema of
 * the bench's database, in its own process as our servers are. Authorization as PostGraphile's JWT guide
 * recommends: the server verifies a bearer JWT on every request (HS256, audience `postgraphile`) and hands
 * PostgreSQL the role and the user claim through `pgSettings` (`SET LOCAL role` and `jwt.claims.user_id` in the
 * request's transaction). The bench grants that role what it reads and writes.
 *
 * Env: PEER_DATABASE_URL, PEER_SCHEMA (the PostgreSQL schema to expose), PEER_JWT_SECRET. Prints `{"port": N}`.
 */
const secret = process.env.PEER_JWT_SECRET!;
const verifyOptions: jwt.VerifyOptions = { algorithms: ['HS256'], audience: 'postgraphile' };

function claimsOf(authorization: string | undefined): jwt.JwtPayload {
  const [scheme, token] = (authorization ?? '').split(' ');
  if (scheme?.toLowerCase() !== 'bearer' || !token) throw new Error('A bearer token is required.');
  const claims = jwt.verify(token, secret, verifyOptions);
  if (typeof claims === 'string') throw new Error('Invalid JWT payload.');
  return claims;
}

const preset: GraphileConfig.Preset = {
  extends: [PostGraphileAmberPreset, PostGraphileConnectionFilterPreset],
  // Amber offers filter and order only on indexed columns; ours filters on any field, so PostGraphile may too.
  disablePlugins: ['PgIndexBehaviorsPlugin'],
  pgServices: [
    makePgService({
      connectionString: process.env.PEER_DATABASE_URL!,
      schemas: [process.env.PEER_SCHEMA!],
      poolConfig: { max: 10 },
    }),
  ],
  grafast: {
    context(requestContext) {
      const claims = claimsOf(requestContext.node?.req.headers.authorization);
      return { pgSettings: { role: String(claims.role), 'jwt.claims.user_id': String(claims.user_id) } };
    },
  },
  grafserv: { graphiql: false, watch: false },
};

const server = createServer();
const serv = postgraphile(preset).createServ(grafserv);
await serv.addTo(server);
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
process.on('SIGTERM', async () => {
  server.close();
  await serv.release();
  process.exit(0);
});
