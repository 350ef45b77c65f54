import { builder } from '../server/builder.ts';
import { Cursor, PageLimit } from '../../catalog/cursor.ts';
import type { PageArgs } from '../shared/pages.ts';

/**
 * The page arguments of every edge: `first` (1..100, default 50) and `after` (a `nextCursor`). Relay's names, so
 * that graphql-armor's cost limit multiplies a literal `first` into the edge's cost; the values are the root
 * lists' `limit` and `cursor`, under the same rules and with interchangeable cursors.
 */
export const edgePageArgs = builder.args((t) => ({
  first: t.int({ validate: PageLimit.optional(), description: 'Page size, 1..100 (default 50).' }),
  after: t.string({ validate: Cursor.optional(), description: 'The `nextCursor` of the previous page.' }),
}));

export function pageArgsOf(args: { first?: number | null; after?: string | null }): PageArgs {
  return { limit: args.first ?? null, cursor: args.after ?? null };
}
