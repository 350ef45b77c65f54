import type { FeedArming } from '../../catalog/change-arming.ts';
import type { FeedSequencer } from '../../catalog/changes.ts';
import type { ChangeReadAhead } from '../../catalog/change-read-ahead.ts';
import type { SharedChangeReads } from '../../catalog/change-reads.ts';
import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Config } from '../../kernel/config.ts';
import type { ChannelListener } from '../../db/listener.ts';
import { sqlPoolOf, type PrismaClient } from '../../db/prisma.ts';
import { pgExecutor, type SqlExecutor } from '../../db/sql.ts';
import type { DomainError } from '../../kernel/errors.ts';
import type { Logger } from '../../kernel/log.ts';
import type { Caller } from '../../kernel/caller.ts';
import type { SchemaCache } from '../../catalog/table-schema.ts';
import type { StreamRegistry } from '../../kernel/stream-limits.ts';
import type { HeavyReadQueue } from './heavy-reads.ts';
import type { RequestLoaders } from './loaders.ts';
import type { ViewLensCache } from '../views/lens-cache.ts';

/** Per-request state every resolver sees. Built by src/graph/server/yoga.ts for REST and /graphql alike. */
export interface Context {
  prisma: PrismaClient;
  config: Config;
  requestId: string;
  log: Logger;
  /** null when the request carried no credential (introspection works without one; data does not). */
  caller: Caller | null;
  /** Table definitions by schema version, shared by every request this server handles. */
  schemas: SchemaCache;
  /** This request's DataLoaders (src/graph/server/loaders.ts): the graph's edges batch through them. */
  loaders: RequestLoaders;
  /** This request's heavy fields (aggregates, search, lookups…) take turns here (src/graph/server/heavy-reads.ts). */
  heavyReads: HeavyReadQueue;
  /** Saved views' lenses as last read: hints that a page's statement re-checks (src/graph/rows/row-pages.ts). */
  views: ViewLensCache;
  /** This process's one LISTEN connection for job changes, shared by every open `jobUpdated` stream. */
  jobUpdates: ChannelListener;
  /** This process's one LISTEN connection for change feeds (key: database id), shared by long polls and streams. */
  changeSignals: ChannelListener;
  /** This process's arming of change feeds: a reader about to wait asks the next commit for a NOTIFY. */
  changeArms: FeedArming;
  /** This process's sequencer calls, shared by its readers of a database (src/catalog/change-sequencing.ts). */
  changeSequencer: FeedSequencer;
  /** This process's stream reads of change feeds, shared by streams reading the same page (src/catalog/change-reads.ts). */
  changeReads: SharedChangeReads;
  /** This process's pages of change feeds read ahead for readers catching up (src/catalog/change-read-ahead.ts). */
  changeReadAhead: ChangeReadAhead;
  /** This process's open event streams, capped per credential and org (src/kernel/stream-limits.ts). */
  streams: StreamRegistry;
  /** Test and replay requests per org (WEBHOOK_ACTIONS_PER_MINUTE); null: unlimited. */
  webhookActions: RateLimiterAbstract | null;
  /** Resolves this request's credential again, as it is now: open streams re-check their authority with it. */
  resolveCallerAgain: () => Promise<Caller | null>;
}

/** A request's credential as resolved once by the HTTP layer: the caller (null: none presented), or why it was refused. */
export type ResolvedCredential = { caller: Caller | null } | { rejected: DomainError };

/**
 * What the HTTP layer hands to Yoga with each request. `credential`, when given, was resolved from this request's
 * headers moments ago (authority is read per request, never cached across requests); without it the context
 * resolves the credential from the request itself.
 */
export interface ServerContext {
  requestId: string;
  log: Logger;
  credential?: ResolvedCredential;
}

/** Plain SQL on the catalog's connection pool, for the data plane's reads (no Prisma per-query overhead). */
export function dataPlane(context: Pick<Context, 'prisma'>): SqlExecutor {
  return pgExecutor(sqlPoolOf(context.prisma));
}
