import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU time spent by each side of a measurement, so a ratio can be read against the machine's capacity: on a
 * 2-core VM both sides of a throughput comparison are CPU-bound, and then REST / raw can be no better than the
 * CPU one raw request costs over the CPU one REST request costs (every process involved, PostgreSQL included).
 *
 * Read from /proc (Linux). `service` is the servers process (all its threads), `postgres` every PostgreSQL
 * process on the machine (the bench's embedded server is idle otherwise, and BENCH_DATABASE_URL may point
 * elsewhere on this host), `client` this process: the load generator or the raw `pg` client.
 */
export interface CpuTimes {
  service: number;
  postgres: number;
  client: number;
}

// USER_HZ: the unit of utime/stime in /proc/<pid>/stat. 100 on every Linux this runs on (`getconf CLK_TCK`).
const TICK_MS = 10;

/**
 * The CPU of a process, with that of its children it has already reaped: PostgreSQL backends come and go with
 * the pools' idle timeouts, and a backend that exited mid-measurement would otherwise take its CPU with it.
 */
function processTimes(pid: string): { comm: string; ms: number } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined; // ended between the listing and the read
  }
  // `comm` is in parentheses and may itself hold spaces or parentheses: the fields start after the last `)`.
  const close = stat.lastIndexOf(')');
  const fields = stat.slice(close + 2).split(' ');
  // fields[0] is field 3 (state); utime, stime, cutime and cstime are fields 14 to 17.
  const ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
  return { comm: stat.slice(stat.indexOf('(') + 1, close), ms: ticks * TICK_MS };
}

/** Undefined where /proc is not there to read. */
export function cpuTimes(servicePid: number): CpuTimes | undefined {
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return undefined;
  }
  let postgres = 0;
  for (const pid of pids) {
    const times = processTimes(pid);
    if (times?.comm === 'postgres') postgres += times.ms;
  }
  const service = processTimes(String(servicePid))?.ms ?? 0;
  const own = process.cpuUsage();
  return { service, postgres, client: (own.user + own.system) / 1000 };
}

/** CPU per request of each side over a measurement: ms, from readings taken before and after it. */
export function cpuPerRequest(
  before: CpuTimes | undefined,
  after: CpuTimes | undefined,
  requests: number,
): CpuTimes | undefined {
  if (!before || !after || requests === 0) return undefined;
  const per = (key: keyof CpuTimes) => (after[key] - before[key]) / requests;
  return { service: per('service'), postgres: per('postgres'), client: per('client') };
}

export const totalCpu = (times: CpuTimes) => times.service + times.postgres + times.client;

export function cpuLine(times: CpuTimes | undefined): string {
  if (!times) return 'CPU per request: not measured (no /proc)';
  const ms = (value: number) => value.toFixed(2);
  return `CPU per request ${ms(totalCpu(times))} ms: service ${ms(times.service)}, PostgreSQL ${ms(times.postgres)}, client ${ms(times.client)}`;
}

/** Runs `measure` between two readings and gives its result with the CPU each side spent per request. */
export async function withCpu<T extends { requests: number }>(
  servicePid: number,
  measure: () => Promise<T>,
): Promise<T & { cpu: CpuTimes | undefined }> {
  const before = cpuTimes(servicePid);
  const result = await measure();
  return { ...result, cpu: cpuPerRequest(before, cpuTimes(servicePid), result.requests) };
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
