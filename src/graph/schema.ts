import { lexicographicSortSchema, printSchema, type GraphQLSchema } from 'graphql';
import { builder } from './server/builder.ts';
import { queueHeavyReads } from './server/heavy-reads.ts';
import './shared/scalars.ts';
import './preferences/preferences.ts';
import './orgs/orgs.ts';
import './me/me.ts';
import './members/members.ts';
import './keys/personal.ts';
import './keys/team.ts';
import './invitations/invitations.ts';
import './sessions/sessions.ts';
import './sessions/email-verification.ts';
import './sessions/oauth-grants.ts';
import './databases/databases.ts';
import './databases/database-changes.ts';
import './tables/tables.ts';
import './tables/table-changes.ts';
import './tables/schema-endpoint.ts';
import './rows/rows.ts';
import './rows/batch/batch-rows.ts';
import './rows/row-restore.ts';
import './rows/row-pages.ts';
import './rows/row-aggregate.ts';
import './rows/row-search.ts';
import './rows/row-lookup.ts';
import './tables/unique-rules.ts';
import './tables/foreign-keys.ts';
import './tables/constraint-jobs.ts';
import './tables/rule-deletion.ts';
import './views/operations.ts';
import './backups/schedule-preview.ts';
import './backups/backups.ts';
import './backups/schedule.ts';
import './activity/activity-feed.ts';
import './jobs/jobs.ts';
import './jobs/artifacts.ts';
import './jobs/updates.ts';
import './changes/changes.ts';
import './jobs/imports.ts';
import './exports/exports.ts';
import './jobs/schema-changes.ts';
import './trash/trash.ts';
import './webhooks/webhooks.ts';
import './edges/org.ts';
import './edges/database.ts';
import './edges/table.ts';
import './edges/view.ts';
import './edges/row.ts';

/**
 * The whole graph: every domain file above registers its types, queries and mutations on the builder; heavy reads
 * then run in their request's queue (src/graph/server/heavy-reads.ts).
 */
export const schema: GraphQLSchema = queueHeavyReads(builder.toSchema({ sortSchema: true }));

export function printedSchema(): string {
  return `${printSchema(lexicographicSortSchema(schema))}\n`;
}
