import { isInterfaceType, isObjectType, type GraphQLFieldResolver, type GraphQLSchema } from 'graphql';

/**
 * Heavy reads (docs/decisions/graphql.md, "Heavy reads"): fields whose work grows with the table, not with the answer
 * — aggregates, search, similarity, lookups of up to 1,000 keys, exports — declare `extensions: { heavyRead }`.
 * The declaration does two things: the cost walker (query-cost.ts) adds its `cost`, so an operation holds at most
 * MAX_HEAVY_READS of them, and the schema's resolver for it runs inside the request's HeavyReadQueue, so one request's
 * aliases run one after another instead of each taking a pool connection at once (15 aliases of an aggregate over
 * 200k rows held 15 of the 10 connections and another org's p50 went to 10.4 s).
 */
export interface HeavyRead {
  /** What one occurrence adds to the operation's cost (times the pages above it). */
  cost: number;
  /** Heavy only when one of these arguments is given (not null, false or ''): `rows` is heavy with `search`. */
  when?: readonly string[];
}

/**
 * Heavy fields of one request running at once. A request holds one in-flight slot of its credential and of its org
 * (src/http/middleware/in-flight.ts), each slot standing for one pool connection; at one heavy field at a time a
 * request's heavy work stays on that share, so a credential's heavy reads never exceed its in-flight limit (4) nor an
 * org's its own (6), both held below the pool.
 */
export const HEAVY_READS_AT_ONCE = 1;

export function heavyReadOf(extensions: Readonly<Record<string, unknown>> | null | undefined): HeavyRead | null {
  const declared = extensions?.heavyRead as HeavyRead | undefined;
  return declared && typeof declared.cost === 'number' ? declared : null;
}

/** An argument value that makes a conditional heavy read heavy. */
export function engages(value: unknown): boolean {
  return value !== undefined && value !== null && value !== false && value !== '';
}

function heavyWith(declared: HeavyRead, args: Readonly<Record<string, unknown>>): boolean {
  return !declared.when || declared.when.some((name) => engages(args[name]));
}

/** Heavy fields running and waiting in this process, for GET /metrics. */
export const heavyReadsNow = { running: 0, waiting: 0 };

/** One request's turn-taking for its heavy fields: at most `atOnce` run, the others wait in order. */
export class HeavyReadQueue {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly atOnce = HEAVY_READS_AT_ONCE) {}

  private turn(): Promise<void> {
    if (this.running < this.atOnce) {
      this.running += 1;
      return Promise.resolve();
    }
    heavyReadsNow.waiting += 1;
    return new Promise<void>((resolve) => this.waiting.push(resolve)).finally(() => {
      heavyReadsNow.waiting -= 1;
    });
  }

  /** The finished field's turn passes to the first waiting one (the count stays), else it is given back. */
  private done(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.running -= 1;
  }

  async run<T>(work: () => T | Promise<T>): Promise<T> {
    await this.turn();
    heavyReadsNow.running += 1;
    try {
      return await work();
    } finally {
      heavyReadsNow.running -= 1;
      this.done();
    }
  }
}

type Resolver = GraphQLFieldResolver<unknown, { heavyReads: HeavyReadQueue }, Record<string, unknown>>;

function queued(resolve: Resolver, declared: HeavyRead): Resolver {
  return (source, args, context, info) =>
    heavyWith(declared, args)
      ? context.heavyReads.run(() => resolve(source, args, context, info))
      : resolve(source, args, context, info);
}

/**
 * Wraps the resolver of every field that declares a heavy read in the request's queue. On the built schema, once,
 * so graphql-js and graphql-jit (which compiles the schema's resolvers) both run the wrapped one.
 */
export function queueHeavyReads(schema: GraphQLSchema): GraphQLSchema {
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) && !isInterfaceType(type)) continue;
    for (const field of Object.values(type.getFields())) {
      const declared = heavyReadOf(field.extensions);
      if (declared && field.resolve) field.resolve = queued(field.resolve as Resolver, declared);
    }
  }
  return schema;
}
