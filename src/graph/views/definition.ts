import { z } from 'zod';
import { checkFilter, checkOrderBy, filterBudgetProblems, FilterExpression, OrderBy } from '../../data/filter.ts';
import type { FieldDefinition } from '../../data/field-types.ts';
import type { FieldProblem } from '../../kernel/errors.ts';
import { Id } from '../../kernel/formats.ts';

/**
 * A view definition (spec 2.3), checked in two layers. The shape (this zod schema, every limit of spec §8) is a
 * 422 wherever it is broken. The fit against the table (`definitionProblems`) is a 422 when a view is written —
 * the client names the schema version it wrote against — and, when the table has changed since, the same
 * problems are reported on reads as `validationErrors` while the view keeps loading (docs/decisions/views.md).
 */
export const MAX_COLUMNS = 200;
export const MAX_VALIDATION_ERRORS = 200;

export const ViewQuery = z.strictObject({ where: FilterExpression.optional(), orderBy: OrderBy.optional() });

export const ViewDefinition = z.strictObject({
  columnOrder: z.array(Id).max(MAX_COLUMNS),
  columnWidths: z
    .record(z.string().min(1).max(64), z.number().min(40).max(2000))
    .refine((widths) => Object.keys(widths).length <= MAX_COLUMNS, `at most ${MAX_COLUMNS} columns`),
  frozenColumns: z.number().int().min(0).max(MAX_COLUMNS),
  hiddenColumns: z.array(Id).max(MAX_COLUMNS),
  query: ViewQuery,
});
export type ViewDefinition = z.infer<typeof ViewDefinition>;

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
