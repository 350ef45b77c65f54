import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/** A fresh clone has only this repository: README.md may point at nothing outside it (issue 25). */
const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

describe('README.md', () => {
  it('names no path outside the repository', () => {
    expect(README.match(/\.\.\/[\w./-]+/g) ?? []).toEqual([]);
  });

  it('links only to files that exist in the repository', () => {
    const targets = [...README.matchAll(/\]\(([^)#\s]+)[^)]*\)/g)].map((match) => match[1]!);
    expect(targets.filter((target) => /^[a-z]+:/i.test(target))).toEqual([]);
    expect(targets.filter((target) => !existsSync(new URL(`../${target}`, import.meta.url)))).toEqual([]);
  });

  it('puts the quick start before the benchmark prose', () => {
    expect(README.indexOf('\n## Quick start\n')).toBeGreaterThan(0);
    expect(README.indexOf('\n## Quick start\n')).toBeLessThan(README.indexOf('npm run bench'));
  });
});
