import { filterBudgetProblems } from '../../data/filter-budget.ts';
import { checkFilter, checkOrderBy } from '../../data/filter-check.ts';
import type { FieldDefinition } from '../../data/field-types.ts';
import type { FieldProblem } from '../../kernel/errors.ts';
import { MAX_VALIDATION_ERRORS, type ViewDefinition } from '../../contracts/views.ts';

function columnProblems(
  ids: readonly string[],
  fields: ReadonlyMap<string, FieldDefinition>,
  path: string,
): FieldProblem[] {
  const seen = new Set<string>();
  return ids.flatMap((id, index) => {
    const problems: FieldProblem[] = [];
    if (!fields.has(id)) problems.push({ path: ['definition', path, index], message: 'is not a field of this table' });
    if (seen.has(id))
      problems.push({ path: ['definition', path, index], message: 'names a column twice', fieldId: id });
    seen.add(id);
    return problems;
  });
}

/** Everything in a well-shaped definition that does not fit these fields, at its JSON path under `definition`. */
export function definitionProblems(definition: ViewDefinition, fields: readonly FieldDefinition[]): FieldProblem[] {
  const byId = new Map(fields.map((field) => [field.id, field]));
  const prefixed = (problems: FieldProblem[], ...prefix: string[]) =>
    problems.map((problem) => ({ ...problem, path: ['definition', ...prefix, ...problem.path] }));
  return [
    ...columnProblems(definition.columnOrder, byId, 'columnOrder'),
    ...columnProblems(definition.hiddenColumns, byId, 'hiddenColumns'),
    ...Object.keys(definition.columnWidths).flatMap((id) =>
      byId.has(id) ? [] : [{ path: ['definition', 'columnWidths', id], message: 'is not a field of this table' }],
    ),
    ...(definition.query.where ? prefixed(checkFilter(definition.query.where, fields), 'query', 'where') : []),
    ...(definition.query.where ? prefixed(filterBudgetProblems(definition.query.where, fields), 'query', 'where') : []),
    ...prefixed(checkOrderBy(definition.query.orderBy ?? [], fields), 'query', 'orderBy'),
  ];
}

/** Problems as the `validationErrors` strings of spec 2.2: `<json path>: <message>`, at most 200. */
export function validationErrorsOf(problems: readonly FieldProblem[]): string[] {
  return problems.slice(0, MAX_VALIDATION_ERRORS).map(
    (problem) =>
      `${problem.path
        .map((segment) => (typeof segment === 'number' ? `[${segment}]` : `.${segment}`))
        .join('')
        .slice(1)}: ${problem.message}`,
  );
}

/** Whether the problems concern the query (the view cannot select rows) rather than only its column layout. */
export function queryIsBroken(problems: readonly FieldProblem[]): boolean {
  return problems.some((problem) => problem.path[1] === 'query');
}
