import { useGraphQlJit } from '@envelop/graphql-jit';
import {
  getNamedType,
  isScalarType,
  isSpecifiedScalarType,
  Kind,
  TypeInfo,
  visit,
  visitWithTypeInfo,
  type ASTNode,
  type DocumentNode,
  type GraphQLSchema,
} from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Logger } from '../../kernel/log.ts';
import type { Context } from './context.ts';

const LITERALS = new Set<string>([
  Kind.INT,
  Kind.FLOAT,
  Kind.STRING,
  Kind.BOOLEAN,
  Kind.NULL,
  Kind.ENUM,
  Kind.LIST,
  Kind.OBJECT,
]);

/**
 * Whether graphql-jit runs this document exactly as graphql-js would. It does not when
 * - it is a subscription: graphql-jit calls the field's `subscribe` with the operation's variables in place of
 *   the field's arguments;
 * - a literal stands where a custom scalar (JSON, Timestamp…) is expected: graphql-jit parses it once at compile
 *   time with no variables, so `where: {value: $name}` loses `$name`, and it prints a plain-text line to stderr;
 * - a variable sits inside a literal list or input object: correct in the cases we tested, but bound by
 *   graphql-jit's own code path, which nothing here needs to be fast.
 * Those documents run on graphql-js. The REST facade's operations pass every argument as a variable of its own.
 */
export function compilesExactly(schema: GraphQLSchema, document: DocumentNode, operationName?: string | null): boolean {
  const operations = document.definitions.filter((definition) => definition.kind === Kind.OPERATION_DEFINITION);
  const operation = operationName
    ? operations.find((candidate) => candidate.name?.value === operationName)
    : operations[0];
  if (!operation || operation.operation === 'subscription') return false;
  const typeInfo = new TypeInfo(schema);
  let literalDepth = 0;
  let exact = true;
  const leave = (node: ASTNode) => {
    if (node.kind === Kind.LIST || node.kind === Kind.OBJECT) literalDepth -= 1;
  };
  visit(
    document,
    visitWithTypeInfo(typeInfo, {
      enter(node) {
        if (node.kind === Kind.VARIABLE) {
          if (literalDepth > 0) exact = false;
          return undefined;
        }
        if (!LITERALS.has(node.kind)) return undefined;
        const type = getNamedType(typeInfo.getInputType());
        if (type && isScalarType(type) && !isSpecifiedScalarType(type)) exact = false;
        if (node.kind === Kind.LIST || node.kind === Kind.OBJECT) literalDepth += 1;
        return undefined;
      },
      leave,
    }),
  );
  return exact;
}

/**
 * graphql-jit for the documents it runs exactly as graphql-js (see compilesExactly); graphql-js for the rest.
 * Measured on a 100-row page (bench/graphql-pages.bench.ts, docs/decisions/graphql-execution.md).
 */
export function compiledExecution(logger: Logger): Plugin<Context> {
  const verdicts = new WeakMap<DocumentNode, Map<string, boolean>>();
  const exact = (schema: GraphQLSchema, document: DocumentNode, operationName?: string | null): boolean => {
    const byName = verdicts.get(document) ?? new Map<string, boolean>();
    verdicts.set(document, byName);
    const key = operationName ?? '';
    let verdict = byName.get(key);
    if (verdict === undefined) {
      verdict = compilesExactly(schema, document, operationName);
      byName.set(key, verdict);
    }
    return verdict;
  };
  return useGraphQlJit(
    {},
    {
      enableIf: (args) => exact(args.schema, args.document, args.operationName),
      onError: (result) =>
        logger.warn(
          { errors: result.errors?.map((error) => error.message) },
          'graphql-jit could not compile a document',
        ),
    },
  ) as Plugin<Context>;
}
