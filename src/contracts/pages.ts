import { z } from 'zod';
import { Cursor, PageLimit } from '../catalog/cursor.ts';
import { exceedsDepth, MAX_JSON_DEPTH } from '../kernel/input-hygiene.ts';

/** `?limit=&cursor=` of every list route. */
export const PageQuery = z.strictObject({ limit: PageLimit.optional(), cursor: Cursor.optional() });

/** `{data, nextCursor, hasMore}` around an item schema. */
export function Page<Item extends z.ZodType>(item: Item) {
  return z.strictObject({ data: z.array(item).max(100), nextCursor: z.string().nullable(), hasMore: z.boolean() });
}

/** What each JSON query parameter holds once parsed: the OpenAPI document describes it as JSON `content`. */
export const jsonQueryContents = new WeakMap<z.ZodType, z.ZodType>();

/** A query parameter that carries JSON (e.g. `?where={"field":"Name","op":"eq","value":"Ada"}`), then `schema`. */
export function JsonQueryParameter<T>(schema: z.ZodType<T>, description: string) {
  const parameter = jsonQueryParameter(schema, description);
  jsonQueryContents.set(parameter, schema);
  return parameter;
}

function jsonQueryParameter<T>(schema: z.ZodType<T>, description: string) {
  return z
    .string()
    .describe(description)
    .transform((text, context) => {
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        context.addIssue({ code: 'custom', message: 'must be URL-encoded JSON' });
        return z.NEVER;
      }
      if (exceedsDepth(value, MAX_JSON_DEPTH)) {
        context.addIssue({ code: 'custom', message: `must not nest deeper than ${MAX_JSON_DEPTH} levels` });
        return z.NEVER;
      }
      return value;
    })
    .pipe(schema);
}
