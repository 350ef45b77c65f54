import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { z } from 'zod';
import { validationFailed, type FieldProblem } from './errors.ts';

type Issue = StandardSchemaV1.Issue;

function pathOf(issue: Issue): (string | number)[] {
  return (issue.path ?? []).map((segment) => {
    const key = typeof segment === 'object' ? segment.key : segment;
    return typeof key === 'number' ? key : String(key);
  });
}

/** Turns zod / standard-schema issues into the `details.problems` list of a VALIDATION_FAILED error. */
export function problemsFromIssues(issues: readonly Issue[]): FieldProblem[] {
  return issues.map((issue) => ({ path: pathOf(issue), message: issue.message }));
}

/** Parses with a zod schema or throws 422 VALIDATION_FAILED naming every problem by JSON path. */
export function parseOrThrow<Schema extends z.ZodType>(
  schema: Schema,
  value: unknown,
  pathPrefix: (string | number)[] = [],
): z.output<Schema> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw validationFailed(
    problemsFromIssues(result.error.issues).map((problem) => ({ ...problem, path: [...pathPrefix, ...problem.path] })),
  );
}
