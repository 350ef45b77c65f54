import { z } from 'zod';
import { AGGREGATE_FUNCTIONS, GRANULARITIES, HAVING_OPS, type HavingOp } from '../data/aggregate.ts';
import { FilterExpression } from '../data/filter.ts';
import { isKnownTimezone } from '../kernel/timezones.ts';
import { Id } from '../kernel/formats.ts';
import { SearchText } from './rows-search.ts';

/** POST …/rows/aggregate and `aggregateRows` / `Table.aggregate` (issue 28): the request and its answer. */
const FieldReference = z.string().min(1).max(64).describe('a field id, or failing that an exact field name');
const AggregateName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'must be 1 to 64 letters, digits or _, not starting with a digit');
/** The cursor bound of every list (spec §8). */
const AggregateCursor = z.string().min(1).max(1024);

export const MAX_GROUP_BY = 3;
export const MAX_AGGREGATES = 20;
export const MAX_AGGREGATE_LIMIT = 1000;
export const DEFAULT_AGGREGATE_LIMIT = 100;

export const GroupByItem = z.union(
  [
    FieldReference,
    z.strictObject({
      fieldId: FieldReference,
      granularity: z
        .enum(GRANULARITIES)
        .optional()
        .describe('dates and datetimes: the period a value falls in (default day)'),
      timeZone: z
        .string()
        .max(64)
        .refine(isKnownTimezone, 'must be an IANA time zone name')
        .optional()
        .describe('datetimes: the zone their periods are reckoned in (default UTC)'),
    }),
  ],
  { error: 'must be a field id (or name) or {fieldId, granularity?, timeZone?}' },
);
export type GroupByItem = z.infer<typeof GroupByItem>;

export const AggregateItem = z.strictObject({
  fn: z.enum(AGGREGATE_FUNCTIONS),
  fieldId: FieldReference.optional().describe('the field aggregated; absent for count'),
  as: AggregateName.describe('the key of this value in each group’s `values`'),
  fraction: z.number().min(0).max(1).optional().describe('percentile only: 0.5 is the median'),
});
export type AggregateItem = z.infer<typeof AggregateItem>;

export type HavingInput =
  | { aggregate: string; op: HavingOp; value?: number | string | undefined }
  | { and: HavingInput[] }
  | { or: HavingInput[] };

export const HavingInput: z.ZodType<HavingInput> = z.lazy(() =>
  z.union([
    z.strictObject({
      aggregate: AggregateName,
      op: z.enum(HAVING_OPS),
      value: z.union([z.number(), z.string().max(1000)]).optional(),
    }),
    z.strictObject({ and: z.array(HavingInput).min(1).max(20) }),
    z.strictObject({ or: z.array(HavingInput).min(1).max(20) }),
  ]),
);

export const AggregateOrderItem = z.union(
  [
    z.strictObject({ fieldId: FieldReference.describe('a grouped field'), direction: z.enum(['asc', 'desc']) }),
    z.strictObject({ aggregate: AggregateName.describe('an aggregate’s `as`'), direction: z.enum(['asc', 'desc']) }),
  ],
  { error: 'must be {fieldId, direction} (a grouped field) or {aggregate, direction}' },
);
export type AggregateOrderItem = z.infer<typeof AggregateOrderItem>;

export const AggregateRowsBody = z.strictObject({
  viewId: Id.optional().describe('aggregate the rows of this saved view (its filter, and `where` on top)'),
  where: FilterExpression.optional().describe('filter expression (spec 2.4), as for GET …/rows'),
  search: SearchText.optional(),
  groupBy: z.array(GroupByItem).max(MAX_GROUP_BY).optional(),
  aggregates: z.array(AggregateItem).min(1).max(MAX_AGGREGATES),
  having: HavingInput.optional().describe('conditions on the aggregates’ values, by `as`'),
  orderBy: z
    .array(AggregateOrderItem)
    .max(MAX_GROUP_BY + MAX_AGGREGATES)
    .optional(),
  limit: z
    .int()
    .min(1)
    .max(MAX_AGGREGATE_LIMIT)
    .optional()
    .describe(`groups per page, default ${DEFAULT_AGGREGATE_LIMIT}`),
  cursor: AggregateCursor.optional(),
});
export type AggregateRowsBody = z.infer<typeof AggregateRowsBody>;

const AggregateValue = z.union([z.number(), z.string(), z.boolean(), z.null()]);

export const AggregateGroupResponse = z.strictObject({
  group: z.record(z.string(), AggregateValue).describe('each grouped field’s value, by field id ({} without groupBy)'),
  values: z
    .record(z.string(), z.union([z.number(), z.string(), z.null()]))
    .describe(
      'each aggregate by `as`. Counts are numbers. sum, min and max of numbers are exact: a JSON number when its decimal ' +
        'text is exactly the result, else the decimal as a string (e.g. "9007199254740993"). avg and percentile are ' +
        'doubles. min and max of dates are YYYY-MM-DD, of datetimes UTC timestamps, of text strings; null over no values.',
    ),
});

export const AggregateRowsResponse = z.strictObject({
  data: z.array(AggregateGroupResponse).max(MAX_AGGREGATE_LIMIT),
  nextCursor: z.string().nullable(),
  hasMore: z.boolean(),
});
