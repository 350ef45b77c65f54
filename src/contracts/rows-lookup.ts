import { z } from 'zod';
import { Id } from '../kernel/formats.ts';

/** POST …/rows/lookup and `lookupRows` (issue 28): rows by the values of an unconditional unique rule. */
export const MAX_LOOKUP_KEYS = 1000;

export const LookupRowsBody = z.strictObject({
  ruleId: Id.describe('an unconditional unique rule of the table'),
  keys: z
    .array(z.array(z.unknown()).min(1).max(16))
    .min(1)
    .max(MAX_LOOKUP_KEYS)
    .describe('each key: the rule’s field values in the rule’s field order'),
});
export type LookupRowsBody = z.infer<typeof LookupRowsBody>;

export const LookupRowsResponse = <Row extends z.ZodType>(row: Row) =>
  z.strictObject({
    data: z
      .array(row.nullable())
      .max(MAX_LOOKUP_KEYS)
      .describe('one entry per key, in key order: its row, or null when no row holds it'),
  });
