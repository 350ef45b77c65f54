import { z } from 'zod';
import { ACTIVITY_CATEGORIES, Id, Timestamp } from '../../../kernel/formats.ts';
import { ActivityFilterQuery, ActivityQuery } from '../../../graph/activity/activity-feed.ts';
import { ListActivityDocument, ListActivityFilterOptionsDocument } from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';

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

const OrgPath = z.strictObject({ orgId: Id });

export const activityRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/activity',
    summary: 'List activity (endpoint 11)',
    tags: ['activity'],
    operation: ListActivityDocument,
    params: OrgPath,
    query: ActivityQuery,
    idempotent: false,
    successStatus: 200,
    response: ActivityPageResponse,
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/activity/filters',
    summary: 'List activity filter options (endpoint 12)',
    tags: ['activity'],
    operation: ListActivityFilterOptionsDocument,
    params: OrgPath,
    query: ActivityFilterQuery,
    idempotent: false,
    successStatus: 200,
    response: FilterOptionsResponse,
  }),
];
