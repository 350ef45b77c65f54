import { z } from 'zod';
import { Cursor, PageLimit } from '../../graph/cursor.ts';

/** `?limit=&cursor=` of every list route. */
export const PageQuery = z.strictObject({ limit: PageLimit.optional(), cursor: Cursor.optional() });

/** `{data, nextCursor, hasMore}` around an item schema. */
export function Page<Item extends z.ZodType>(item: Item) {
  return z.strictObject({ data: z.array(item).max(100), nextCursor: z.string().nullable(), hasMore: z.boolean() });
}

/** A query parameter that carries JSON (e.g. `?where={"field":"Name","op":"eq","value":"Ada"}`), then `schema`. */
export function JsonQueryParameter<T>(schema: z.ZodType<T>, description: string) {
  return z.string().describe(description).transform((text, context) => {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      context.addIssue({ code: 'custom', message: 'must be URL-encoded JSON' });
      return z.NEVER;
    }
  }).pipe(schema);
}
