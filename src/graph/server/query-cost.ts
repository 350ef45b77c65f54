import type { Plugin } from 'graphql-yoga';
import {
  getNamedType,
  isObjectType,
  isInterfaceType,
  Kind,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValueNode,
  valueFromASTUntyped,
} from 'graphql';
import type { DomainError } from '../../kernel/errors.ts';
import { DEFAULT_PAGE_SIZE } from '../../catalog/cursor.ts';
import { engages, heavyReadOf } from './heavy-reads.ts';

/**
 * The cost limit, computed when the variables are known (docs/decisions/graphql.md, "Cost").
 * graphql-armor's cost rule runs at validation, before variables exist, and multiplies only a literal `first`: an
 * omitted `first` (a page of 50) or `first: $n` counted 1, so `databases { data { tables { data { rows … } } } }`
 * priced 50 × 50 × 50 rows as one of each. Here each page field — one with a `first` or `limit` argument — is
 * multiplied by the page it will really return: the literal, the variable's value (or its default in the
 * operation), else the argument's default, else the resolvers' DEFAULT_PAGE_SIZE. Otherwise armor's formula:
 * 1 per scalar, 2 per object, depth factor 1, introspection free; a scalar that declares its own cost (a field's
 * `extensions.cost`, for values that can be megabytes) counts that, and a heavy read (a field whose work grows with its
 * table: `extensions.heavyRead`, src/graph/server/heavy-reads.ts) adds its declared cost to its selection's.
 */
export interface CostLimits {
  maxCost: number;
}

const SCALAR_COST = 1;
const OBJECT_COST = 2;
const PAGE_ARGUMENTS = new Set(['first', 'limit']);

type Variables = Readonly<Record<string, unknown>>;

interface Walk {
  schema: GraphQLSchema;
  fragments: ReadonlyMap<string, FragmentDefinitionNode>;
  variables: Variables;
  defaults: ReadonlyMap<string, ValueNode>;
}

function intOf(value: ValueNode | undefined, walk: Walk): number | null {
  if (!value) return null;
  if (value.kind === Kind.INT) return Number.parseInt(value.value, 10);
  if (value.kind !== Kind.VARIABLE) return null;
  const given = walk.variables[value.name.value];
  if (typeof given === 'number' && Number.isInteger(given)) return given;
  return given === undefined ? intOf(walk.defaults.get(value.name.value), walk) : null;
}

/** The page a field returns (1 for a field that is not a page). */
function pageSize(node: FieldNode, field: GraphQLField<unknown, unknown> | undefined, walk: Walk): number {
  const argument = field?.args.find((candidate) => PAGE_ARGUMENTS.has(candidate.name));
  if (!argument) return 1;
  const written = intOf(node.arguments?.find((candidate) => candidate.name.value === argument.name)?.value, walk);
  const fallback = typeof argument.defaultValue === 'number' ? argument.defaultValue : DEFAULT_PAGE_SIZE;
  return Math.max(written ?? fallback, 1);
}

function fieldOf(parent: GraphQLNamedType | undefined, name: string): GraphQLField<unknown, unknown> | undefined {
  return parent && (isObjectType(parent) || isInterfaceType(parent)) ? parent.getFields()[name] : undefined;
}

function selectionCost(
  selectionSet: SelectionSetNode,
  parent: GraphQLNamedType | undefined,
  walk: Walk,
  seen: ReadonlySet<string>,
): number {
  let cost = 0;
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.FIELD) {
      cost += fieldCost(selection, parent, walk, seen);
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      const type = selection.typeCondition ? walk.schema.getType(selection.typeCondition.name.value) : parent;
      cost += selectionCost(selection.selectionSet, type ?? undefined, walk, seen);
    } else {
      const fragment = walk.fragments.get(selection.name.value);
      // A fragment spread inside itself is a validation error already; the guard only keeps this walk finite.
      if (!fragment || seen.has(fragment.name.value)) continue;
      const type = walk.schema.getType(fragment.typeCondition.name.value) ?? undefined;
      cost += selectionCost(fragment.selectionSet, type, walk, new Set([...seen, fragment.name.value]));
    }
  }
  return cost;
}

/** A field that declares `extensions: { cost }` (e.g. an artifact's content) costs that instead of a scalar's 1. */
function declaredCost(field: GraphQLField<unknown, unknown> | undefined): number {
  const cost = field?.extensions?.cost;
  return typeof cost === 'number' ? cost : SCALAR_COST;
}

/** The argument's value as the resolver will see it: the literal, the variable's value, else its operation default. */
function argumentValue(node: FieldNode, name: string, walk: Walk): unknown {
  const value = node.arguments?.find((candidate) => candidate.name.value === name)?.value;
  if (value?.kind !== Kind.VARIABLE) return value && valueFromASTUntyped(value, walk.variables);
  const given = walk.variables[value.name.value];
  const fallback = walk.defaults.get(value.name.value);
  return given === undefined && fallback ? valueFromASTUntyped(fallback, walk.variables) : given;
}

/** What a heavy read adds: its declared cost, when it is unconditional or one of its `when` arguments is given. */
function heavyCost(node: FieldNode, field: GraphQLField<unknown, unknown> | undefined, walk: Walk): number {
  const declared = heavyReadOf(field?.extensions);
  if (!declared) return 0;
  const heavy = !declared.when || declared.when.some((name) => engages(argumentValue(node, name, walk)));
  return heavy ? declared.cost : 0;
}

function fieldCost(
  node: FieldNode,
  parent: GraphQLNamedType | undefined,
  walk: Walk,
  seen: ReadonlySet<string>,
): number {
  if (node.name.value === '__schema' || node.name.value === '__type') return 0;
  const field = fieldOf(parent, node.name.value);
  const heavy = heavyCost(node, field, walk);
  if (!node.selectionSet) return heavy + declaredCost(field);
  const type = field ? getNamedType(field.type) : undefined;
  return heavy + (OBJECT_COST + selectionCost(node.selectionSet, type, walk, seen)) * pageSize(node, field, walk);
}

function operationOf(document: DocumentNode, name: string | null | undefined): OperationDefinitionNode | undefined {
  const operations = document.definitions.filter((definition) => definition.kind === Kind.OPERATION_DEFINITION);
  return name ? operations.find((operation) => operation.name?.value === name) : operations[0];
}

/** What an operation may return, counted as armor counts it but with every page at its effective size. */
export function operationCost(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  variables: Variables,
): number {
  const operation = operationOf(document, operationName);
  if (!operation) return 0;
  const fragments = new Map(
    document.definitions
      .filter((definition) => definition.kind === Kind.FRAGMENT_DEFINITION)
      .map((fragment) => [fragment.name.value, fragment]),
  );
  const defaults = new Map(
    operation.variableDefinitions?.flatMap((definition) =>
      definition.defaultValue ? [[definition.variable.name.value, definition.defaultValue] as const] : [],
    ) ?? [],
  );
  const root = schema.getRootType(operation.operation) ?? undefined;
  return selectionCost(operation.selectionSet, root, { schema, fragments, variables, defaults }, new Set());
}

/**
 * Refuses an operation over the cost limit before it runs (400 QUERY_TOO_COMPLEX, as armor's other limits).
 * At execution, not validation: Yoga caches validation per document, and the cost depends on the variables.
 */
export function pageSizeCost(limits: CostLimits, onRefusal: (cost: number) => DomainError): Plugin {
  return {
    onExecute: ({ args, setResultAndStopExecution }) => {
      const cost = operationCost(
        args.schema,
        args.document,
        args.operationName,
        (args.variableValues ?? {}) as Variables,
      );
      if (cost > limits.maxCost) setResultAndStopExecution({ errors: [onRefusal(cost)] });
    },
  };
}
