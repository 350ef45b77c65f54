import { describe, expect, it } from 'vitest';
import { ChangeReadAhead } from '../src/catalog/change-read-ahead.ts';
import { ChangeJson, type ChangeJsonPage } from '../src/catalog/changes.ts';

/**
 * Issue 27: when a reader's page comes from the read-ahead (src/catalog/change-read-ahead.ts). The pages here are
 * stand-ins, named by the cursor they start after; test/changes.test.ts checks over HTTP that a reader still sees its
 * own write, and the feed tests that followers see every change once and in order.
 */
const place = { databaseId: 'db', tableId: undefined, limit: 2 };

/** A feed of stand-in pages: after `cN` comes a page ending at `c(N+1)`, full while N+1 < `end`. */
function feed(end: number) {
  const loads: (string | null)[] = [];
  const ahead: boolean[] = [];
  let failing = false;
  const load = (after: string | null, readAhead = false): Promise<ChangeJsonPage> => {
    loads.push(after);
    ahead.push(readAhead);
    if (failing) return Promise.reject(new Error('read failed'));
    const next = Number(after?.slice(1) ?? 0) + 1;
    const change = new ChangeJson(`{"cursor":"c${next}"}`, `c${next}`);
    return Promise.resolve({ data: [change], nextCursor: `c${next}`, hasMore: next < end });
  };
  return { loads, ahead, load, fail: () => (failing = true) };
}

const settled = () => new Promise((resolve) => setTimeout(resolve, 10));

describe('change pages read ahead', () => {
  it('after a full page, the next is read once and the reader’s next request takes it', async () => {
    const ahead = new ChangeReadAhead();
    const pages = feed(10);
    const first = await ahead.read(place, null, pages.load);
    await settled();
    const second = await ahead.read(place, first.nextCursor, pages.load);
    expect(second.nextCursor).toBe('c2');
    expect(pages.loads).toEqual([null, 'c1', 'c2']);
    // Only the reads ahead may skip sequencing the feed (they keep a full page only).
    expect(pages.ahead).toEqual([false, true, true]);
  });

  it('a page that reached the feed’s end is never answered from the read-ahead: the reader reads again', async () => {
    const ahead = new ChangeReadAhead();
    const { loads, load } = feed(2);
    await ahead.read(place, null, load);
    await settled();
    const last = await ahead.read(place, 'c1', load);
    expect(last.hasMore).toBe(false);
    expect(loads).toEqual([null, 'c1', 'c1']);
  });

  it('another table filter or page size is another page', async () => {
    const ahead = new ChangeReadAhead();
    const { loads, load } = feed(10);
    await ahead.read(place, null, load);
    await settled();
    await ahead.read({ ...place, tableId: 'T' }, 'c1', load);
    await ahead.read({ ...place, limit: 3 }, 'c1', load);
    expect(loads.filter((after) => after === 'c1')).toHaveLength(3);
  });

  it('a failed read ahead is not answered: the reader reads for itself', async () => {
    const ahead = new ChangeReadAhead();
    const { loads, load, fail } = feed(10);
    await ahead.read(place, null, async (after) => {
      const page = await load(after);
      fail();
      return page;
    });
    await settled();
    await expect(ahead.read(place, 'c1', load)).rejects.toThrow('read failed');
    expect(loads).toEqual([null, 'c1', 'c1']);
  });

  it('a page kept past its time, or beyond the byte budget, is read again', async () => {
    const expired = new ChangeReadAhead({ keepMs: 5, maxBytes: 1_000_000, maxRunning: 2 });
    const late = feed(10);
    await expired.read(place, null, late.load);
    await new Promise((resolve) => setTimeout(resolve, 30));
    await expired.read(place, 'c1', late.load);
    expect(late.loads).toEqual([null, 'c1', 'c1', 'c2']);

    const small = new ChangeReadAhead({ keepMs: 5_000, maxBytes: 5, maxRunning: 2 });
    const large = feed(10);
    await small.read(place, null, large.load);
    await settled();
    await small.read(place, 'c1', large.load);
    expect(large.loads).toEqual([null, 'c1', 'c1', 'c2']);
  });

  it('at most `maxRunning` pages are read ahead at once', async () => {
    const ahead = new ChangeReadAhead({ keepMs: 5_000, maxBytes: 1_000_000, maxRunning: 1 });
    const loads: (string | null)[] = [];
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    const load = async (after: string | null): Promise<ChangeJsonPage> => {
      loads.push(after);
      if (after !== null) await held;
      return { data: [], nextCursor: `${after ?? 'start'}+`, hasMore: true };
    };
    await ahead.read(place, null, load);
    await ahead.read({ ...place, tableId: 'T' }, null, load);
    expect(loads).toEqual([null, 'start+', null]);
    release();
  });
});
