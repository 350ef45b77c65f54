import { visit, valueFromASTUntyped, type DocumentNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { validationFailed } from '../../kernel/errors.ts';
import { UNSTORABLE_TEXT_MESSAGE, unstorablePaths, type JsonPath } from '../../kernel/input-hygiene.ts';
import type { Context } from './context.ts';

/**
 * Top-level input members whose own validators already refuse unstorable text with more precise answers: row
 * cells (every problem at `['values', key]` with its fieldId) and filters (at the condition's path).
 */
const CHECKED_DOWNSTREAM = new Set(['values', 'where']);

/** Paths are reported as REST clients see them: the `input` variable is the request body. */
function reported(path: JsonPath): JsonPath {
  return path[0] === 'input' ? path.slice(1) : path;
}

function checkedHere(path: JsonPath): boolean {
  const shown = reported(path);
  return !(shown.length === 1 && CHECKED_DOWNSTREAM.has(String(shown[0])));
}

const skip = (path: JsonPath) => !checkedHere(path);

/** Literal argument values written into the document itself (`createDatabase(input: {name: "…"})`). */
function literalArguments(document: DocumentNode): Record<string, unknown>[] {
  const literals: Record<string, unknown>[] = [];
  visit(document, {
    Argument(node) {
      literals.push({ [node.name.value]: valueFromASTUntyped(node.value) });
    },
  });
  return literals;
}

/**
 * One refusal for every operation, REST-translated or sent to /graphql: a string anywhere in the variables or
 * the document's literals that holds U+0000 or an unpaired surrogate is a 422 before any resolver runs, so no
 * such text reaches the catalog, the data plane, a SQL parameter or an idempotency record.
 */
export function refuseUnstorableText(): Plugin<Context> {
  // What the literals hold depends on the document alone: REST's documents are constants and Yoga's parse cache
  // hands /graphql one DocumentNode per query text, so each document is walked once, not on every request (the
  // walk was 0.7 % of a REST page's CPU, issue 30).
  const literalPaths = new WeakMap<DocumentNode, JsonPath[]>();
  const unstorableLiterals = (document: DocumentNode): JsonPath[] => {
    let paths = literalPaths.get(document);
    if (paths === undefined) {
      paths = literalArguments(document).flatMap((source) => unstorablePaths(source, { skip }));
      literalPaths.set(document, paths);
    }
    return paths;
  };
  return {
    onExecute: ({ args, setResultAndStopExecution }) => {
      const paths = [...unstorablePaths(args.variableValues ?? {}, { skip }), ...unstorableLiterals(args.document)];
      if (paths.length === 0) return;
      const problems = paths.slice(0, 20).map((path) => ({ path: reported(path), message: UNSTORABLE_TEXT_MESSAGE }));
      setResultAndStopExecution({
        errors: [
          validationFailed(
            problems,
            'Text in the request holds U+0000 or an unpaired surrogate, which cannot be stored.',
          ),
        ],
      });
    },
  };
}
