import { describe, expect, it } from 'vitest';
import { ChangeReadAhead, type PageLoad } from '../src/catalog/change-read-ahead.ts';
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

/** A follower's first two pages: the second follows the first, so the page after it is read ahead. */
async function follow(ahead: ChangeReadAhead, load: PageLoad) {
  const first = await ahead.read(place, null, load);
  return ahead.read(place, first.nextCursor, load);
}

describe('change pages read ahead', () => {
  it('a follower’s pages are read two ahead, and the follower’s next requests take them', async () => {
    const ahead = new ChangeReadAhead();
    const pages = feed(10);
    await follow(ahead, pages.load);
    await settled();
    // The follower took c1's page; the two after it are read (the second once the first is in).
    expect(pages.loads).toEqual([null, 'c1', 'c2', 'c3']);
    expect((await ahead.read(place, 'c2', pages.load)).nextCursor).toBe('c3');
    await settled();
    expect(pages.loads).toHaveLength(4);
    expect((await ahead.read(place, 'c3', pages.load)).nextCursor).toBe('c4');
    await settled();
    expect(pages.loads).toEqual([null, 'c1', 'c2', 'c3', 'c4', 'c5']);
    // Only the reads ahead may skip sequencing the feed (they keep a full page only).
    expect(pages.ahead).toEqual([false, false, true, true, true, true]);
  });

  it('a reader that asks for one page, or for a cursor this process did not answer, costs no read ahead', async () => {
    const ahead = new ChangeReadAhead();
    const pages = feed(10);
    await ahead.read(place, null, pages.load);
    await ahead.read(place, 'c5', pages.load);
    await settled();
    expect(pages.loads).toEqual([null, 'c5']);
  });

  it('no read ahead while the pool has no spare connection: a request never waits for one behind a read ahead', async () => {
    let spare = false;
    const ahead = new ChangeReadAhead(() => spare);
    const pages = feed(10);
    const second = await follow(ahead, pages.load);
    spare = true;
    await ahead.read(place, second.nextCursor, pages.load);
    await settled();
    expect(pages.loads).toEqual([null, 'c1', 'c2', 'c3', 'c4']);
    expect(pages.ahead).toEqual([false, false, false, true, true]);
  });

  it('a page that reached the feed’s end is never answered from the read-ahead: the reader reads again', async () => {
    const ahead = new ChangeReadAhead();
    const pages = feed(3);
    await follow(ahead, pages.load);
    await settled();
    const last = await ahead.read(place, 'c2', pages.load);
    expect(last.hasMore).toBe(false);
    expect(pages.loads).toEqual([null, 'c1', 'c2', 'c2']);
  });

  it('another table filter or page size is another page', async () => {
    const ahead = new ChangeReadAhead();
    const pages = feed(10);
    await follow(ahead, pages.load);
    await settled();
    await ahead.read({ ...place, tableId: 'T' }, 'c2', pages.load);
    await ahead.read({ ...place, limit: 3 }, 'c2', pages.load);
    expect(pages.loads.filter((after) => after === 'c2')).toHaveLength(3);
  });

  it('a failed read ahead is not answered: the reader reads for itself', async () => {
    const ahead = new ChangeReadAhead();
    const pages = feed(10);
    await follow(ahead, async (after) => {
      const page = await pages.load(after);
      if (after === 'c1') pages.fail();
      return page;
    });
    await settled();
    await expect(ahead.read(place, 'c2', pages.load)).rejects.toThrow('read failed');
    expect(pages.loads).toEqual([null, 'c1', 'c2', 'c2']);
  });

  it('a page kept past its time, or beyond the byte budget, is read again', async () => {
    for (const limits of [
      { keepMs: 5, maxBytes: 1_000_000, maxRunning: 2 },
      { keepMs: 5_000, maxBytes: 5, maxRunning: 2 },
    ]) {
      const ahead = new ChangeReadAhead(undefined, limits);
      const pages = feed(10);
      await follow(ahead, pages.load);
      await new Promise((resolve) => setTimeout(resolve, 30));
      await ahead.read(place, 'c2', pages.load);
      expect(pages.loads.filter((after) => after === 'c2')).toHaveLength(2);
    }
  });

  it('at most `maxRunning` pages are read ahead at once; a follower left out is read ahead at its next page', async () => {
    const ahead = new ChangeReadAhead(undefined, { keepMs: 5_000, maxBytes: 1_000_000, maxRunning: 1 });
    const loads: string[] = [];
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    const loadOf =
      (name: string) =>
      async (after: string | null, readAhead: boolean): Promise<ChangeJsonPage> => {
        loads.push(`${name} ${after ?? 'start'}${readAhead ? ' ahead' : ''}`);
        if (readAhead) await held;
        return { data: [], nextCursor: `${after ?? 'start'}+`, hasMore: true };
      };
    const other = { ...place, tableId: 'T' };
    await follow(ahead, loadOf('A'));
    await ahead.read(other, null, loadOf('B'));
    await ahead.read(other, 'start+', loadOf('B'));
    expect(loads).toEqual(['A start', 'A start+', 'A start++ ahead', 'B start', 'B start+']);
    release();
    await settled();
    await ahead.read(other, 'start++', loadOf('B'));
    await settled();
    expect(loads.slice(5)).toEqual(['A start+++ ahead', 'B start++', 'B start+++ ahead', 'B start++++ ahead']);
  });
});
