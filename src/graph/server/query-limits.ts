import { EnvelopArmorPlugin } from '@escape.tech/graphql-armor';
import type { GraphQLError } from 'graphql';
import { DomainError } from '../../kernel/errors.ts';
import type { HeavyRead } from './heavy-reads.ts';
import { pageSizeCost } from './query-cost.ts';

/**
 * Abuse limits for documents clients write (docs/decisions/graphql.md). Chosen so
 * that the graph is usable as a graph — org → databases → tables → schema, views and rows, rows → history — while
 * a document that asks for a million rows, or is built to make the parser or validator work, is refused before
 * anything runs. Introspection is exempt: GraphiQL and code generators read the schema.
 */
export const QUERY_LIMITS = {
  /** org › databases › data › tables › data › rows › data › history › data › actor › name is 11. */
  maxDepth: 12,
  maxAliases: 15,
  maxDirectives: 20,
  maxTokens: 2_000,
  /**
   * armor's cost formula — 1 per scalar, 2 per object, depth factor 1 (armor's default 1.5 compounds per level) —
   * times the effective page size of every page field (src/graph/server/query-cost.ts), which approximates the number of
   * values an answer can hold: 10 databases × 50 tables × (schema, 20 views, 20 rows) costs ~163,000;
   * 100 × 100 × 100 rows costs ~6,000,000, and so does the same walk with every `first` omitted or a variable.
   */
  maxCost: 200_000,
} as const;

/**
 * The cost of a field whose value can be megabytes (an artifact's content, up to 8 MiB as a string): half the
 * budget, so one operation holds at most one such value. Fifteen aliases of it answered 120 MB (issue 26 §3).
 */
export const BULK_FIELD_COST = QUERY_LIMITS.maxCost / 2;

/**
 * Heavy reads one operation may hold: the in-flight limit of one credential (CONCURRENCY_LIMIT, 4). They run one
 * after another on the request's share (src/graph/server/heavy-reads.ts), so four of them hold one slot for at most
 * 4 × QUERY_TIMEOUT_MS (20 s), the connection time four single-read requests of the credential may hold at once.
 */
export const MAX_HEAVY_READS = 4;

/**
 * The cost of a heavy read, which may scan a whole table (up to TABLE_ROW_LIMIT, 1,000,000 rows): just over a fifth of
 * the budget, so a fifth heavy read is over the limit whatever else the operation holds, and four leave 39,996 for the
 * rest (REST's 100-row page costs 1,200: `values` is one JSON value per row). Fifteen aliases cost over 600,015:
 * refused before anything runs.
 */
export const HEAVY_READ_COST = Math.floor(QUERY_LIMITS.maxCost / (MAX_HEAVY_READS + 1)) + 1;

/** `extensions` of a heavy read; with `when`, heavy only when one of those arguments is given (`rows` with `search`). */
export function heavyRead(when?: readonly string[]): { heavyRead: HeavyRead } {
  return { heavyRead: when ? { cost: HEAVY_READ_COST, when } : { cost: HEAVY_READ_COST } };
}

type Limit = 'maxDepth' | 'maxAliases' | 'maxDirectives' | 'maxTokens' | 'maxCost';

function tooComplex(limit: Limit, message: string): DomainError {
  return new DomainError('QUERY_TOO_COMPLEX', message, { details: { limit, max: QUERY_LIMITS[limit] }, status: 400 });
}

/** armor's messages begin "Syntax Error:", which they are not; the code and details say which limit it was. */
function refusal(limit: Limit) {
  return (_context: unknown, error: GraphQLError): never => {
    throw tooComplex(limit, error.message.replace(/^Syntax Error: /, ''));
  };
}

/** armor's shape limits at validation, then the cost at execution, when the variables are known. */
export function queryLimits() {
  return [
    armorLimits(),
    pageSizeCost(QUERY_LIMITS, (cost) =>
      tooComplex('maxCost', `Query Cost limit of ${QUERY_LIMITS.maxCost} exceeded, found ${cost}.`),
    ),
  ];
}

function armorLimits() {
  return EnvelopArmorPlugin({
    maxDepth: { n: QUERY_LIMITS.maxDepth, ignoreIntrospection: true, onReject: [refusal('maxDepth')] },
    maxAliases: { n: QUERY_LIMITS.maxAliases, onReject: [refusal('maxAliases')] },
    maxTokens: { n: QUERY_LIMITS.maxTokens, onReject: [refusal('maxTokens')] },
    maxDirectives: { n: QUERY_LIMITS.maxDirectives, onReject: [refusal('maxDirectives')] },
    costLimit: { enabled: false },
    blockFieldSuggestion: { enabled: true },
  });
}
