import { DomainError, httpStatusOf, type ErrorCode, type FieldProblem } from '../../../kernel/errors.ts';

export interface BatchFailure {
  index: number;
  code: ErrorCode;
  message: string;
  details?: unknown;
}

/**
 * Failures of a batch, answered together. Which status wins when they are mixed: 422 (the request itself is wrong;
 * fixing it may change everything else), then 413 (a row too large), then 409 (the data changed; retry after
 * reading it again). The top-level code is that of the first failing operation with the winning status;
 * `details.failures` lists every failing operation by index, and a 422 also carries the usual `problems` with paths
 * under `operations.<index>`.
 */
export class BatchFailures {
  readonly list: BatchFailure[] = [];

  add(index: number, error: DomainError): void {
    this.list.push({
      index,
      code: error.code,
      message: error.message,
      ...(error.details === undefined ? {} : { details: error.details }),
    });
  }

  invalid(index: number, path: (string | number)[], message: string): void {
    this.add(index, new DomainError('VALIDATION_FAILED', message, { details: { problems: [{ path, message }] } }));
  }

  has(index: number): boolean {
    return this.list.some((failure) => failure.index === index);
  }

  throwIfAny(total: number): void {
    if (this.list.length === 0) return;
    const failures = [...this.list].sort((a, b) => a.index - b.index);
    const rank = (failure: BatchFailure) => [422, 413, 409].indexOf(httpStatusOf(failure.code));
    const winner = failures.reduce((best, failure) => (rank(failure) < rank(best) ? failure : best));
    const summary = `${new Set(failures.map((failure) => failure.index)).size} of ${total} operations failed; nothing was written.`;
    if (winner.code === 'VALIDATION_FAILED') {
      const problems = failures.flatMap((failure) =>
        failure.code === 'VALIDATION_FAILED'
          ? (failure.details as { problems: FieldProblem[] }).problems.map((problem) => ({
              ...problem,
              path: ['operations', failure.index, ...problem.path],
            }))
          : [],
      );
      throw new DomainError('VALIDATION_FAILED', summary, { details: { problems, failures } });
    }
    throw new DomainError(winner.code, summary, { details: { failures } });
  }
}
