import DataLoader from 'dataloader';
import type { Context } from './context.ts';

/**
 * The request's DataLoaders by name, created on first use. They live in the GraphQL context, so their caches never
 * outlive one request: authority is read per request (DESIGN §3), and no answer is shared between callers.
 */
export type RequestLoaders = Map<string, DataLoader<unknown, unknown, string>>;

/**
 * The loader `name` of this request. Every edge that reaches many parents at once (a page of tables, each with
 * its schema) asks through one, so the page costs a fixed number of statements whatever its length.
 */
export function requestLoader<K, V>(
  context: Pick<Context, 'loaders'>,
  name: string,
  batch: (keys: readonly K[]) => Promise<readonly (V | Error)[]>,
  cacheKey: (key: K) => string,
): DataLoader<K, V, string> {
  let loader = context.loaders.get(name) as DataLoader<K, V, string> | undefined;
  if (!loader) {
    loader = new DataLoader<K, V, string>(batch, { cacheKeyFn: cacheKey });
    context.loaders.set(name, loader as DataLoader<unknown, unknown, string>);
  }
  return loader;
}
