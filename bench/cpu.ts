import { readFileSync } from 'node:fs';
import pg from 'pg';

/**
 * CPU time spent by each side of a measurement, so a ratio can be read against the machine's capacity: on a
 * 2-core VM both sides of a throughput comparison are CPU-bound, and then REST / raw can be no better than the
 * CPU one raw request costs over the CPU one REST request costs (every process involved, PostgreSQL included).
 * CPU per request is also the figure that holds on a loaded machine, where req/s measures the other load.
 *
 * Read from /proc (Linux). `service` is the serving process (all its threads), `postgres` the PostgreSQL backends
 * connected to the bench's database (listed in pg_stat_activity: the service's pools, the raw client's, a peer's;
 * never another database's, so other work on the same server is not counted), `client` this process: the load
 * generator or the raw `pg` client.
 */
export interface CpuTimes {
  service: number;
  postgres: number;
  client: number;
}

// USER_HZ: the unit of utime/stime in /proc/<pid>/stat. 100 on every Linux this runs on (`getconf CLK_TCK`).
const TICK_MS = 10;
// Backends are listed again this often during a measurement, so one that a pool opens meanwhile is counted.
const LIST_EVERY_MS = 500;

/** utime + stime of a process (all its threads), in ms; undefined once it has ended. */
export function processMs(pid: number, withReapedChildren = false): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // `comm` is in parentheses and may itself hold spaces or parentheses: the fields start after the last `)`.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state); utime, stime, cutime and cstime are fields 14 to 17.
  let ticks = Number(fields[11]) + Number(fields[12]);
  if (withReapedChildren) ticks += Number(fields[13]) + Number(fields[14]);
  return ticks * TICK_MS;
}

/**
 * The backends of one database, read while a measurement runs: the first and the last CPU reading of each. A
 * backend that ends mid-measurement (a pool's idle timeout) keeps what it had at its last reading; one that starts
 * counts from zero. Parallel workers show in pg_stat_activity under the leader's database while they run.
 */
export class BackendCpu {
  private readonly first = new Map<number, number>();
  private readonly last = new Map<number, number>();
  private timer: NodeJS.Timeout | undefined;
  private listing: Promise<void> = Promise.resolve();

  private constructor(private readonly client: pg.Client) {}

  static async open(databaseUrl: string): Promise<BackendCpu> {
    const client = new pg.Client({ connectionString: databaseUrl, application_name: 'bench cpu reader' });
    await client.connect();
    return new BackendCpu(client);
  }

  private async list(initial: boolean): Promise<void> {
    const { rows } = await this.client.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
    );
    for (const { pid } of rows) {
      const ms = processMs(pid);
      if (ms === undefined) continue;
      if (!this.first.has(pid)) this.first.set(pid, initial ? ms : 0);
      this.last.set(pid, ms);
    }
  }

  async start(): Promise<void> {
    await this.list(true);
    this.timer = setInterval(() => {
      this.listing = this.listing.then(() => this.list(false)).catch(() => undefined);
    }, LIST_EVERY_MS);
  }

  /** ms of CPU the database's backends spent since `start`. */
  async stop(): Promise<number> {
    clearInterval(this.timer);
    await this.listing;
    await this.list(false);
    await this.client.end();
    let total = 0;
    for (const [pid, first] of this.first) total += this.last.get(pid)! - first;
    return total;
  }
}

/** What a measurement's CPU is read from: the serving process and the database the bench's backends serve. */
export interface CpuSources {
  /** The serving process: the service's, a peer's, or (for a raw client) this one's. */
  pid: number;
  databaseUrl: string;
}

/** CPU per request of each side over a measurement: ms. */
export function cpuPerRequest(total: CpuTimes, requests: number): CpuTimes | undefined {
  if (requests === 0) return undefined;
  return { service: total.service / requests, postgres: total.postgres / requests, client: total.client / requests };
}

export const totalCpu = (times: CpuTimes) => times.service + times.postgres + times.client;

export function cpuLine(times: CpuTimes | undefined): string {
  if (!times) return 'CPU per request: not measured (no /proc)';
  const ms = (value: number) => value.toFixed(2);
  return `CPU per request ${ms(totalCpu(times))} ms: service ${ms(times.service)}, PostgreSQL ${ms(times.postgres)}, client ${ms(times.client)}`;
}

/**
 * Runs `measure` between two readings and gives its result with the CPU each side spent per request; undefined
 * where /proc is not there to read. A serving process that is this process (a raw client) counts as the client.
 */
export async function withCpu<T extends { requests: number }>(
  sources: CpuSources,
  measure: () => Promise<T>,
): Promise<T & { cpu: CpuTimes | undefined }> {
  const own = sources.pid === process.pid;
  const serviceBefore = own ? 0 : processMs(sources.pid, true);
  const backends = await BackendCpu.open(sources.databaseUrl);
  await backends.start();
  const clientBefore = process.cpuUsage();
  const result = await measure();
  const client = process.cpuUsage(clientBefore);
  const serviceAfter = own ? 0 : processMs(sources.pid, true);
  const postgres = await backends.stop();
  if (serviceBefore === undefined || serviceAfter === undefined) return { ...result, cpu: undefined };
  const total = { service: serviceAfter - serviceBefore, postgres, client: (client.user + client.system) / 1000 };
  return { ...result, cpu: cpuPerRequest(total, result.requests) };
}

/**
 * What REST / raw could reach if both sides were bound by the machine's CPU alone: the CPU (all processes) one raw
 * request costs over the CPU one REST request costs.
 */
export function cpuCeiling(rest: CpuTimes | undefined, raw: CpuTimes | undefined): number | undefined {
  return rest && raw ? totalCpu(raw) / totalCpu(rest) : undefined;
}

/** `cpu | <row> | raw CPU / REST CPU per request | median of N: <x> | rounds …`, beside the row's ratio line. */
export function cpuCeilingLine(row: string, ceilings: (number | undefined)[]): string {
  const known = ceilings.filter((value): value is number => value !== undefined).sort((a, b) => a - b);
  if (known.length === 0) return `cpu | ${row} | not measured (no /proc)`;
  return (
    `cpu | ${row} | raw CPU / REST CPU per request, all processes | median of ${known.length}: ` +
    `${known[Math.floor(known.length / 2)]!.toFixed(2)} | rounds ${ceilings.map((value) => value?.toFixed(2) ?? '-').join(' ')}`
  );
}
