import { EnvelopArmorPlugin } from '@escape.tech/graphql-armor';
import type { GraphQLError } from 'graphql';
import { DomainError } from '../../kernel/errors.ts';
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
