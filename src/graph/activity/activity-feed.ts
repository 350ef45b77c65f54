import { createHash } from 'node:crypto';
import { z } from 'zod';
import {
  selectActors,
  selectFeedPage,
  selectResources,
  type ActorRecord,
  type FeedEntryRecord,
  type FeedFilter,
  type FeedScopeRecord,
  type ResourceRecord,
} from '../../catalog/activity-feed.ts';
import { notFound } from '../../kernel/errors.ts';
import { ACTIVITY_CATEGORIES, Id, Timestamp } from '../../kernel/formats.ts';
import { builder } from '../server/builder.ts';
import { dataPlane, type Context } from '../server/context.ts';
import { cursorInvalid, cursorKey, decodeCursor, encodeCursor } from '../../catalog/cursor.ts';
import { canonicalJson } from '../../idempotency/key.ts';
import { parseOrThrow } from '../../kernel/validation.ts';
import { ActivityFilterQuery, ActivityQuery } from '../../contracts/activity.ts';

/**
 * The activity feed (endpoint 11) and its filter options (endpoint 12). Every member may read the whole feed of
 * their org (categories are not role-restricted today); pages are keyset scans under a fixed `asOf` cutoff.
 */
export const ACTIVITY_PAGE_SIZE = 50;
export const FILTER_OPTIONS_PAGE_SIZE = 20;

type Named = { id: string; name: string; state: string };

export type ActivityEntryShape = {
  id: string;
  category: string;
  occurredAt: string;
  summary: string;
  event: string;
  status: string;
  actor: { id: string; key: string; kind: string; name: string; avatarUrl: string };
  database: Named | null;
  table: Named | null;
  rowId: string | null;
  affectedRows: number | null;
  jobId: string | null;
  fileName: string | null;
  destination: string | null;
};

export type ActivityPageShape = {
  data: ActivityEntryShape[];
  asOf: string;
  startCursor: string;
  nextCursor: string | null;
  hasMore: boolean;
  availableCategories: string[];
  scope: { database: Named | null; table: Named | null };
};

export type FilterOptionShape = { value: string; label: string; kind: string; avatarUrl: string; description: string };

const NamedRef = builder.objectRef<Named>('NamedResource').implement({
  fields: (t) => ({ id: t.exposeID('id'), name: t.exposeString('name'), state: t.exposeString('state') }),
});
const ActivityActor = builder.objectRef<ActivityEntryShape['actor']>('ActivityActor').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    key: t.exposeString('key'),
    kind: t.exposeString('kind'),
    name: t.exposeString('name'),
    avatarUrl: t.exposeString('avatarUrl'),
  }),
});
const ActivityEntry = builder.objectRef<ActivityEntryShape>('ActivityEntry').implement({
  description: 'Spec 2.10.',
  fields: (t) => ({
    id: t.exposeID('id'),
    category: t.exposeString('category'),
    occurredAt: t.field({ type: 'Timestamp', resolve: (entry) => entry.occurredAt }),
    summary: t.exposeString('summary'),
    event: t.exposeString('event'),
    status: t.exposeString('status'),
    actor: t.field({ type: ActivityActor, resolve: (entry) => entry.actor }),
    database: t.field({ type: NamedRef, nullable: true, resolve: (entry) => entry.database }),
    table: t.field({ type: NamedRef, nullable: true, resolve: (entry) => entry.table }),
    rowId: t.exposeID('rowId', { nullable: true }),
    affectedRows: t.exposeInt('affectedRows', { nullable: true }),
    jobId: t.exposeID('jobId', { nullable: true }),
    fileName: t.exposeString('fileName', { nullable: true }),
    destination: t.exposeString('destination', { nullable: true }),
  }),
});
const ActivityScope = builder.objectRef<ActivityPageShape['scope']>('ActivityScope').implement({
  fields: (t) => ({
    database: t.field({ type: NamedRef, nullable: true, resolve: (scope) => scope.database }),
    table: t.field({ type: NamedRef, nullable: true, resolve: (scope) => scope.table }),
  }),
});
const ActivityPage = builder.objectRef<ActivityPageShape>('ActivityPage').implement({
  description: 'Spec 4.11: newest first, under the `asOf` cutoff of the first page.',
  fields: (t) => ({
    data: t.field({ type: [ActivityEntry], resolve: (page) => page.data }),
    asOf: t.field({ type: 'Timestamp', resolve: (page) => page.asOf }),
    startCursor: t.exposeString('startCursor'),
    nextCursor: t.exposeString('nextCursor', { nullable: true }),
    hasMore: t.exposeBoolean('hasMore'),
    availableCategories: t.exposeStringList('availableCategories'),
    scope: t.field({ type: ActivityScope, resolve: (page) => page.scope }),
  }),
});
const FilterOption = builder.objectRef<FilterOptionShape>('ActivityFilterOption').implement({
  description: 'Spec 2.11.',
  fields: (t) => ({
    value: t.exposeString('value'),
    label: t.exposeString('label'),
    kind: t.exposeString('kind'),
    avatarUrl: t.exposeString('avatarUrl'),
    description: t.exposeString('description'),
  }),
});
const FilterOptionPage = builder
  .objectRef<{ data: FilterOptionShape[]; hasMore: boolean }>('ActivityFilterOptionPage')
  .implement({
    fields: (t) => ({
      data: t.field({ type: [FilterOption], resolve: (page) => page.data }),
      hasMore: t.exposeBoolean('hasMore'),
    }),
  });

/** The filters a feed cursor is bound to: everything but the cursor and the page size. */
function filterOf(orgId: string, query: ActivityQuery): FeedFilter {
  const [kind, id] = query.resource?.split(':') ?? [];
  return {
    orgId,
    databaseId: kind === 'database' ? id : query.databaseId,
    tableId: kind === 'table' ? id : query.tableId,
    category: query.category,
    event: query.event,
    text: query.q,
    from: query.from,
    to: query.to,
  };
}

const FeedCursor = z.strictObject({ asOf: Timestamp, at: z.string().max(40).optional(), id: Id.optional() });

function cursorScope(orgId: string, query: ActivityQuery): string {
  const { cursor: _cursor, limit: _limit, ...filters } = query;
  return `activity:${orgId}:${createHash('sha256').update(canonicalJson(filters)).digest('base64url')}`;
}

/** The database and table the query is scoped to, which must be the caller's org's (else 404). */
function scopeOf(filter: FeedFilter, found: Partial<FeedScopeRecord> | undefined): ActivityPageShape['scope'] {
  if (!filter.tableId && !filter.databaseId) return { database: null, table: null };
  if (filter.tableId && !found?.table_id) throw notFound('table');
  if (filter.databaseId && !found?.database_id) throw notFound('database');
  return {
    database: found?.database_id
      ? { id: found.database_id, name: found.database_name!, state: found.database_state! }
      : null,
    table: found?.table_id ? { id: found.table_id, name: found.table_name!, state: found.table_state! } : null,
  };
}

async function feedPage(context: Context, orgId: string, query: ActivityQuery): Promise<ActivityPageShape> {
  const filter = filterOf(orgId, query);
  const key = await cursorKey(context.prisma);
  const scope = cursorScope(orgId, query);
  const position = query.cursor ? decodeCursor(key, scope, query.cursor, FeedCursor) : null;
  if (position && (position.at === undefined) !== (position.id === undefined)) throw cursorInvalid();
  const asOf = position?.asOf ?? new Date().toISOString();
  const after = position?.at && position.id ? { occurredAt: position.at, id: position.id } : null;
  const limit = query.limit ?? ACTIVITY_PAGE_SIZE;
  const rows = await dataPlane(context).query<FeedEntryRecord>(...spread(selectFeedPage(filter, asOf, after, limit)));
  const resourceScope = scopeOf(filter, rows[0]);
  const records = rows.filter((row) => row.entry !== null);
  const hasMore = records.length > limit;
  const page = records.slice(0, limit);
  const last = page[page.length - 1];
  return {
    data: page.map((record) => JSON.parse(record.entry!) as ActivityEntryShape),
    asOf,
    startCursor: encodeCursor(key, scope, { asOf }),
    nextCursor: hasMore && last ? encodeCursor(key, scope, { asOf, at: last.position!, id: last.id! }) : null,
    hasMore,
    availableCategories: [...ACTIVITY_CATEGORIES],
    scope: resourceScope,
  };
}

const spread = (statement: { sql: string; params: unknown[] }): [string, unknown[]] => [
  statement.sql,
  statement.params,
];

function actorOption(record: ActorRecord): FilterOptionShape {
  const kind = record.actor_kind === 'team-key' ? 'Team key' : 'User';
  return {
    value: record.actor_id,
    label: record.actor_name,
    kind: 'actor',
    avatarUrl: '',
    description: record.actor_key ? `${kind} · key ${record.actor_key}` : kind,
  };
}

function resourceOption(record: ResourceRecord): FilterOptionShape {
  return {
    value: `${record.kind}:${record.id}`,
    label: record.name,
    kind: record.kind,
    avatarUrl: '',
    description: record.kind === 'table' ? `Table in ${record.database_name ?? ''}` : 'Database',
  };
}

const queryArgs = builder.args((t) => ({
  orgId: t.id({ required: true, validate: Id }),
  databaseId: t.id(),
  tableId: t.id(),
  category: t.string(),
  event: t.string(),
  q: t.string(),
  resource: t.string(),
  cursor: t.string(),
  from: t.string(),
  to: t.string(),
  limit: t.int(),
}));

/** GraphQL arguments through the same zod rules as the REST query (so /graphql gets the same 422s). */
function parsedQuery<Schema extends z.ZodType>(schema: Schema, args: Record<string, unknown>): z.output<Schema> {
  const { orgId: _orgId, ...rest } = args;
  const defined = Object.fromEntries(Object.entries(rest).filter(([, value]) => value !== null && value !== undefined));
  return parseOrThrow(schema, defined);
}

builder.queryFields((t) => ({
  activity: t.field({
    type: ActivityPage,
    description: 'The org’s activity, newest first (endpoint 11).',
    args: queryArgs,
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'org:read' }),
    resolve: (_root, args, context) => feedPage(context, String(args.orgId), parsedQuery(ActivityQuery, args)),
  }),
  activityFilterOptions: t.field({
    type: FilterOptionPage,
    description:
      'Actors or resources in the org’s history matching `q` (endpoint 12); `hasMore` asks to narrow the search.',
    args: {
      orgId: t.arg.id({ required: true, validate: Id }),
      type: t.arg.string({ required: true }),
      q: t.arg.string(),
      limit: t.arg.int(),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'org:read' }),
    resolve: async (_root, args, context) => {
      const query = parsedQuery(ActivityFilterQuery, args);
      const limit = query.limit ?? FILTER_OPTIONS_PAGE_SIZE;
      const text = query.q === '' ? undefined : query.q;
      const orgId = String(args.orgId);
      const options =
        query.type === 'actors'
          ? (await dataPlane(context).query<ActorRecord>(...spread(selectActors(orgId, text, limit)))).map(actorOption)
          : (await dataPlane(context).query<ResourceRecord>(...spread(selectResources(orgId, text, limit)))).map(
              resourceOption,
            );
      return { data: options.slice(0, limit), hasMore: options.length > limit };
    },
  }),
}));
