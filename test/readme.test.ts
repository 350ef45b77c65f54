import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './helpers/server.ts';

/**
 * The README's quick start, run as written (issue 17: its example Idempotency-Key was too short to work). Its shell
 * blocks are one bash script; only the service's address changes. `curl` is wrapped so that each call also writes
 * its status to a file, which must match the `# → <status>` comments of the README, in order.
 */
const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const README_ADDRESS = 'http://localhost:8080';

function quickStart(): string {
  const start = README.indexOf('\n## Quick start\n');
  expect(start, 'README.md has a "## Quick start" section').toBeGreaterThan(0);
  const end = README.indexOf('\n## ', start + 1);
  const section = README.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!).join('\n');
}

let server: TestServer;
let scratch: string;

beforeAll(async () => {
  server = await startTestServer();
  scratch = mkdtempSync(join(tmpdir(), 'wds-readme-'));
});
afterAll(async () => {
  await server.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('README quick start', () => {
  it('runs as written: every command succeeds and every curl answers the status its comment names', async () => {
    const script = quickStart();
    expect(script).toContain(README_ADDRESS);
    const expected = [...script.matchAll(/^# → (\d{3})\b/gm)].map((match) => Number(match[1]));
    expect(expected.length, 'every curl is followed by its "# → <status>" comment').toBe(
      script.match(/\bcurl /g)!.length,
    );
    const statuses = join(scratch, 'statuses');
    const wrapped = [
      'set -euo pipefail',
      `curl() { command curl --write-out '%{stderr}%{http_code}\\n' "$@" 2>>${JSON.stringify(statuses)}; }`,
      script.replaceAll(README_ADDRESS, server.url),
    ].join('\n');
    const run = await promisify(execFile)('bash', ['-c', wrapped], {
      cwd: new URL('..', import.meta.url).pathname,
      env: { ...process.env, DATABASE_URL: server.database.url, LOG_LEVEL: 'silent' },
      maxBuffer: 1 << 20,
    }).then(
      ({ stdout }) => ({ ok: true, output: stdout }),
      (error: { stdout?: string; stderr?: string }) => ({ ok: false, output: `${error.stdout}\n${error.stderr}` }),
    );
    expect(run.ok, run.output).toBe(true);
    const seen = readFileSync(statuses, 'utf8')
      .split('\n')
      .filter((line) => /^\d{3}$/.test(line))
      .map(Number);
    expect(seen, run.output).toEqual(expected);
  }, 300_000); // the quick start and seven jobs; on a loaded 2-core machine this took 2-3 minutes
});
