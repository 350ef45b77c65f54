import { GraphQLError, Kind, valueFromASTUntyped } from 'graphql';
import { builder } from '../server/builder.ts';
import { isRealInstant, TIMESTAMP_PATTERN } from '../../kernel/formats.ts';

// Resolvers may return a Date or, when an idempotent result is replayed, the stored string form.

function toTimestamp(value: unknown): string {
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'string' && TIMESTAMP_PATTERN.test(value)) return value;
  throw new GraphQLError('Timestamp must be a UTC string YYYY-MM-DDTHH:MM:SS.mmmZ.');
}

/** Input must also be a real instant (no month 13, no February 30); output is ours and already is one. */
function fromClient(value: unknown): Date {
  const text = toTimestamp(value);
  if (!isRealInstant(text)) throw new GraphQLError('Timestamp must be a real UTC instant.');
  return new Date(text);
}

builder.scalarType('Timestamp', {
  description: 'UTC instant, `YYYY-MM-DDTHH:MM:SS.mmmZ` with exactly three fractional digits.',
  serialize: toTimestamp,
  parseValue: fromClient,
  parseLiteral: (ast) => {
    if (ast.kind !== Kind.STRING) throw new GraphQLError('Timestamp must be a string.');
    return fromClient(ast.value);
  },
});

/** Cell values, field options and filters: their shape depends on the table, so they travel as plain JSON. */
builder.scalarType('JSON', {
  description: 'Any JSON value. Its shape is described by the table schema (`tableSchema`) it belongs to.',
  serialize: (value) => value,
  parseValue: (value) => value,
  parseLiteral: (ast, variables) => valueFromASTUntyped(ast, variables),
});
