import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { checkedFetch } from './helpers/contract.ts';

const run = promisify(execFile);
const DATA_DIR = '.data/e2e-npm-start';

/** The environment of a newcomer's shell: no database configured at all. */
function bareEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  delete env.DATABASE_URL;
  delete env.TEST_DATABASE_URL;
  delete env.NODE_ENV;
  return env;
}

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

async function waitForReady(url: string, child: ChildProcess, output: () => string): Promise<void> {
  // Ready, or exited (which fails at once rather than at the deadline).
  const exited = await vi.waitFor(
    async () => {
      if (child.exitCode !== null) return true;
      if (
        await checkedFetch(`${url}/readyz`).then(
          (response) => response.ok,
          () => false,
        )
      )
        return false;
      throw new Error(`npm start was not ready within 90 s:\n${output()}`);
    },
    { timeout: 90_000, interval: 250 },
  );
  if (exited) throw new Error(`npm start exited early (${child.exitCode}):\n${output()}`);
}

let child: ChildProcess | undefined;
afterAll(() => {
  if (child?.pid && child.exitCode === null) process.kill(-child.pid, 'SIGKILL');
});

describe('npm start with no DATABASE_URL', () => {
  it('runs on an embedded PostgreSQL under ./.data, serves the CLI’s users, and stops cleanly on SIGTERM', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    // Its own process group, so that SIGTERM reaches the service as it would from a process manager.
    child = spawn('npm', ['start'], {
      env: bareEnv({ PORT: String(port), DATA_DIR, LOG_LEVEL: 'info' }),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let output = '';
    child.stdout!.on('data', (chunk) => (output += chunk));
    child.stderr!.on('data', (chunk) => (output += chunk));
    await waitForReady(url, child, () => output);

    // The CLI finds the running embedded server (same data dir) instead of starting a second one.
    const { stdout } = await run(
      'npm',
      [
        'run',
        '-s',
        'cli',
        '--',
        'bootstrap',
        '--org-name',
        'E2E',
        '--email',
        `e2e-${port}@example.com`,
        '--name',
        'E2E',
      ],
      {
        env: bareEnv({ DATA_DIR }),
      },
    );
    const { apiKey } = JSON.parse(stdout.trim());
    const preferences = await checkedFetch(`${url}/v1/me/preferences`, {
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(preferences.status).toBe(200);
    expect(await preferences.json()).toMatchObject({ timezone: 'UTC' });

    const logLine = output.split('\n').find((line) => line.includes('"msg":"request"'));
    expect(JSON.parse(logLine!)).toMatchObject({ requestId: expect.any(String), status: 200, level: 30 });

    // SIGTERM to the service process itself, as a process manager sends it; npm exits with it.
    const servicePid = JSON.parse(output.split('\n').find((line) => line.includes('"msg":"listening"'))!).pid;
    const [[code]] = await Promise.all([once(child, 'close'), process.kill(servicePid, 'SIGTERM')]);
    expect(code, output).toBe(0);
    expect(output).toContain('"msg":"stopped"');
    await expect(checkedFetch(`${url}/healthz`)).rejects.toThrow();
  }, 180_000);
});
