import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/**
 * BENCH_PROFILE=1: the servers process runs under `node --cpu-prof`; when it stops, the newest .cpuprofile in the
 * profile directory is summarised as the functions with the most self time (where the service's CPU goes).
 */
export const profileDir = process.env.BENCH_PROFILE === '1' ? join(process.cwd(), '.bench-profiles') : undefined;

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

function label(frame: ProfileNode['callFrame']): string {
  const name = frame.functionName || '(anonymous)';
  if (!frame.url) return name;
  const path = frame.url.replace(/^file:\/\//, '').replace(`${process.cwd()}/`, '');
  return `${name}  ${path}:${frame.lineNumber + 1}`;
}

/** Self time per function (summed over its call sites) in ms, from the samples and their time deltas. */
export function topSelfTime(file: string, count = 25): string {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, index) => {
    const delta = (profile.timeDeltas[index] ?? 0) / 1000;
    total += delta;
    const key = label(byId.get(id)!.callFrame);
    self.set(key, (self.get(key) ?? 0) + delta);
  });
  const busy = total - (self.get('(idle)') ?? 0);
  self.delete('(idle)');
  const rows = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, count);
  return [
    `top ${count} functions by self time, of ${(busy / 1000).toFixed(1)} s busy in ${(total / 1000).toFixed(1)} s (${file})`,
    ...rows.map(
      ([key, ms]) => `  ${((100 * ms) / busy).toFixed(1).padStart(5)} %  ${ms.toFixed(0).padStart(7)} ms  ${key}`,
    ),
  ].join('\n');
}

/**
 * The servers' main-thread profile written since `since`: every thread writes its own (tsx's loader runs in a
 * worker and is idle), so the largest one is the main thread's.
 */
export function profileSince(dir: string, since: number): string | undefined {
  const files = readdirSync(dir)
    .filter((name) => name.endsWith('.cpuprofile'))
    .map((name) => join(dir, name))
    .map((file) => ({ file, stat: statSync(file) }))
    .filter(({ stat }) => stat.mtimeMs >= since)
    .sort((a, b) => b.stat.size - a.stat.size);
  return files[0]?.file;
}
