import { startWorker } from '../jobs/start-worker.ts';
import { openRuntime } from './runtime.ts';

/**
 * `npm run worker`: the job worker alone, for scaling workers apart from HTTP processes; also the child process that
 * `npm start` runs its worker in (src/bin/worker-process.ts), which stops when its parent is gone.
 */
async function main(): Promise<void> {
  const runtime = await openRuntime();
  const worker = startWorker(runtime.prisma, runtime.config, runtime.logger);
  runtime.logger.info({ pid: process.pid }, 'worker started');
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await worker.stop();
    await runtime.close();
    runtime.logger.info('worker stopped');
    runtime.logger.flush(() => process.exit(0));
  };
  process.once('SIGTERM', () => void stop());
  process.once('SIGINT', () => void stop());
  process.once('disconnect', () => void stop());
}

main().catch((error: unknown) => {
  process.stderr.write(
    `worker failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
