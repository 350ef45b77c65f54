import { z } from 'zod';
import { Cursor, PageLimit } from '../../graph/cursor.ts';

/** `?limit=&cursor=` of every list route. */
export const PageQuery = z.strictObject({ limit: PageLimit.optional(), cursor: Cursor.optional() });

/** `{data, nextCursor, hasMore}` around an item schema. */
export function Page<Item extends z.ZodType>(item: Item) {
  return z.strictObject({ data: z.array(item).max(100), nextCursor: z.string().nullable(), hasMore: z.boolean() });
}
