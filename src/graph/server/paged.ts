import {
  Cursor,
  cursorKey,
  decodeCursor,
  DEFAULT_PAGE_SIZE,
  encodeCursor,
  IdPosition,
  PageLimit,
} from '../../catalog/cursor.ts';
import { pageOf, type PageArgs, type PageShape } from '../shared/pages.ts';
import { builder } from './builder.ts';
import type { Context } from './context.ts';

/** `limit` and `cursor` of a root list field (edges name them `first` / `after`: docs/decisions/graphql.md). */
export const pageArgs = builder.args((t) => ({
  limit: t.int({ validate: PageLimit.optional() }),
  cursor: t.string({ validate: Cursor.optional() }),
}));

/** One list whose rows are ordered by id, either way. */
export interface IdOrderedList<Row extends { id: string }, Item> {
  /** Whose list it is (`webhooks:<orgId>`): a cursor signed for another list, or another org's, is refused. */
  scope: string;
  /** At most `limit + 1` rows after `after` (the first rows without it), in the list's order. */
  fetch: (page: { after: string | undefined; limit: number }) => Promise<Row[]>;
  toItem: (row: Row) => Item;
}

/**
 * One page of an id-ordered list: the cursor is checked against the list's scope, `limit + 1` rows tell whether
 * another page exists, and the next cursor names the last row's id, signed for the same scope.
 */
export async function pageById<Row extends { id: string }, Item>(
  context: Context,
  page: PageArgs,
  list: IdOrderedList<Row, Item>,
): Promise<PageShape<Item>> {
  const limit = page.limit ?? DEFAULT_PAGE_SIZE;
  const key = await cursorKey(context.prisma);
  const after = page.cursor ? decodeCursor(key, list.scope, page.cursor, IdPosition).id : undefined;
  const rows = await list.fetch({ after, limit });
  return pageOf(rows, limit, list.toItem, (last) => encodeCursor(key, list.scope, { id: last.id }));
}
