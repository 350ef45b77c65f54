import type { ObjectRef } from '@pothos/core';
import { builder } from '../server/builder.ts';

/** Every list answers `{data, nextCursor, hasMore}` (spec 4.13/4.14); nextCursor is null on the last page. */
export type PageShape<T> = {
  data: T[];
  nextCursor: string | null;
  hasMore: boolean;
};

export function pageRef<T>(name: string, item: ObjectRef<any, T>, description: string) {
  return builder.objectRef<PageShape<T>>(name).implement({
    description,
    fields: (t) => ({
      data: t.field({ type: [item], resolve: (page) => page.data }),
      nextCursor: t.string({ nullable: true, resolve: (page) => page.nextCursor }),
      hasMore: t.boolean({ resolve: (page) => page.hasMore }),
    }),
  });
}

/** The page arguments of a list: root fields name them `limit`/`cursor`, edges `first`/`after` (docs/decisions/graphql.md). */
export type PageArgs = { limit?: number | null; cursor?: string | null };

/** A page from `limit + 1` fetched items: the extra one only tells whether another page exists. */
export function pageOf<Item, T>(
  fetched: Item[],
  limit: number,
  toItem: (item: Item) => T,
  cursorAfter: (last: Item) => string,
): PageShape<T> {
  const hasMore = fetched.length > limit;
  const items = hasMore ? fetched.slice(0, limit) : fetched;
  const last = items[items.length - 1];
  return { data: items.map(toItem), nextCursor: hasMore && last !== undefined ? cursorAfter(last) : null, hasMore };
}
