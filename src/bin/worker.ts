import { startWorker } from '../jobs/start-worker.ts';
import { openRuntime } from './runtime.ts';

/** `npm run worker`: the job worker alone, for scaling workers apart from HTTP processes. */
async function main(): Promise<void> {
  const runtime = await openRuntime();
  const worker = startWorker(runtime.prisma, runtime.config, runtime.logger);
  runtime.logger.info('worker started');
  const stop = async () => {
    await worker.stop();
    await runtime.close();
    runtime.logger.info('worker stopped');
    runtime.logger.flush(() => process.exit(0));
  };
  process.once('SIGTERM', () => void stop());
  process.once('SIGINT', () => void stop());
}

main().catch((error: unknown) => {
  process.stderr.write(
    `worker failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
