import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { Runtime } from './runtime.ts';

/**
 * What `npm run worker` runs: src/bin/worker.ts beside src/bin/main.ts under tsx; in a build, the launcher
 * dist/worker.js (NODE_ENV, source maps) above dist/bin/main.js.
 */
const WORKER_ENTRY = new URL(import.meta.url.endsWith('.ts') ? './worker.ts' : '../worker.js', import.meta.url);

/** Waits before starting a worker again after it ended on its own, longer after each quick end (crash loop). */
const RESTART_DELAYS_MS = [1_000, 2_000, 5_000, 10_000, 30_000];
/** A worker that ran this long before ending was not crash-looping: its next restart waits the first delay again. */
const STABLE_AFTER_MS = 60_000;

export interface WorkerProcess {
  /** SIGTERM to the worker (it stops claiming at once and puts running jobs back), then waits for it to exit. */
  stop(): Promise<void>;
}

/**
 * `npm start`'s job worker, as a child process (docs/decisions/processes.md): a job's CPU work (an XLSX export's
 * serialisation, an import preview's parsing) then runs on another event loop and another core than the requests,
 * and a worker that crashes or runs out of memory takes no request with it. The child is `npm run worker` itself,
 * given this process's database (the embedded one when DATABASE_URL is unset); it is started again when it ends on
 * its own, and it stops itself when this process is gone (the IPC channel closes).
 */
export function superviseWorker(runtime: Runtime): WorkerProcess {
  const { config, logger } = runtime;
  let child: ChildProcess | null = null;
  let exited: Promise<unknown> = Promise.resolve();
  let stopping = false;
  let failures = 0;
  let restart: NodeJS.Timeout | undefined;

  const start = () => {
    const startedAt = Date.now();
    const current = fork(WORKER_ENTRY, [], {
      env: { ...process.env, DATABASE_URL: runtime.database.url },
      execArgv: process.execArgv,
      stdio: 'inherit',
    });
    child = current;
    exited = once(current, 'exit');
    current.once('exit', (code, signal) => {
      child = null;
      if (stopping) return;
      if (Date.now() - startedAt >= STABLE_AFTER_MS) failures = 0;
      const delay = RESTART_DELAYS_MS[Math.min(failures, RESTART_DELAYS_MS.length - 1)]!;
      failures += 1;
      logger.error({ code, signal, restartInMs: delay }, 'worker process ended; starting it again');
      restart = setTimeout(start, delay);
    });
  };
  start();

  return {
    stop: async () => {
      stopping = true;
      clearTimeout(restart);
      const current = child;
      if (!current) return;
      current.kill('SIGTERM');
      const kill = setTimeout(() => current.kill('SIGKILL'), config.SHUTDOWN_GRACE_MS);
      await exited;
      clearTimeout(kill);
    },
  };
}
