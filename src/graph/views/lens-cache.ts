import type { ViewLens } from './views.ts';

/**
 * Lenses of saved views as last read, by view id. An entry is a hint, never an authority: a page read through it
 * carries a guard that the view still has this version and is still visible to the caller (src/data/rows.ts,
 * `pageGuard`), checked by PostgreSQL in the page's own statement.
 */
export interface CachedLens {
  viewId: string;
  tableId: string;
  orgId: string;
  /** The view's version and the table's schema version the lens was checked against. */
  version: string;
  schemaVersion: number;
  lens: ViewLens;
}

export class ViewLensCache {
  private readonly entries = new Map<string, CachedLens>();

  constructor(private readonly capacity = 1_000) {}

  get(viewId: string): CachedLens | undefined {
    return this.entries.get(viewId);
  }

  remember(entry: CachedLens): void {
    this.entries.delete(entry.viewId);
    this.entries.set(entry.viewId, entry);
    if (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
  }
}
