import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { createApp } from '../http/app.ts';
import { answerClientErrors } from '../http/client-errors.ts';
import { limitConnections } from '../http/connection-limits.ts';
import { keepConnectionsAlive, type KeptAlive } from '../http/keep-alive.ts';
import { openRuntime, type Runtime } from './runtime.ts';
import { superviseWorker, type WorkerProcess } from './worker-process.ts';

async function listen(server: Server, port: number, host: string): Promise<void> {
  server.listen(port, host);
  await Promise.race([once(server, 'listening'), once(server, 'error').then(([error]) => Promise.reject(error))]);
}

/**
 * SIGTERM/SIGINT: stop accepting and stop claiming jobs at once, end open event streams with a last event telling
 * clients to reconnect, let in-flight requests finish (up to the grace period), then close the pool.
 */
function shutdownOnSignal(
  server: Server,
  connections: KeptAlive,
  shutdown: AbortController,
  runtime: Runtime,
  worker: WorkerProcess | null,
): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    runtime.logger.info({ signal }, 'shutting down');
    const workerStopped = worker?.stop();
    const closed = new Promise((resolve) => server.close(resolve));
    connections.drain();
    shutdown.abort();
    const grace = setTimeout(() => server.closeAllConnections(), runtime.config.SHUTDOWN_GRACE_MS);
    await closed;
    clearTimeout(grace);
    await workerStopped;
    await runtime.close();
    runtime.logger.info('stopped');
    runtime.logger.flush(() => process.exit(0));
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, (s) => void stop(s));
}

async function main(): Promise<void> {
  const runtime = await openRuntime();
  const { config, logger, prisma, redis } = runtime;
  const shutdown = new AbortController();
  const server = createServer(
    createApp({ prisma, config, logger, shutdown: shutdown.signal, ...(redis ? { redis } : {}) }),
  );
  answerClientErrors(server);
  limitConnections(server, config, logger);
  const connections = keepConnectionsAlive(server, config.KEEP_ALIVE_TIMEOUT_MS);
  await listen(server, config.PORT, config.HOST);
  const worker = config.RUN_WORKER ? superviseWorker(runtime) : null;
  shutdownOnSignal(server, connections, shutdown, runtime, worker);
  const address = server.address();
  logger.info(
    {
      port: typeof address === 'object' && address ? address.port : config.PORT,
      pid: process.pid,
      worker: Boolean(worker),
    },
    'listening',
  );
}

main().catch((error: unknown) => {
  // The logger may not exist yet (bad configuration), so the reason goes to stderr as plain text.
  process.stderr.write(
    `workspace-data-service failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
