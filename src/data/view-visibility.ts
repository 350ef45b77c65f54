/**
 * The one visibility rule of saved views: a shared view is seen by everyone who may read its table, a personal view
 * by its owner alone. `isVisibleView` is the rule in TypeScript, `visibleViewSql` the same rule as a WHERE fragment.
 * It lives in the data plane because the row page's guard (src/data/rows.ts) checks it in the page's own statement;
 * the catalog's view pages and the database export read it from here too.
 */
export const VIEW_VISIBILITIES = ['personal', 'shared'] as const;

export interface ViewVisibility {
  visibility: string;
  ownerUserId: string | null;
}

export function isViewOwner(userId: string | null, view: Pick<ViewVisibility, 'ownerUserId'>): boolean {
  return view.ownerUserId !== null && view.ownerUserId === userId;
}

export function isVisibleView(userId: string | null, view: ViewVisibility): boolean {
  return view.visibility === 'shared' || isViewOwner(userId, view);
}

/** `alias` qualifies the columns (`v.`, or '' for none); `userId` is the SQL of the caller's bound user id. */
export function visibleViewSql(alias: string, userId: string): string {
  return `(${alias}visibility = 'shared' OR (${alias}visibility = 'personal' AND ${alias}owner_user_id = ${userId}))`;
}
