import { describe, expect, it } from 'vitest';
import { SharedChangeReads } from '../src/catalog/change-reads.ts';
import type { ChangeJsonPage } from '../src/catalog/changes.ts';

/**
 * Issue 27: which stream reads share a page (src/catalog/change-reads.ts). The pages here are stand-ins: what is
 * under test is when a read takes another's page and when it reads for itself; test/changes.test.ts checks that
 * streams sharing their reads still see every change once and in order.
 */
const page = (nextCursor: string): ChangeJsonPage => ({ data: [], nextCursor, hasMore: false });

function counted() {
  const loads: string[] = [];
  const load = (name: string) => () => {
    loads.push(name);
    return Promise.resolve(page(name));
  };
  return { loads, load };
}

describe('shared stream reads', () => {
  it('a polling read takes a page of the same key started within the window, running or done', async () => {
    const reads = new SharedChangeReads(1_000);
    const { loads, load } = counted();
    const first = reads.read('db.*.100.c1', false, load('first'));
    const joined = reads.read('db.*.100.c1', false, load('second'));
    expect(await joined).toBe(await first);
    expect(await reads.read('db.*.100.c1', false, load('third'))).toBe(await first);
    expect(loads).toEqual(['first']);
  });

  it('another cursor, page size or table filter is another page', async () => {
    const reads = new SharedChangeReads(1_000);
    const { loads, load } = counted();
    await Promise.all(
      ['db.*.100.c1', 'db.*.100.c2', 'db.*.1.c1', 'db.T.100.c1'].map((key) => reads.read(key, false, load(key))),
    );
    expect(loads).toHaveLength(4);
  });

  it('a read after an arm (fresh) reads for itself, and later polling reads take its page', async () => {
    const reads = new SharedChangeReads(1_000);
    const { loads, load } = counted();
    await reads.read('db.*.100.c1', false, load('polled'));
    const fresh = await reads.read('db.*.100.c1', true, load('fresh'));
    expect(fresh.nextCursor).toBe('fresh');
    expect((await reads.read('db.*.100.c1', false, load('later'))).nextCursor).toBe('fresh');
    expect(loads).toEqual(['polled', 'fresh']);
  });

  it('a page older than the window is read again', async () => {
    const reads = new SharedChangeReads(20);
    const { loads, load } = counted();
    await reads.read('db.*.100.c1', false, load('old'));
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect((await reads.read('db.*.100.c1', false, load('new'))).nextCursor).toBe('new');
    expect(loads).toEqual(['old', 'new']);
  });

  it('a failed read fails the reads that took it, and the next read tries again', async () => {
    const reads = new SharedChangeReads(1_000);
    const failing = reads.read('db.*.100.c1', false, () => Promise.reject(new Error('connection lost')));
    const joined = reads.read('db.*.100.c1', false, () => Promise.resolve(page('unused')));
    await expect(failing).rejects.toThrow('connection lost');
    await expect(joined).rejects.toThrow('connection lost');
    expect((await reads.read('db.*.100.c1', false, () => Promise.resolve(page('retried')))).nextCursor).toBe('retried');
  });
});
