import {
  ActivityFilterQuery,
  ActivityPageResponse,
  ActivityQuery,
  FilterOptionsResponse,
} from '../../../contracts/activity.ts';
import { ListActivityDocument, ListActivityFilterOptionsDocument } from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';

export const activityRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/activity',
    summary: 'List activity (endpoint 11)',
    tags: ['activity'],
    operation: ListActivityDocument,
    query: ActivityQuery,
    response: ActivityPageResponse,
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/orgs/{orgId}/activity/filters',
    summary: 'List activity filter options (endpoint 12)',
    tags: ['activity'],
    operation: ListActivityFilterOptionsDocument,
    query: ActivityFilterQuery,
    response: FilterOptionsResponse,
  }),
];
