import { z } from 'zod';
import { ACTIVITY_EVENTS } from '../jobs/engine/kinds.ts';
import { PageLimit } from '../catalog/cursor.ts';
import { ACTIVITY_CATEGORIES, Id, Timestamp } from '../kernel/formats.ts';

/** The activity domain's contract: the feed (endpoint 11) and its filter options (endpoint 12). No side effects. */

/** `resource` and `databaseId` / `tableId` narrow the same thing; when both are given they must name the same one. */
function agrees(resource: string | undefined, kind: 'database' | 'table', id: string | undefined): boolean {
  if (!resource || !id || !resource.startsWith(`${kind}:`)) return true;
  return resource === `${kind}:${id}`;
}

const Resource = z.string().regex(/^(database|table):[0-9A-HJKMNP-TV-Z]{26}$/, 'must be database:<ID> or table:<ID>');

/** Spec 4.11's parameters, named (the spec leaves them unnamed): shared by GraphQL arguments and the REST query. */
export const ActivityQuery = z
  .strictObject({
    databaseId: Id.optional(),
    tableId: Id.optional(),
    category: z.enum(ACTIVITY_CATEGORIES).optional(),
    event: z
      .string()
      .refine((event) => ACTIVITY_EVENTS.includes(event), 'must be an event kind of spec §6')
      .optional(),
    q: z.string().min(1).max(256).optional(),
    resource: Resource.optional(),
    cursor: z.string().min(1).max(200).optional(),
    from: Timestamp.optional(),
    to: Timestamp.optional(),
    limit: PageLimit.optional(),
  })
  .refine((query) => !query.from || !query.to || query.from < query.to, { path: ['to'], message: 'must be after from' })
  .refine(
    (query) => agrees(query.resource, 'database', query.databaseId) && agrees(query.resource, 'table', query.tableId),
    {
      path: ['resource'],
      message: 'names another database or table than databaseId / tableId',
    },
  );
export type ActivityQuery = z.infer<typeof ActivityQuery>;

export const ActivityFilterQuery = z.strictObject({
  type: z.enum(['actors', 'resources']),
  q: z.string().max(200).optional(),
  limit: PageLimit.optional(),
});

const Named = z.strictObject({ id: Id, name: z.string(), state: z.string() });

/** Spec 2.10. Members a given event does not have are null. */
export const ActivityEntryResponse = z.strictObject({
  id: Id,
  category: z.enum(ACTIVITY_CATEGORIES),
  occurredAt: Timestamp,
  summary: z.string(),
  event: z.string(),
  status: z.string(),
  actor: z.strictObject({ id: Id, key: z.string(), kind: z.string(), name: z.string(), avatarUrl: z.string() }),
  database: Named.nullable(),
  table: Named.nullable(),
  rowId: Id.nullable(),
  affectedRows: z.number().int().nullable(),
  jobId: Id.nullable(),
  fileName: z.string().nullable(),
  destination: z.string().nullable(),
});

/** Spec 4.11. */
export const ActivityPageResponse = z.strictObject({
  data: z.array(ActivityEntryResponse).max(100),
  asOf: Timestamp,
  startCursor: z.string().max(200),
  nextCursor: z.string().max(200).nullable(),
  hasMore: z.boolean(),
  availableCategories: z.array(z.enum(ACTIVITY_CATEGORIES)),
  scope: z.strictObject({ database: Named.nullable(), table: Named.nullable() }),
});

/** Spec 4.12 / 2.11. */
export const FilterOptionsResponse = z.strictObject({
  data: z
    .array(
      z.strictObject({
        value: z.string(),
        label: z.string(),
        kind: z.string(),
        avatarUrl: z.string(),
        description: z.string(),
      }),
    )
    .max(100),
  hasMore: z.boolean(),
});
