import type { FilterExpression } from '../../data/filter.ts';
import { filterBudgetProblems } from '../../data/filter-budget.ts';
import { compileFilter } from '../../data/filter-sql.ts';
import { isSearchable, searchCondition, searchRank, searchWords, type SearchPlan } from '../../data/search.ts';
import type { Params } from '../../data/statement.ts';
import { validationFailed } from '../../kernel/errors.ts';
import type { TableSchema } from '../../catalog/table-schema.ts';
import type { ViewLens } from '../views/views.ts';
import { checkRowQuery, throughView } from './row-pages.ts';

/**
 * Which rows a read selects, whatever reads them (a page, a total, aggregates): the request's `where`, checked
 * against the schema, with the view's filter under it and the one cost budget over both (as GET …/rows), and a
 * search (issue 28) on top.
 */
export function checkedWhere(schema: TableSchema, lens: ViewLens | null, where: unknown): FilterExpression | null {
  const asked = checkRowQuery(schema, where, undefined);
  const query = lens ? throughView(lens, asked) : asked;
  const overBudget = query.where ? filterBudgetProblems(query.where, schema.fields) : [];
  if (overBudget.length) {
    throw validationFailed(
      overBudget.map((problem) => ({ ...problem, path: ['where', ...problem.path] })),
      'The filter is over its cost budget; simplify it.',
    );
  }
  return query.where;
}

/**
 * The searched fields: every text-like field, those a ready search index covers first (in the index's order, so
 * the query's document is the index's expression) and the rest scanned beside it.
 */
export function searchPlanOf(schema: TableSchema): SearchPlan {
  const searchable = schema.fields.filter(isSearchable);
  const index = schema.indexes.find((candidate) => candidate.method === 'search' && candidate.state === 'ready');
  const covered = new Set(index?.keys.map((key) => key.fieldId) ?? []);
  const indexed = (index?.keys ?? []).flatMap((key) => searchable.filter((field) => field.id === key.fieldId));
  return { indexed, scanned: searchable.filter((field) => !covered.has(field.id)) };
}

export interface RowSelection {
  filter: ((params: Params) => string) | null;
  /** Search relevance, for ordering when no order is asked for. */
  rank: ((params: Params) => string) | null;
}

/** The SQL of a checked filter and a search text, each with the statement's own parameters. */
export function rowSelection(
  schema: TableSchema,
  where: FilterExpression | null,
  search: string | null | undefined,
): RowSelection {
  const words = search ? searchWords(search) : [];
  const plan = words.length > 0 ? searchPlanOf(schema) : null;
  const parts: ((params: Params) => string)[] = [];
  if (where) parts.push((params) => compileFilter(where, schema.fields, (value, cast) => params.add(value, cast), 'r'));
  if (plan) parts.push((params) => searchCondition(plan, words, params));
  const filter = parts.length === 0 ? null : (params: Params) => parts.map((part) => part(params)).join(' AND ');
  const rank = plan ? (params: Params) => searchRank(plan, search!, params) : null;
  return { filter, rank };
}
