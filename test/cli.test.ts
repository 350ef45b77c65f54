import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './helpers/server.ts';

const run = promisify(execFile);
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

/**
 * The CLI as `npm run -s cli -- …` runs it (`exec node dist/cli.js`, built by test/global-setup.ts). Only the
 * `--help` test goes through npm, which proves the script's wiring: npm itself costs ~0.5 s of CPU per call, and
 * this file makes 22 calls.
 */
async function cli(
  args: string[],
  stdin = '',
  via: 'node' | 'npm' = 'node',
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const [command, prefix] = via === 'npm' ? ['npm', ['run', '-s', 'cli', '--']] : [process.execPath, ['dist/cli.js']];
    const child = run(command, [...prefix, ...args], {
      env: { ...process.env, DATABASE_URL: server.database.url, LOG_LEVEL: 'warn' },
    });
    child.child.stdin?.end(stdin);
    const { stdout, stderr } = await child;
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe('npm run cli', () => {
  it('bootstrap prints one JSON line whose key has full admin authority', async () => {
    const result = await cli(['bootstrap', '--org-name', 'Acme', '--email', 'Ada@Example.com', '--name', 'Ada']);
    expect(result.code).toBe(0);
    const lines = result.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    const created = JSON.parse(lines[0]!);
    expect(Object.keys(created).sort()).toEqual(['apiKey', 'orgId', 'userId']);

    const org = await server.request('GET', `/v1/orgs/${created.orgId}`, { token: created.apiKey });
    expect(org.body.name).toBe('Acme');
    const renamed = await server.request('PATCH', `/v1/orgs/${created.orgId}`, {
      token: created.apiKey,
      idempotencyKey: 'cli-test-rename',
      body: { expectedVersion: org.body.version, name: 'Acme Ltd' },
    });
    expect(renamed.status).toBe(200);
    expect((await server.prisma.user.findUniqueOrThrow({ where: { id: created.userId } })).email).toBe(
      'ada@example.com',
    );

    const added = await cli([
      'add-user',
      '--org',
      created.orgId,
      '--email',
      'bob@example.com',
      '--name',
      'Bob',
      '--role',
      'viewer',
    ]);
    expect(added.code).toBe(0);
    const member = JSON.parse(added.stdout.trim());
    expect(Object.keys(member).sort()).toEqual(['apiKey', 'memberId', 'userId']);
    expect((await server.request('GET', `/v1/orgs/${created.orgId}`, { token: member.apiKey })).status).toBe(200);
    const refused = await server.request('PATCH', `/v1/orgs/${created.orgId}`, {
      token: member.apiKey,
      idempotencyKey: 'cli-test-viewer',
      body: { expectedVersion: renamed.body.version, name: 'No' },
    });
    expect(refused.status).toBe(403);

    const duplicate = await cli([
      'add-user',
      '--org',
      created.orgId,
      '--email',
      'bob@example.com',
      '--name',
      'Bob',
      '--role',
      'viewer',
    ]);
    expect(duplicate.code).not.toBe(0);
    expect(duplicate.stderr).toMatch(/already a member/);
  }, 120_000); // three CLI processes that connect: each one is a second of CPU, several on a loaded machine

  it.each([
    [['bootstrap', '--org-name', 'Acme', '--email', 'not-an-email', '--name', 'Ada'], /--email/],
    [['bootstrap', '--org-name', 'Acme'], /--email/],
    [['add-user', '--org', 'nope', '--email', 'a@example.com', '--name', 'A', '--role', 'admin'], /--org/],
    [
      ['add-user', '--org', '01J00000000000000000000000', '--email', 'a@example.com', '--name', 'A', '--role', 'owner'],
      /--role/,
    ],
    [['frobnicate'], /Unknown command/],
    [['bootstrap', '--unknown-flag', 'x'], /unknown/i],
  ])('fails clearly with a non-zero exit for %j', async (args, message) => {
    const result = await cli(args);
    expect(result.code).not.toBe(0);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(message);
  });

  it('add-user into an org that does not exist fails clearly', async () => {
    const result = await cli([
      'add-user',
      '--org',
      '01J00000000000000000000000',
      '--email',
      'a@example.com',
      '--name',
      'A',
      '--role',
      'admin',
    ]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/No organisation/);
  });

  it('set-password reads the password from stdin; the user can then sign in', async () => {
    const created = JSON.parse(
      (await cli(['bootstrap', '--org-name', 'Pw', '--email', 'pw@example.com', '--name', 'Pat'])).stdout.trim(),
    );
    const result = await cli(['set-password', '--email', 'PW@example.com'], 'a password from stdin\n');
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout.trim())).toEqual({ userId: created.userId });
    const login = await server.request('POST', '/v1/auth/login', {
      body: { email: 'pw@example.com', password: 'a password from stdin' },
    });
    expect(login.status).toBe(201);
    const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
    expect((await server.request('GET', '/v1/me/sessions', { headers: { cookie } })).status).toBe(200);
    // A new password ends the user's sessions.
    expect((await cli(['set-password', '--email', 'pw@example.com'], 'another password here\n')).code).toBe(0);
    expect((await server.request('GET', '/v1/me/sessions', { headers: { cookie } })).status).toBe(401);
    const short = await cli(['set-password', '--email', 'pw@example.com'], 'short\n');
    expect(short.code).toBe(2);
    expect(short.stderr).toMatch(/10 to 256/);
    const unknown = await cli(['set-password', '--email', 'nobody@example.com'], 'a password from stdin\n');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/No user/);
  }, 120_000); // five CLI processes: each one is a second of CPU, several on a loaded machine

  it('register-oauth-client prints the client id (and a secret once for confidential clients); bad redirect URIs fail', async () => {
    const publicClient = await cli([
      'register-oauth-client',
      '--name',
      'CLI app',
      '--redirect-uri',
      'http://127.0.0.1:8765/cb',
    ]);
    expect(publicClient.code, publicClient.stderr).toBe(0);
    const { clientId } = JSON.parse(publicClient.stdout.trim());
    expect(await server.prisma.oAuthClient.findUniqueOrThrow({ where: { id: clientId } })).toMatchObject({
      name: 'CLI app',
      redirectUris: ['http://127.0.0.1:8765/cb'],
      secretHash: null,
    });
    const confidential = await cli([
      'register-oauth-client',
      '--name',
      'Server',
      '--redirect-uri',
      'https://a.example/cb',
      '--redirect-uri',
      'https://b.example/cb',
      '--confidential',
    ]);
    const created = JSON.parse(confidential.stdout.trim());
    expect(Object.keys(created).sort()).toEqual(['clientId', 'clientSecret']);
    const stored = await server.prisma.oAuthClient.findUniqueOrThrow({ where: { id: created.clientId } });
    expect(stored.redirectUris).toEqual(['https://a.example/cb', 'https://b.example/cb']);
    expect(JSON.stringify(stored)).not.toContain(created.clientSecret);
    const bad = await cli(['register-oauth-client', '--name', 'Bad', '--redirect-uri', 'http://evil.example/cb']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/https/);
  }, 120_000); // three CLI processes that connect

  it('--help (or -h, or help) prints the usage on stdout and exits 0 without touching the database', async () => {
    for (const args of [['--help'], ['-h'], ['help'], ['bootstrap', '--help']]) {
      const result = await cli(args, '', 'npm');
      expect(result.code, args.join(' ')).toBe(0);
      expect(result.stdout, args.join(' ')).toMatch(/^Usage:\n {2}npm run -s cli -- bootstrap /);
      expect(result.stdout).toContain('register-oauth-client');
      expect(result.stderr).toBe('');
    }
  }, 60_000); // four npm runs: at load 30 they took 30 s
});
