import type { FieldProblem } from '../kernel/errors.ts';
import type { FieldDefinition } from './field-types.ts';
import { familyOf, VALUE_SHAPE } from './filter-check.ts';
import { leavesOf, resolveField, type FilterExpression, type FilterLeaf, type FilterOp } from './filter.ts';

/**
 * The cost budget (DESIGN §5, issue 18), checked before any SQL runs: the sum of each condition's weight. A filter is
 * evaluated on every row a scan reaches, so the weight is what one condition costs per row relative to a comparison:
 * LIKE scans the text (ILIKE also folds case) and JSON conditions walk the document. Measured on 300,000 rows,
 * 120 iContains conditions took 26 s (~0.7 µs per condition per row), so the 25 the budget allows (500 / 20) take
 * about 5 s there; larger tables rely on the statement budget (QUERY_TIMEOUT). 500 comparisons, the structural
 * maximum of conditions, stay allowed.
 */
export const FILTER_COST_BUDGET = 500;
export const FILTER_OP_WEIGHTS: Readonly<Record<FilterOp, number>> = {
  eq: 1,
  ne: 1,
  lt: 1,
  lte: 1,
  gt: 1,
  gte: 1,
  between: 1,
  in: 1,
  isNull: 1,
  isNotNull: 1,
  prefix: 5,
  contains: 10,
  iContains: 20,
  pathExists: 10,
  pathEq: 10,
  jsonContains: 10,
};
/**
 * Values one filter may bind (every single value, both ends of a between, every `in` item and JSON path item).
 * PostgreSQL's protocol carries at most 65,535 parameters per statement, and a row page adds its own (cursor, limit).
 */
export const MAX_FILTER_VALUES = 10_000;

function boundValuesOf(leaf: FilterLeaf): number {
  const shape = VALUE_SHAPE[leaf.op];
  const values =
    shape === 'none'
      ? 0
      : shape === 'pair' || shape === 'list'
        ? Array.isArray(leaf.value)
          ? leaf.value.length
          : 1
        : 1;
  return values + (leaf.path?.length ?? 0);
}

/**
 * The cost and bound values of a well-shaped filter against the budgets above, as problems at the expression's
 * root (the total is what is over, not one condition). Text-search operators weigh their full weight only on text
 * fields; on a multiSelect `contains` is an array membership test and weighs 1.
 */
export function filterBudgetProblems(expression: FilterExpression, fields: readonly FieldDefinition[]): FieldProblem[] {
  let cost = 0;
  let values = 0;
  for (const leaf of leavesOf(expression)) {
    const field = resolveField(fields, leaf.field);
    cost += field && familyOf(field) === 'array' ? 1 : FILTER_OP_WEIGHTS[leaf.op];
    values += boundValuesOf(leaf);
  }
  const problems: FieldProblem[] = [];
  if (cost > FILTER_COST_BUDGET) {
    problems.push({
      path: [],
      message:
        `costs ${cost}, over the budget of ${FILTER_COST_BUDGET} per filter (each condition weighs 1; prefix 5, ` +
        'contains 10, iContains 20 on text; pathExists, pathEq and jsonContains 10): use fewer text-search conditions',
    });
  }
  if (values > MAX_FILTER_VALUES) {
    problems.push({
      path: [],
      message: `binds ${values} values, over the limit of ${MAX_FILTER_VALUES} per filter (in lists, between pairs and JSON paths count each item)`,
    });
  }
  return problems;
}
